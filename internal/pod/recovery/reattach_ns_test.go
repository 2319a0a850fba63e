package recovery

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain runs this test binary as the reattach child when [Reattach]
// starts it (through /proc/self/exe), with cmd/mountpod's command line of
// the hidden ReattachCommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ReattachCommand {
		os.Exit(reattachChild(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// reattachChild is cmd/mountpod's ReattachCommand: it parses args and runs
// [ReattachMain].
func reattachChild(args []string) int {
	fs := flag.NewFlagSet(ReattachCommand, flag.ContinueOnError)
	fd := fs.Int("fd", -1, "descriptor of the mount tree")
	path := fs.String("path", "", "mount point")
	id := fs.Uint64("mount-id", 0, "mount ID of the dead mount at the mount point")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := ReattachMain(*fd, *path, *id); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// mountDeadFUSE mounts at dir a FUSE file system whose daemon is gone: its
// /dev/fuse descriptor is closed right after the mount, which aborts the
// connection as a daemon's exit does.
func mountDeadFUSE(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	err = unix.Mount("dead", dir, "fuse", 0, opts)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("mount FUSE at %s: %v", dir, err)
	}
	if _, err := os.Stat(dir); !IsDead(err) {
		t.Fatalf("the FUSE mount at %s answers stat with %v; want it dead", dir, err)
	}
}

// statPath returns the mount ID and device of the mount at path, following
// no symbolic link and asking no file system daemon.
func statPath(t *testing.T, path string) (uint64, Device) {
	t.Helper()
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st); err != nil {
		t.Fatalf("statx %s: %v", path, err)
	}
	return st.Mnt_id, Device{int(st.Dev_major), int(st.Dev_minor)}
}

// openTree returns a detached clone of the mount at path.
func openTree(t *testing.T, path string) *os.File {
	t.Helper()
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		t.Fatalf("open_tree %s: %v", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	t.Cleanup(func() { f.Close() })
	return f
}

func mkdir(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
