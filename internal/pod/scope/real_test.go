package scope

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests in this file work on the machine's real cgroup file system,
// under parents of their own that t.Cleanup removes; they need root.

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to write the cgroup file system")
	}
}

// testParent returns a Parent unique to this test run.
func testParent(t *testing.T) string {
	return fmt.Sprintf("mountcontainers-test-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// removeParent removes parent and everything below it in every hierarchy
// of the real cgroup file system, deepest first, and fails the test for
// anything it cannot remove (a leaked cgroup).
func removeParent(t *testing.T, l Layout, parent string) {
	t.Helper()
	for _, h := range l.Hierarchies {
		top := filepath.Join(h.Path, parent)
		var dirs []string
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := rmdir(d); err != nil {
				t.Errorf("leaked cgroup: %v", err)
			}
		}
	}
}

// startSleep starts a sleep that t.Cleanup kills.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// realCgroupfs returns a cgroupfs manager of cfg (its backend and parent
// set here) under a new parent of the real cgroup file system, removed at
// cleanup, and the parent's name. It skips unless run as root.
func realCgroupfs(t *testing.T, cfg Config) (*cgroupfs, string) {
	t.Helper()
	needRoot(t)
	cfg.Backend, cfg.Parent = BackendCgroupfs, testParent(t)
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := m.(*cgroupfs)
	t.Cleanup(func() { removeParent(t, c.layout, cfg.Parent) })
	return c, cfg.Parent
}

func TestRealCgroupfs(t *testing.T) {
	c, parent := realCgroupfs(t, Config{MemoryLimit: 256 << 20, PidsLimit: 512})
	t.Logf("layout of %s: unified %v, %d hierarchies", c.layout.Root, c.layout.Unified, len(c.layout.Hierarchies))
	if !slices.ContainsFunc(c.layout.Hierarchies, func(h Hierarchy) bool { return h.Pids }) {
		t.Error("no hierarchy with the pids controller detected")
	}

	self, err := ProcMembership(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sleep := startSleep(t)
	pid := sleep.Process.Pid
	before, err := ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(self, func(e Member) bool { return e.Path != "/" }) && before.Outside(self) {
		t.Fatalf("a child is Outside its parent's cgroups before placement: %v vs %v", before, self)
	}

	s, err := c.Place(glusterfs, targetA, pid)
	if err != nil {
		t.Fatal(err)
	}
	after, err := ProcMembership(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !after.In(s.Cgroup) {
		t.Errorf("/proc/%d/cgroup after Place:\n%v\nwant %s in every hierarchy", pid, after, s.Cgroup)
	}
	if len(after) != len(c.layout.Hierarchies) {
		t.Errorf("the process is in %d hierarchies, the layout has %d", len(after), len(c.layout.Hierarchies))
	}
	if !after.Outside(self) {
		t.Errorf("placed process not Outside this test's cgroups %v", self)
	}
	for _, h := range c.layout.Hierarchies {
		if h.Cpuset {
			if got, want := readTrim(t, filepath.Join(h.Path, s.Cgroup, "cpuset.cpus")), readTrim(t, filepath.Join(h.Path, "cpuset.cpus")); got != want {
				t.Errorf("scope cpuset.cpus = %q, root has %q", got, want)
			}
		}
		if h.Memory && !h.V2 {
			if got := readTrim(t, filepath.Join(h.Path, parent, "kubernetes.io~glusterfs", "memory.limit_in_bytes")); got != "268435456" {
				t.Errorf("memory.limit_in_bytes of the plugin's parent = %q, want 268435456", got)
			}
		}
		if h.Pids {
			if got := readTrim(t, filepath.Join(h.Path, parent, "kubernetes.io~glusterfs", "pids.max")); got != "512" {
				t.Errorf("pids.max of the plugin's parent = %q, want 512", got)
			}
		}
		if h.CPU && !h.V2 {
			if got := readTrim(t, filepath.Join(h.Path, parent, "kubernetes.io~glusterfs", "cpu.shares")); got != "1024" {
				t.Errorf("cpu.shares of the plugin's parent with one scope = %q, want 1024", got)
			}
		}
	}

	list, err := c.List(glusterfs)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].PIDs, []int{pid}) || list[0].Name != s.Name {
		t.Errorf("List = %+v, %v; want %s with [%d]", list, err, s.Name, pid)
	}
	if err := c.Remove(glusterfs, s.Name); !errors.Is(err, ErrPopulated) {
		t.Errorf("Remove of a live scope = %v, want ErrPopulated", err)
	}

	sleep.Process.Kill()
	sleep.Wait()
	if err := c.Remove(glusterfs, s.Name); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Paths {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after Remove: %v", p, err)
		}
	}
	if list, err := c.List(glusterfs); err != nil || len(list) != 0 {
		t.Errorf("List after Remove = %+v, %v", list, err)
	}
}

// TestPlaceFromPrivateCgroupNS runs the placement in a child whose every
// thread is in a private cgroup namespace (a container's situation on cgroup
// v2): the child is moved into a cgroup of its own in the cgroup2
// hierarchy, then `unshare --cgroup` starts this test binary there, which
// detects the private namespace, enters the parent's (the host's) on one
// thread, and places a process. The child's checks are in
// TestHelperPrivateCgroupNS.
func TestPlaceFromPrivateCgroupNS(t *testing.T) {
	needRoot(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	l, err := DetectLayout(DefaultCgroupRoot)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(l.Hierarchies, func(h Hierarchy) bool { return h.V2 })
	if i < 0 {
		t.Skip("no cgroup2 hierarchy: a cgroup namespace is tested on cgroup v2 only")
	}
	parent := testParent(t)
	t.Cleanup(func() { removeParent(t, l, parent) })
	container := filepath.Join(l.Hierarchies[i].Path, parent+"-container")
	if err := os.Mkdir(container, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rmdir(container); err != nil {
			t.Errorf("leaked cgroup: %v", err)
		}
	})
	sleep := startSleep(t)

	cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", container,
		unshare, "--cgroup", os.Args[0], "-test.run=^TestHelperPrivateCgroupNS$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"SCOPE_NS_HELPER=1",
		"SCOPE_NS_HOST="+fmt.Sprintf("/proc/%d/ns/cgroup", os.Getpid()),
		"SCOPE_NS_PARENT="+parent,
		"SCOPE_NS_PID="+strconv.Itoa(sleep.Process.Pid),
		"SCOPE_NS_CONTAINER=/"+filepath.Base(container))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestHelperPrivateCgroupNS") {
		t.Fatalf("helper in a private cgroup namespace: %v\n%s", err, out)
	}
	t.Logf("helper:\n%s", out)

	want := "/" + parent + "/kubernetes.io~glusterfs/" + Name(targetA)
	got, err := ProcMembership(sleep.Process.Pid)
	if err != nil || !got.In(want) {
		t.Errorf("/proc/%d/cgroup = %v, %v; want %s everywhere", sleep.Process.Pid, got, err, want)
	}
	sleep.Process.Kill()
	sleep.Wait()
	m, err := New(Config{Backend: BackendCgroupfs, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(glusterfs, Name(targetA)); err != nil {
		t.Error(err)
	}
}

// TestHelperPrivateCgroupNS is the child of TestPlaceFromPrivateCgroupNS.
func TestHelperPrivateCgroupNS(t *testing.T) {
	if os.Getenv("SCOPE_NS_HELPER") == "" {
		t.Skip("run by TestPlaceFromPrivateCgroupNS")
	}
	hostNS, container := os.Getenv("SCOPE_NS_HOST"), os.Getenv("SCOPE_NS_CONTAINER")
	pid, err := strconv.Atoi(os.Getenv("SCOPE_NS_PID"))
	if err != nil {
		t.Fatal(err)
	}
	v2Path := func(m Membership) string {
		for _, e := range m {
			if e.ID == 0 {
				return e.Path
			}
		}
		return ""
	}

	// Every thread sees its own cgroup as the root, and PID 1 outside.
	own, err := ProcMembership(os.Getpid())
	if err != nil || v2Path(own) != "/" {
		t.Fatalf("own cgroup2 path = %q, %v; want / (a private namespace)", v2Path(own), err)
	}
	pid1, err := ProcMembership(1)
	if err != nil || !strings.HasPrefix(v2Path(pid1), "/..") {
		t.Fatalf("PID 1's cgroup2 path = %q, %v; want it outside (/..)", v2Path(pid1), err)
	}
	// Detection: from the namespace links, and from PID 1's paths alone.
	if private, err := privateCgroupNS("/proc", hostNS); !private || err != nil {
		t.Errorf("privateCgroupNS = %v, %v; want true", private, err)
	}
	if private, err := privateCgroupNS("/proc", "/nonexistent"); !private || err == nil {
		t.Errorf("privateCgroupNS without the host's namespace = %v, %v; want true and an error", private, err)
	}

	// One thread enters the host's namespace and sees the full path; the
	// others stay in the private one.
	var hostView string
	err = inCgroupNS(hostNS, func() error {
		f, err := os.Open("/proc/thread-self/cgroup")
		if err != nil {
			return err
		}
		defer f.Close()
		m, err := ParseMembership(f)
		hostView = v2Path(m)
		return err
	})
	if err != nil || hostView != container {
		t.Errorf("cgroup2 path seen from the host's namespace = %q, %v; want %s", hostView, err, container)
	}
	if own, _ := ProcMembership(os.Getpid()); v2Path(own) != "/" {
		t.Errorf("after inCgroupNS the process sees %q; its threads should still be in the private namespace", v2Path(own))
	}

	m, err := New(Config{Backend: BackendCgroupfs, Parent: os.Getenv("SCOPE_NS_PARENT"), HostCgroupNS: hostNS})
	if err != nil {
		t.Fatal(err)
	}
	if ns := m.(*cgroupfs).ns; ns != hostNS {
		t.Fatalf("auto mode chose namespace %q, want %s", ns, hostNS)
	}
	s, err := m.Place(glusterfs, targetA, pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("placed %d in %s from the host's cgroup namespace", pid, s.Cgroup)
}

// BenchmarkCgroupfsPlace measures Place on the real cgroup file system: one
// op moves a sleeping process between two existing scopes (the parents and
// scopes exist, as for every mount but a node's first), in every hierarchy.
// Needs root.
func BenchmarkCgroupfsPlace(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to write the cgroup file system")
	}
	parent := fmt.Sprintf("mountcontainers-bench-%d", os.Getpid())
	m, err := New(Config{Backend: BackendCgroupfs, Parent: parent})
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		for _, target := range []string{targetA, targetB} {
			if err := m.Remove(glusterfs, Name(target)); err != nil {
				b.Error(err)
			}
		}
		for _, h := range m.(*cgroupfs).layout.Hierarchies {
			for _, d := range []string{filepath.Join(h.Path, parent, "kubernetes.io~glusterfs"), filepath.Join(h.Path, parent)} {
				if err := rmdir(d); err != nil {
					b.Errorf("leaked cgroup: %v", err)
				}
			}
		}
	}()
	targets := []string{targetA, targetB}
	for _, target := range targets {
		if _, err := m.Place(glusterfs, target, cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := m.Place(glusterfs, targets[i%2], cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRealCgroupfsKill(t *testing.T) {
	c, _ := realCgroupfs(t, Config{})

	// A shell placed first, whose two children are then born in the scope
	// (as a FUSE daemon is, from its mount helper); and a process in
	// another scope, which must live on.
	sh := exec.Command("sh", "-c", "read go; sleep 60 & sleep 60 & wait")
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan error, 1)
	go func() { reaped <- sh.Wait() }()
	t.Cleanup(func() { sh.Process.Kill() })
	other := startSleep(t)
	s, err := c.Place(glusterfs, targetA, sh.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Place(glusterfs, targetB, other.Process.Pid); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	var pids []int
	for deadline := time.Now().Add(10 * time.Second); len(pids) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		list, err := c.List(glusterfs)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			if l.Name == s.Name {
				pids = l.PIDs
			}
		}
	}
	if len(pids) != 3 {
		t.Fatalf("scope %s has processes %v; want the shell and its two children", s.Name, pids)
	}

	killed, err := c.Kill(glusterfs, s.Name, 5*time.Second)
	if err != nil || !slices.Equal(killed, pids) {
		t.Fatalf("Kill = %v, %v; want %v", killed, err, pids)
	}
	if err := <-reaped; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the shell: %v; want killed", err)
	}
	for _, p := range s.Paths {
		if got := readTrim(t, filepath.Join(p, "cgroup.procs")); got != "" {
			t.Errorf("%s/cgroup.procs after Kill: %q", p, got)
		}
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process of the other scope: %v; want it untouched", err)
	}
	if err := c.Remove(glusterfs, s.Name); err != nil {
		t.Errorf("Remove after Kill: %v", err)
	}
	if killed, err := c.Kill(glusterfs, s.Name, time.Second); err != nil || killed != nil {
		t.Errorf("Kill of a removed scope = %v, %v; want nothing", killed, err)
	}
	if _, err := c.Kill(glusterfs, "../..", time.Second); err == nil {
		t.Error("Kill(\"../..\") succeeded")
	}
}

// TestRealCgroupfsKillSparesALeaver: Kill lists a scope's processes, then
// signals them. A process that leaves the scope in between (which may as
// well have exited, its number handed to an unrelated process) is not
// signalled; the one that stays is. In every hierarchy of the machine with
// cgroup.kill where the kernel has it, and with pidfds alone, as before
// Linux 5.14; and in its cgroup2 hierarchy alone (as on a cgroup v2 only
// node), where cgroup.kill does it all.
func TestRealCgroupfsKillSparesALeaver(t *testing.T) {
	needRoot(t)
	layout, err := DetectLayout(DefaultCgroupRoot)
	if err != nil {
		t.Fatal(err)
	}
	v2 := ""
	for _, h := range layout.Hierarchies {
		if h.V2 {
			v2 = h.Path
		}
	}
	for _, tt := range []struct {
		name       string
		root       string
		noKillFile bool
	}{
		{"cgroup.kill", DefaultCgroupRoot, false},
		{"pidfd", DefaultCgroupRoot, true},
		{"cgroup2 only", v2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root == "" {
				t.Skip("no cgroup2 hierarchy")
			}
			c, _ := realCgroupfs(t, Config{CgroupRoot: tt.root})
			c.noKillFile = tt.noKillFile
			leaver, stayer := startSleep(t), startSleep(t)
			s, err := c.Place(glusterfs, targetA, leaver.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Place(glusterfs, targetA, stayer.Process.Pid); err != nil {
				t.Fatal(err)
			}
			real := beforeSignal
			t.Cleanup(func() { beforeSignal = real })
			moved := false
			beforeSignal = func(pids []int) {
				if moved {
					return
				}
				moved = true
				if !slices.Contains(pids, leaver.Process.Pid) {
					t.Errorf("listed %v; want the leaver %d among them", pids, leaver.Process.Pid)
				}
				if _, err := c.Place(glusterfs, targetB, leaver.Process.Pid); err != nil {
					t.Errorf("move the leaver out: %v", err)
				}
			}
			killed, err := c.Kill(glusterfs, s.Name, 5*time.Second)
			if err != nil || !slices.Equal(killed, []int{stayer.Process.Pid}) {
				t.Errorf("Kill = %v, %v; want [%d], the process that stayed", killed, err, stayer.Process.Pid)
			}
			if !moved {
				t.Fatal("Kill signalled without calling beforeSignal")
			}
			if err := stayer.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Errorf("the process that stayed: %v; want killed", err)
			}
			if why := signalledOrGone(t, leaver.Process.Pid); why != "" {
				t.Errorf("the process that left the scope before its signal: %s; want it untouched", why)
			}
		})
	}
}

// signalledOrGone tells, without waiting, whether process pid has been
// sent SIGKILL: it is gone, a zombie, or has SIGKILL pending (the kernel
// marks every thread of a process sent SIGKILL at once); "" if not.
func signalledOrGone(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return "state " + v
			}
		case "SigPnd", "ShdPnd":
			mask, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				t.Fatalf("%s of %d: %q", k, pid, v)
			}
			if mask&(1<<(syscall.SIGKILL-1)) != 0 {
				return "SIGKILL pending"
			}
		}
	}
	return ""
}
