package scope

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hybridCgroup is /proc/PID/cgroup of a process of the build machine (cgroup
// v1 hybrid), in a container-like memory cgroup.
const hybridCgroup = `9:name=systemd:/
8:pids:/
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/kubepods/pod1/c1
3:cpuset:/
2:cpuacct:/
1:cpu:/
0::/
`

func TestParseMembership(t *testing.T) {
	m, err := ParseMembership(strings.NewReader(hybridCgroup))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 10 || m[0].ID != 9 || m[0].Controllers[0] != "name=systemd" || m[5].Path != "/kubepods/pod1/c1" || m[9].ID != 0 || m[9].Controllers != nil {
		t.Errorf("ParseMembership = %+v", m)
	}
	for _, bad := range []string{"0:/", "x::/", "1:cpu:relative", "garbage"} {
		if _, err := ParseMembership(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMembership(%q) succeeded", bad)
		}
	}
}

func TestMembershipInOutside(t *testing.T) {
	parse := func(s string) Membership {
		m, err := ParseMembership(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	container := parse(hybridCgroup)
	scope := "/mountcontainers/kubernetes.io~glusterfs/mount-0123456789abcdef"
	placed := parse(strings.NewReplacer(":/\n", ":"+scope+"\n", ":/kubepods/pod1/c1\n", ":"+scope+"\n").Replace(hybridCgroup))
	partly := parse(strings.Replace(hybridCgroup, "4:memory:/kubepods/pod1/c1", "4:memory:/kubepods/pod1/c1/sub", 1))

	if !placed.In(scope) || placed.In(scope+"x") || container.In(scope) || (Membership{}).In("/") {
		t.Error("In is wrong")
	}
	if !placed.In("/mountcontainers") {
		t.Error("a process in a scope is not In its parents")
	}
	if !container.InAny("/kubepods/pod1") || placed.InAny("/kubepods") || !placed.InAny(scope) {
		t.Error("InAny is wrong")
	}
	if !placed.Outside(container) {
		t.Error("placed process not Outside the container's cgroups")
	}
	if container.Outside(container) || partly.Outside(container) {
		t.Error("a process in (or below) the container's memory cgroup is Outside it")
	}
}

// fakeProc writes a proc tree: thread-self/ns/cgroup and, when given, the host
// namespace link and 1/cgroup.
func fakeProc(t *testing.T, own, host, pid1 string) (procRoot, hostNS string) {
	t.Helper()
	procRoot = t.TempDir()
	hostNS = filepath.Join(procRoot, "1/ns/cgroup")
	for link, target := range map[string]string{filepath.Join(procRoot, "thread-self/ns/cgroup"): own, hostNS: host} {
		if target == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if pid1 != "" {
		writeTree(t, procRoot, map[string]string{"1/cgroup": pid1})
	}
	return procRoot, hostNS
}

func TestPrivateCgroupNS(t *testing.T) {
	tests := []struct {
		name            string
		own, host, pid1 string
		want            bool
		wantErr         string
	}{
		{"same namespace", "cgroup:[4026531835]", "cgroup:[4026531835]", "", false, ""},
		{"private namespace", "cgroup:[4026532176]", "cgroup:[4026531835]", "", true, ""},
		{"host unreadable, PID 1 inside", "cgroup:[4026531835]", "", "4:memory:/\n0::/\n", false, ""},
		{"host unreadable, PID 1 outside", "cgroup:[4026532176]", "", "4:memory:/..\n0::/../../init.scope\n", true, "cannot enter the host's"},
		{"nothing readable", "", "", "", false, "detect the cgroup namespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc, hostNS := fakeProc(t, tc.own, tc.host, tc.pid1)
			got, err := privateCgroupNS(proc, hostNS)
			if got != tc.want || (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("privateCgroupNS = %v, %v; want %v, error containing %q", got, err, tc.want, tc.wantErr)
			}
			// What the cgroupfs backend makes of it.
			ns, err := hostCgroupNS(Config{CgroupNS: CgroupNSAuto, ProcRoot: proc, HostCgroupNS: hostNS})
			if want := map[bool]string{true: hostNS, false: ""}[tc.want && tc.wantErr == ""]; ns != want || (tc.wantErr == "") != (err == nil) {
				t.Errorf("hostCgroupNS(auto) = %q, %v; want %q", ns, err, want)
			}
		})
	}
	for mode, want := range map[CgroupNSMode]string{CgroupNSOff: "", CgroupNSEnter: "/ns"} {
		if ns, err := hostCgroupNS(Config{CgroupNS: mode, HostCgroupNS: "/ns", ProcRoot: "/nonexistent"}); ns != want || err != nil {
			t.Errorf("hostCgroupNS(%s) = %q, %v; want %q", mode, ns, err, want)
		}
	}
}
