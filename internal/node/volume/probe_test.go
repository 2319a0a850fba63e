package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// mountFUSE mounts at dir a FUSE file system with no daemon reading its
// /dev/fuse: every request to it waits, as it does for a daemon that
// hangs. close closes the descriptor, which aborts the connection as a
// daemon's death does.
func mountFUSE(t *testing.T, dir string) (close func()) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE: %v", err)
	}
	if err := unix.Mount("test:/v", dir, "fuse.glusterfs", 0, fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)); err != nil {
		unix.Close(fd)
		t.Fatalf("mount FUSE at %s: %v", dir, err)
	}
	closed := false
	close = func() {
		if !closed {
			closed = true
			unix.Close(fd)
		}
	}
	t.Cleanup(func() {
		close()
		unix.Unmount(dir, unix.MNT_DETACH)
	})
	return close
}

// TestStateOfHungAndDeadFUSE: the state of a FUSE mount whose daemon hangs
// is an error wrapping ErrNotAnswering once the timeout passes, and the
// next one is that error at once, the first statfs still waiting; once the
// connection is aborted the mount is Corrupted. Whether a path is a mount
// point is answered without the daemon.
func TestStateOfHungAndDeadFUSE(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	base := mountfdtest.Base(t)
	dir := filepath.Join(base, "fuse")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abort := mountFUSE(t, dir)
	v := &Mounter{Timeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if mnt, err := IsMountPoint(dir); err != nil || !mnt {
		t.Fatalf("IsMountPoint of the hung FUSE mount: %v, %v", mnt, err)
	}
	start := time.Now()
	_, err := v.StateContext(ctx, dir)
	t.Logf("the first state returned after %v: %v", time.Since(start), err)
	if !errors.Is(err, ErrNotAnswering) {
		t.Fatalf("state of a hung FUSE mount: %v; want ErrNotAnswering", err)
	}
	start = time.Now()
	_, err = v.StateContext(ctx, dir)
	t.Logf("the second state returned after %v: %v", time.Since(start), err)
	if !errors.Is(err, ErrNotAnswering) {
		t.Fatalf("state while a statfs waits: %v; want ErrNotAnswering", err)
	}
	v.probeMu.Lock()
	n := len(v.probes)
	v.probeMu.Unlock()
	if n != 1 {
		t.Fatalf("%d statfs calls wait; want 1", n)
	}

	abort()
	for {
		st, err := v.StateContext(ctx, dir)
		if err == nil && st == Corrupted {
			break
		}
		if err != nil && !errors.Is(err, ErrNotAnswering) {
			t.Fatalf("state of the aborted FUSE mount: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("state of the aborted FUSE mount: %v, %v; want Corrupted", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNewMountAfterHungOneAnswers: a hung FUSE mount detached from a path
// (NodeUnstage's lazy unmount) leaves the next mount there unaffected,
// though the statfs of the hung one still waits: a probe is known by the
// mount's ID, not by its path.
func TestNewMountAfterHungOneAnswers(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	dir := filepath.Join(mountfdtest.Base(t), "staging")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abort := mountFUSE(t, dir) // a daemon that never answers
	defer abort()
	v := &Mounter{Timeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := v.StateContext(ctx, dir); !errors.Is(err, ErrNotAnswering) {
		t.Fatalf("state of the hung FUSE mount: %v; want ErrNotAnswering", err)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	mountfdtest.MountTmpfs(t, dir)
	st, err := v.StateContext(ctx, dir)
	if err != nil || st != Mounted {
		t.Fatalf("state of a new mount at %s while the hung one's statfs waits: %v, %v; want Mounted", dir, st, err)
	}
}
