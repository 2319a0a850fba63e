package mountrecord

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadPods: the pods' binds listed beside a node's mount that pods
// share, and what is not taken from there: the list of a mount that is
// not a shared one (a pod's own volume directory, whose neighbour a PV's
// name could make); a directory that is a symbolic link, another user's,
// or written by others, or in such a directory; a file that is a FIFO (a
// regular file is required, opened without blocking), a symbolic link,
// too large, naming another UID, no volume, or not a pod; a dot-named file
// being written is not read.
func TestReadPods(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pods' files must be root's: run as root")
	}
	base := t.TempDir()
	target := filepath.Join(base, "plugins/x.io~glusterfs/shared/0123456789abcdef0123456789abcdef")
	if pods, err := ReadPods(target); pods != nil || err != nil {
		t.Fatalf("no directory: %v, %v; want none", pods, err)
	}
	dir := target + PodsSuffix
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("u-2~data", `{"namespace":"shop","name":"web-2","uid":"u-2"}`)
	write("u-1~data", `{"namespace":"shop","name":"web-1","uid":"u-1"}`)
	write("u-1~logs", `{"namespace":"shop","name":"web-1","uid":"u-1"}`)
	write(".u-3~data", `{"namespace":"shop","name":"web-3","uid":"u-3"}`)
	write("u-4~data", `{"namespace":"shop","name":"web-4","uid":"u-1"}`)
	write("u-5~data", `{"namespace":"shop","name":"web-5","uid":"u-5","extra":1}`)
	write("u-6~data", strings.Repeat(" ", maxPodFile+1))
	write("u-9~", `{"namespace":"shop","name":"web-9","uid":"u-9"}`)
	if err := syscall.Mkfifo(filepath.Join(dir, "u-7~data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "u-1~data"), filepath.Join(dir, "u-8~data")); err != nil {
		t.Fatal(err)
	}
	pods, err := ReadPods(target)
	if len(pods) != 3 || pods[0].Name != "web-1" || pods[0].Volume != "data" || pods[1].Volume != "logs" || pods[2].Name != "web-2" {
		t.Errorf("pods %+v, want web-1's data and logs, web-2's data", pods)
	}
	for _, bad := range []string{"u-4~data", "u-5~data", "u-6~data", "u-7~data", "u-8~data", "u-9~"} {
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, bad)+":") {
			t.Errorf("error %v does not name %s", err, bad)
		}
	}

	// A pod's own volume directory: its neighbour is not read.
	own := filepath.Join(base, "pods/u-1/volumes/kubernetes.io~glusterfs/pv")
	if err := os.MkdirAll(own+PodsSuffix, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own+PodsSuffix, "u-2~data"), []byte(`{"namespace":"bank","name":"ledger","uid":"u-2"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if pods, err := ReadPods(own); pods != nil || err != nil {
		t.Errorf("the list beside a pod's own volume: %+v, %v; want none read", pods, err)
	}

	shared := filepath.Dir(target)
	for _, tc := range []struct {
		name  string
		setup func() error
		want  string
	}{
		{"written by others", func() error { return os.Chmod(dir, 0o777) }, "written by nobody else"},
		{"another user's", func() error { return os.Chown(dir, 1000, 0) }, "owned by uid 1000"},
		{"in a directory others write", func() error { return os.Chmod(shared, 0o777) }, "written by nobody else"},
		{"a symbolic link", func() error {
			if err := os.Rename(dir, dir+"-real"); err != nil {
				return err
			}
			return os.Symlink(dir+"-real", dir)
		}, "open " + dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(dir) // the link, when there is one
			_ = os.Rename(dir+"-real", dir)
			for _, d := range []string{dir, shared} {
				if err := os.Chmod(d, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(d, 0, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.setup(); err != nil {
				t.Fatal(err)
			}
			if pods, err := ReadPods(target); pods != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadPods: %+v, %v; want none and an error saying %q", pods, err, tc.want)
			}
		})
	}
}

// TestIsSharedTarget: where the Flexvolume drivers make the node's mounts
// that pods share, and what is not.
func TestIsSharedTarget(t *testing.T) {
	for target, want := range map[string]bool{
		"/var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared/0123456789abcdef0123456789abcdef": true,
		"/var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared/0123456789abcdef0123456789abcdeg": false,
		"/var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared/0123456789abcdef":                 false,
		"/var/lib/kubelet/plugins/mountcontainers.io/shared/0123456789abcdef0123456789abcdef":           false,
		"/var/lib/kubelet/pods/u/volumes/mountcontainers.io~glusterfs/shared":                           false,
		"/var/lib/kubelet/pods/u/volumes/x~y/0123456789abcdef0123456789abcdef":                          false,
	} {
		if got := IsSharedTarget(target); got != want {
			t.Errorf("IsSharedTarget(%s) = %t, want %t", target, got, want)
		}
	}
}
