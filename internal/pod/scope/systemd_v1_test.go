package scope

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestPlacedIn(t *testing.T) {
	const unit = "/mountcontainers.slice/mountcontainers-x.slice/mount-0123456789abcdef.scope"
	for _, tc := range []struct {
		name, cgroup string
		want         bool
	}{
		{"cgroup2, own namespace", "0::" + unit, true},
		{"cgroup2, read from the host", "0::/mcbed-node1/payload" + unit, true},
		{"name=systemd", "9:name=systemd:" + unit, true},
		{"still in the container", "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-1.scope", false},
		{"a v1 controller only", "4:memory:" + unit, false},
		{"a longer name", "0::/x" + unit + "2", false},
		{"a suffix not at a boundary", "0::/xmount-0123456789abcdef.scope", false},
	} {
		m, err := ParseMembership(strings.NewReader(tc.cgroup + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := placedIn(m, unit); got != tc.want {
			t.Errorf("%s: placedIn(%q) = %v, want %v", tc.name, tc.cgroup, got, tc.want)
		}
	}
}

// TestLeaveCaller moves a real process out of a real cgroup v1 freezer
// cgroup of this machine, as the systemd backend does when systemd left a
// placed process in a hierarchy it does not manage; a hierarchy systemd
// did move it in, and one where it is at the root, are left alone.
func TestLeaveCaller(t *testing.T) {
	needRoot(t)
	const freezer = "/sys/fs/cgroup/freezer"
	if _, err := os.Stat(filepath.Join(freezer, "release_agent")); err != nil {
		t.Skip("no cgroup v1 freezer hierarchy at " + freezer)
	}
	cg := filepath.Join(freezer, "mc-leave-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(cg); err != nil {
			t.Errorf("remove %s: %v", cg, err)
		}
	})
	sleep := startSleep(t) // killed before the rmdir above (cleanups run last first)
	pid := sleep.Process.Pid
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
	before, err := ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	fz := freezerPath(t, before)
	if fz != "/"+filepath.Base(cg) {
		t.Fatalf("freezer cgroup %q before, want /%s", fz, filepath.Base(cg))
	}
	// systemd moved it in its own hierarchy and in memory (as far as
	// leaveCaller can tell), not in freezer.
	var after Membership
	for _, m := range before {
		switch {
		case m.ID == 0 || strings.Join(m.Controllers, ",") == "name=systemd":
			m.Path = "/unit.scope"
		case strings.Join(m.Controllers, ",") == "memory":
			m.Path = "/elsewhere"
		}
		after = append(after, m)
	}
	s := &systemd{cfg: Config{CgroupRoot: "/sys/fs/cgroup"}}
	moved, err := s.leaveCaller(pid, before, after)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(moved, " ") != "freezer" {
		t.Errorf("moved in %q; want freezer alone (memory was systemd's; the others at the root or unchanged: %v)", moved, before)
	}
	now, err := ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	if fz := freezerPath(t, now); fz != "/" {
		t.Errorf("freezer cgroup %q after, want /", fz)
	}
	for i, m := range now {
		if strings.Join(m.Controllers, ",") != "freezer" && m.Path != before[i].Path {
			t.Errorf("%v moved from %s to %s", m.Controllers, before[i].Path, m.Path)
		}
	}
}

func freezerPath(t *testing.T, m Membership) string {
	t.Helper()
	for _, e := range m {
		if strings.Join(e.Controllers, ",") == "freezer" {
			return e.Path
		}
	}
	t.Fatal("no freezer hierarchy in", m)
	return ""
}

// TestWriteProcsRefuses: a cgroup.procs that is not a cgroup file system's
// regular file, or is a symbolic link, is never written.
func TestWriteProcsRefuses(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeProcs(plain, 1); err == nil || !strings.Contains(err.Error(), "not on a cgroup v1 file system") {
		t.Errorf("writeProcs of a plain file: %v", err)
	}
	if data, _ := os.ReadFile(plain); len(data) != 0 {
		t.Errorf("wrote %q to a plain file", data)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(plain, link); err != nil {
		t.Fatal(err)
	}
	if err := writeProcs(link, 1); err == nil {
		t.Error("writeProcs followed a symbolic link")
	}
	if _, err := v1Hierarchy(dir, []string{"freezer"}); err == nil {
		t.Error("v1Hierarchy found freezer in a directory without it")
	}
	if err := os.Symlink(dir, filepath.Join(dir, "freezer")); err != nil {
		t.Fatal(err)
	}
	if h, err := v1Hierarchy(dir, []string{"freezer"}); err == nil {
		t.Errorf("v1Hierarchy took the symbolic link %s", h)
	}
}
