// Package scopetest has what tests of scope users share: a cgroup parent of
// the test's own on the real cgroup file system, removed (and checked for
// leaks) when the test ends, and building a command of this module.
package scopetest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// Parent returns a new cgroup parent for tb on the real cgroup file system
// (cgroupfs backend) and the environment that points the MOUNTPOD_SCOPE_*
// settings at it. tb.Cleanup removes everything under it in every hierarchy
// and fails tb on a cgroup it cannot remove. Skips tb when not root.
func Parent(tb testing.TB) (parent string, env []string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to write the cgroup file system")
	}
	parent = fmt.Sprintf("mountcontainers-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	l, err := scope.DetectLayout(scope.DefaultCgroupRoot)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, h := range l.Hierarchies {
			var dirs []string
			filepath.WalkDir(filepath.Join(h.Path, parent), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			slices.Reverse(dirs)
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil {
					tb.Errorf("leaked cgroup %s: %v", d, err)
				}
			}
		}
	})
	return parent, append(os.Environ(), "MOUNTPOD_SCOPE_BACKEND=cgroupfs", "MOUNTPOD_SCOPE_PARENT="+parent)
}

// Build builds the command in package dir pkg (a path such as
// "../mount-scope" or ".") into a temporary directory and returns its path.
func Build(tb testing.TB, pkg, name string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// RemoveOnceEmpty removes the scope of target under plugin's parent in the
// test's parent, waiting up to 5 s for its processes to be gone (a killed
// daemon leaves its cgroup once reaped), and fails tb if it cannot.
func RemoveOnceEmpty(tb testing.TB, parent, plugin, target string) {
	tb.Helper()
	m, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, Parent: parent})
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Close()
	deadline := time.Now().Add(5 * time.Second)
	for err = m.Remove(plugin, scope.Name(target)); errors.Is(err, scope.ErrPopulated) && time.Now().Before(deadline); err = m.Remove(plugin, scope.Name(target)) {
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		tb.Error(err)
	}
}
