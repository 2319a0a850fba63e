package mountrecord

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadPods: the pods listed beside a node's mount, and what is not
// taken from there: a directory that is a symbolic link, or another
// user's, or written by others; a file that is a FIFO (not opened for
// reading, which would block), a symbolic link, too large, naming another
// UID or not a pod; a dot-named file being written is not read.
func TestReadPods(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pods' files must be root's: run as root")
	}
	target := filepath.Join(t.TempDir(), "0123")
	if pods, err := ReadPods(target); pods != nil || err != nil {
		t.Fatalf("no directory: %v, %v; want none", pods, err)
	}
	dir := target + PodsSuffix
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("u-2", `{"namespace":"shop","name":"web-2","uid":"u-2"}`)
	write("u-1", `{"namespace":"shop","name":"web-1","uid":"u-1"}`)
	write(".u-3", `{"namespace":"shop","name":"web-3","uid":"u-3"}`)
	write("u-4", `{"namespace":"shop","name":"web-4","uid":"u-1"}`)
	write("u-5", `{"namespace":"shop","name":"web-5","uid":"u-5","extra":1}`)
	write("u-6", strings.Repeat(" ", maxPodFile+1))
	if err := syscall.Mkfifo(filepath.Join(dir, "u-7"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "u-1"), filepath.Join(dir, "u-8")); err != nil {
		t.Fatal(err)
	}
	pods, err := ReadPods(target)
	if len(pods) != 2 || pods[0].Name != "web-1" || pods[1].Name != "web-2" {
		t.Errorf("pods %+v, want web-1 and web-2", pods)
	}
	for _, bad := range []string{"u-4", "u-5", "u-6", "u-7", "u-8"} {
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, bad)+":") {
			t.Errorf("error %v does not name %s", err, bad)
		}
	}

	for _, tc := range []struct {
		name  string
		setup func() error
		want  string
	}{
		{"written by others", func() error { return os.Chmod(dir, 0o777) }, "written by nobody else"},
		{"another user's", func() error { return os.Chown(dir, 1000, 0) }, "owned by uid 1000"},
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
			if err := os.Chmod(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 0, 0); err != nil {
				t.Fatal(err)
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
