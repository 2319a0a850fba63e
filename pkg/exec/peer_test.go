package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
)

// fakeProc writes a process table under dir in which this process (which
// serves the tests' exec sockets) has the given /proc/<pid>/cgroup, and
// returns its root.
func fakeProc(t *testing.T, dir, cgroup string) string {
	t.Helper()
	root, err := os.MkdirTemp(dir, "proc")
	if err != nil {
		t.Fatal(err)
	}
	pidDir := filepath.Join(root, strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(pidDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pidDir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestSocketPeerCgroup: the process answering on the exec socket (its
// SO_PEERCRED pid) must be in the registered container by its cgroups,
// whatever its Identity answer says; when that cannot be told, the answer
// alone decides.
func TestSocketPeerCgroup(t *testing.T) {
	uid := testReg.PodUID
	tests := []struct {
		name     string
		procRoot func(t *testing.T, dir string) string
		mode     ExecMode
		via      Via
		reason   string
		wantErr  error
	}{
		{name: "cgroupfs v1 and v2 paths of the container", procRoot: func(t *testing.T, dir string) string {
			return fakeProc(t, dir, "12:memory:/kubepods/besteffort/pod"+uid+"/abc\n0::/kubepods/besteffort/pod"+uid+"/abc\n")
		}, via: ViaSocket, reason: viaSocketOK},
		{name: "systemd scope of the container", procRoot: func(t *testing.T, dir string) string {
			return fakeProc(t, dir, "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"+strings.ReplaceAll(uid, "-", "_")+".slice/cri-containerd-abc.scope\n")
		}, via: ViaSocket, reason: viaSocketOK},
		{name: "another container of another pod", procRoot: func(t *testing.T, dir string) string {
			return fakeProc(t, dir, "12:memory:/kubepods/besteffort/pod11111111-2222-4333-8444-555555555555/def\n0::/kubepods/besteffort/pod11111111-2222-4333-8444-555555555555/def\n")
		}, via: ViaExecSync, reason: "is not in container abc: its cgroup is /kubepods/besteffort/pod11111111-2222-4333-8444-555555555555/def"},
		{name: "another container, socket mode", procRoot: func(t *testing.T, dir string) string {
			return fakeProc(t, dir, "0::/kubepods/besteffort/pod"+uid+"/def\n")
		}, mode: ModeSocket, wantErr: ErrSocketUnavailable},
		{name: "the node itself", procRoot: func(t *testing.T, dir string) string {
			return fakeProc(t, dir, "0::/system.slice/evil.service\n")
		}, via: ViaExecSync, reason: "its cgroup is /system.slice/evil.service"},
		// The real process table: this test process is in no container abc.
		{name: "real /proc", procRoot: func(*testing.T, string) string { return "/proc" }, via: ViaExecSync, reason: "is not in container abc"},
		// Cannot tell: the answer decides, as before.
		{name: "process not visible", procRoot: func(t *testing.T, dir string) string {
			root, err := os.MkdirTemp(dir, "proc")
			if err != nil {
				t.Fatal(err)
			}
			return root
		}, via: ViaSocket, reason: viaSocketOK},
		{name: "inside its cgroup namespace", procRoot: func(t *testing.T, dir string) string {
			return fakeProc(t, dir, "12:memory:/\n0::/\n")
		}, via: ViaSocket, reason: viaSocketOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "real /proc" && !ownCgroupNamed(t) {
				t.Skip("this process's cgroups are all \"/\" (a cgroup namespace of its own): the real table cannot tell")
			}
			e := newSocketEnv(t, testIdentity)
			d, err := e.resolver(t, Options{ExecMode: tc.mode, ProcRoot: tc.procRoot(t, t.TempDir())}).Resolve(context.Background(), testPlugin)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "is not in container abc") {
					t.Fatalf("Resolve = %v, %v; want %v naming the container", d, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.ContainerID != "abc" || d.Via != tc.via || !strings.Contains(d.ViaReason, tc.reason) {
				t.Fatalf("Resolve = %s (%s); want container abc via %s (%s)", d, d.ViaReason, tc.via, tc.reason)
			}
		})
	}
}

// ownCgroupNamed reports whether this process sees a cgroup path of its
// own other than "/".
func ownCgroupNamed(t *testing.T) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[2] != "/" {
			return true
		}
	}
	return false
}

// TestSocketProvesLiveness: when the process serving the registration's
// exec socket answers for the registered pod and container and the kernel
// puts it in a container of that pod, the runtime is not asked at all:
// not even when it is down. Anything short of that asks it.
func TestSocketProvesLiveness(t *testing.T) {
	id := strings.Repeat("0123456789", 6) + "dead" // not containing the runtime's "abc"
	inPod := "0::/kubepods/besteffort/pod" + testReg.PodUID + "/" + id + "\n"
	other := testIdentity
	other.PodUID = "11111111-2222-4333-8444-555555555555"
	tests := []struct {
		name     string
		id       execserver.Identity
		mode     ExecMode
		cgroup   string
		listDown bool
		asked    bool // the runtime is asked
		where    string
		via      Via
		reason   string
		wantErr  error
	}{
		{name: "proved", id: testIdentity, cgroup: inPod, where: id, via: ViaSocket, reason: "runtime not asked"},
		{name: "proved, socket mode", id: testIdentity, mode: ModeSocket, cgroup: inPod, where: id, via: ViaSocket, reason: "runtime not asked"},
		{name: "proved, runtime down", id: testIdentity, cgroup: inPod, listDown: true, where: id, via: ViaSocket, reason: "runtime not asked"},
		{name: "cri mode asks the runtime", id: testIdentity, mode: ModeCRI, cgroup: inPod, asked: true, where: "abc", via: ViaExecSync, reason: viaModeCRI},
		{name: "another pod answers", id: other, cgroup: inPod, asked: true, where: "abc", via: ViaExecSync, reason: "answers for pod"},
		{name: "served from another pod's cgroup", id: testIdentity, cgroup: "0::/kubepods/besteffort/pod" + other.PodUID + "/" + id + "\n", asked: true, where: "abc", via: ViaExecSync, reason: "is not in container abc"},
		{name: "cannot tell", id: testIdentity, cgroup: "0::/\n", asked: true, where: "abc", via: ViaSocket, reason: viaSocketOK},
		{name: "cannot tell, runtime down", id: testIdentity, cgroup: "0::/\n", listDown: true, asked: true, wantErr: ErrRuntimeUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSocketEnv(t, tc.id)
			if tc.listDown {
				e.rt.SetListError(errors.New("runtime down"))
			}
			r := e.resolver(t, Options{ExecMode: tc.mode, ProcRoot: fakeProc(t, t.TempDir(), tc.cgroup)})
			d, err := r.Resolve(context.Background(), testPlugin)
			if asked := e.rt.ListCalls() > 0; asked != tc.asked {
				t.Errorf("runtime asked: %v, want %v", asked, tc.asked)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Resolve = %s, %v; want %v", d, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.ContainerID != tc.where || d.Via != tc.via || !strings.Contains(d.ViaReason, tc.reason) {
				t.Fatalf("Resolve = %s; want container %s via %s (%s)", d, tc.where, tc.via, tc.reason)
			}
			if d.Via == ViaSocket && !tc.asked && d.Endpoint != "" {
				t.Errorf("Endpoint = %q for a decision that asked no runtime", d.Endpoint)
			}
			if tc.via != ViaSocket {
				return
			}
			// A command goes through the socket, cached or not.
			ex, _ := r.For(testPlugin)
			for i := 0; i < 2; i++ {
				out, err := ex.Command("echo", "hi").Output()
				if err != nil || string(out) != "hi\n" {
					t.Fatalf("echo hi = %q, %v", out, err)
				}
			}
			if n := len(e.rt.ExecRequests()); n != 0 {
				t.Errorf("%d ExecSync calls; want none", n)
			}
		})
	}
}
