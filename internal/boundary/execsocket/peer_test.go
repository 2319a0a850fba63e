package execsocket

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeProc writes procRoot/<pid>/cgroup with content and returns procRoot.
func fakeProc(t *testing.T, pid int, content string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestPodContainer(t *testing.T) {
	const uid = "0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00"
	id := strings.Repeat("0123456789abcdef", 4)
	other := strings.Repeat("fedcba9876543210", 4)
	us := strings.ReplaceAll(uid, "-", "_")
	tests := []struct {
		name    string
		cgroup  string
		want    string
		cannot  bool   // the error wraps ErrCannotTell
		errWith string // the error says this
	}{
		{name: "cgroupfs v2", cgroup: "0::/kubepods/besteffort/pod" + uid + "/" + id + "\n", want: id},
		{name: "cgroupfs v1 and v2", cgroup: "12:memory:/kubepods/burstable/pod" + uid + "/" + id + "\n1:name=systemd:/kubepods/burstable/pod" + uid + "/" + id + "\n0::/\n", want: id},
		{name: "guaranteed pod", cgroup: "0::/kubepods/pod" + uid + "/" + id + "\n", want: id},
		{name: "below the container", cgroup: "0::/kubepods/besteffort/pod" + uid + "/" + id + "/serve\n", want: id},
		{name: "systemd containerd", cgroup: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + us + ".slice/cri-containerd-" + id + ".scope\n", want: id},
		{name: "systemd crio", cgroup: "0::/kubepods.slice/kubepods-pod" + us + ".slice/crio-" + id + ".scope\n", want: id},
		{name: "the pod's own cgroup", cgroup: "0::/kubepods/besteffort/pod" + uid + "\n", errWith: "not in a container of pod"},
		{name: "another pod", cgroup: "0::/kubepods/besteffort/pod1c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00/" + id + "\n", errWith: "its cgroup is /kubepods/besteffort/pod1c9f"},
		{name: "the node", cgroup: "0::/system.slice/kubelet.service\n", errWith: "not in a container"},
		{name: "not a container ID", cgroup: "0::/kubepods/besteffort/pod" + uid + "/abc\n", errWith: "not in a container"},
		{name: "a prefix without scope", cgroup: "0::/kubepods/besteffort/pod" + uid + "/x-" + id + "\n", errWith: "not in a container"},
		{name: "upper-case ID", cgroup: "0::/kubepods/besteffort/pod" + uid + "/" + strings.ToUpper(id) + "\n", errWith: "not in a container"},
		{name: "two containers", cgroup: "1:memory:/kubepods/pod" + uid + "/" + id + "\n0::/kubepods/pod" + uid + "/" + other + "\n", errWith: "two containers"},
		{name: "inside its cgroup namespace", cgroup: "0::/\n1:memory:/\n", cannot: true},
		{name: "empty", cgroup: "", cannot: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodContainer(fakeProc(t, 42, tc.cgroup), 42, uid)
			switch {
			case tc.want != "":
				if err != nil || got != tc.want {
					t.Fatalf("PodContainer = %q, %v; want %q", got, err, tc.want)
				}
			case tc.cannot:
				if !errors.Is(err, ErrCannotTell) {
					t.Fatalf("PodContainer = %q, %v; want ErrCannotTell", got, err)
				}
			default:
				if err == nil || errors.Is(err, ErrCannotTell) || !strings.Contains(err.Error(), tc.errWith) {
					t.Fatalf("PodContainer = %q, %v; want an error saying %q", got, err, tc.errWith)
				}
			}
		})
	}
}

func TestPodContainerCannotTell(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if _, err := PodContainer("/proc", pid, "u"); !errors.Is(err, ErrCannotTell) {
			t.Errorf("pid %d: %v; want ErrCannotTell", pid, err)
		}
	}
	if _, err := PodContainer(t.TempDir(), 42, "u"); !errors.Is(err, ErrCannotTell) {
		t.Errorf("no /proc entry: %v; want ErrCannotTell", err)
	}
	// This process is no pod's container.
	if _, err := PodContainer("/proc", os.Getpid(), "0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00"); err == nil {
		t.Errorf("the test process is in a container of a made-up pod")
	}
}
