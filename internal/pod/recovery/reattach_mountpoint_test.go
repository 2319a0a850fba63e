package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// TestReattachMainFollowsNoSymlink: the container controls the names along
// a mount point's path, and may swap one for a symbolic link to /proc
// between the scan of its mountinfo and the attach, or stack another mount
// there. The read-only bind the runtime put over a file of /proc must not
// be detached, nor anything be attached there: only the dead mount the
// scan found (by its mount ID) is replaced.
func TestReattachMainFollowsNoSymlink(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	base := mountfdtest.Base(t)
	// The runtime's read-only bind over a file of /proc (sysrq-trigger).
	proc := filepath.Join(base, "proc")
	mkdir(t, filepath.Join(proc, "sys"))
	guarded := filepath.Join(proc, "sys")
	if err := unix.Mount(guarded, guarded, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", guarded, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	guardedID, _ := statPath(t, guarded)
	// The container's dead FUSE mount, as its mountinfo showed it.
	mountPoint := filepath.Join(base, "a", "sys")
	mkdir(t, mountPoint)
	mountDeadFUSE(t, mountPoint)
	deadID, _ := statPath(t, mountPoint)
	// The new mount's clone.
	vol := filepath.Join(base, "new")
	mountfdtest.MountTmpfs(t, vol)
	writeFile(t, filepath.Join(vol, "ok"), "volume")
	tree := openTree(t, vol)

	// The container swaps a parent directory for a symbolic link to /proc.
	moved := filepath.Join(base, "a.moved")
	if err := os.Rename(filepath.Join(base, "a"), moved); err != nil {
		t.Fatal(err)
	}
	symlink(t, proc, filepath.Join(base, "a"))
	err := ReattachMain(int(tree.Fd()), mountPoint, deadID)
	if err == nil {
		t.Errorf("attached through a symbolic link")
	}
	t.Logf("error: %v", err)
	if id, _ := statPath(t, guarded); id != guardedID || !readOnlyAt(t, guarded) {
		t.Fatalf("the read-only bind at %s is gone: mount %d, want %d", guarded, id, guardedID)
	}

	// Back where it was, the dead mount has another mount stacked on it.
	if err := os.Remove(filepath.Join(base, "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, filepath.Join(base, "a")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mountPoint, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	stackedID, _ := statPath(t, mountPoint)
	err = ReattachMain(int(tree.Fd()), mountPoint, deadID)
	t.Logf("error: %v", err)
	if !errors.Is(err, errMountChanged) {
		t.Errorf("attach over another mount than the dead one: %v; want errMountChanged", err)
	}
	if id, _ := statPath(t, mountPoint); id != stackedID {
		t.Fatalf("the mount stacked at %s was replaced: mount %d, want %d", mountPoint, id, stackedID)
	}

	// Once that mount is gone, the dead mount is replaced.
	if err := unix.Unmount(mountPoint, 0); err != nil {
		t.Fatal(err)
	}
	if err := ReattachMain(int(tree.Fd()), mountPoint, deadID); err != nil {
		t.Fatalf("attach at the dead mount: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(mountPoint, "ok")); err != nil || string(b) != "volume" {
		t.Errorf("the new mount is not at %s: %q, %v", mountPoint, b, err)
	}
	if id, _ := statPath(t, guarded); id != guardedID || !readOnlyAt(t, guarded) {
		t.Errorf("the read-only bind at %s is gone: mount %d, want %d", guarded, id, guardedID)
	}
	if err := ReattachMain(int(tree.Fd()), "/proc/../"+mountPoint, deadID); err == nil {
		t.Errorf("a path that is not clean was accepted")
	}
}

// readOnlyAt tells whether the mount at path is read-only.
func readOnlyAt(t *testing.T, path string) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return st.Flags&unix.ST_RDONLY != 0
}

// TestReattachMainNeverBare: while the dead mount is replaced, its mount
// point always shows a mount of the volume. Were it bare for a moment (the
// dead mount detached before the new one is attached), a workload retrying
// its write would write into its own root file system, and the new mount
// would then hide that write: a line lost.
func TestReattachMainNeverBare(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	base := mountfdtest.Base(t)
	mountPoint := filepath.Join(base, "data")
	mkdir(t, mountPoint)
	writeFile(t, filepath.Join(mountPoint, "underneath"), "the container's own directory")
	mountDeadFUSE(t, mountPoint)
	deadID, _ := statPath(t, mountPoint)
	vol := filepath.Join(base, "new")
	mountfdtest.MountTmpfs(t, vol)
	writeFile(t, filepath.Join(vol, "ok"), "volume")
	tree := openTree(t, vol)

	var seen []string
	afterDetach = func(path string) {
		b, err := os.ReadFile(filepath.Join(path, "ok"))
		_, under := os.Stat(filepath.Join(path, "underneath"))
		seen = append(seen, fmt.Sprintf("ok=%q (%v), underneath visible=%t", b, err, under == nil))
		if err != nil || string(b) != "volume" || under == nil {
			t.Errorf("right after the dead mount was detached, %s is not the new mount: %s", path, seen[len(seen)-1])
		}
	}
	t.Cleanup(func() { afterDetach = func(string) {} })
	if err := ReattachMain(int(tree.Fd()), mountPoint, deadID); err != nil {
		t.Fatalf("attach at the dead mount: %v", err)
	}
	if len(seen) != 1 {
		t.Fatalf("the dead mount was detached %d times, want once", len(seen))
	}
	if b, err := os.ReadFile(filepath.Join(mountPoint, "ok")); err != nil || string(b) != "volume" {
		t.Errorf("the new mount is not at %s: %q, %v", mountPoint, b, err)
	}
}

// TestReattachMainUnreachable: a holder whose copy of the mount sits under
// a directory it no longer has (a systemd service's PrivateTmp= hides the
// node's /var/tmp) gets ErrUnreachable, which the recovery does not count
// as a failure; a directory swapped for a symbolic link is still refused.
func TestReattachMainUnreachable(t *testing.T) {
	base := t.TempDir()
	err := ReattachMain(-1, filepath.Join(base, "gone", "data"), 1)
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("ReattachMain under a missing directory: %v, want ErrUnreachable", err)
	}
	symlink(t, base, filepath.Join(base, "link"))
	err = ReattachMain(-1, filepath.Join(base, "link", "data"), 1)
	if err == nil || errors.Is(err, ErrUnreachable) {
		t.Errorf("ReattachMain through a symbolic link: %v, want a refusal that is not ErrUnreachable", err)
	}
}
