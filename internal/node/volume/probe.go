package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNotAnswering is the error of a probe of a file system whose daemon
// does not answer (a FUSE daemon that hangs, not one that died): the probe
// gave up, or one is still waiting for that path.
var ErrNotAnswering = errors.New("the file system does not answer")

// ProbeStatfs returns statfs(2) of path, asked in a goroutine of its own
// so that a FUSE daemon that hangs holds that goroutine, not the caller:
// the caller waits until ctx ends or the bound of [Mounter.TimeoutOrDefault]
// passes. While a probe of the mount path is on is still waiting (an
// earlier caller gave up on it), another one fails at once with
// [ErrNotAnswering] rather than leaving one more goroutine blocked in the
// kernel per call. The mount is known by its ID, not by path: a hung
// mount detached from path leaves a new mount there unaffected, and its
// ID stays its own while the waiting statfs holds it.
func (v *Mounter) ProbeStatfs(ctx context.Context, path string) (unix.Statfs_t, error) {
	if err := context.Cause(ctx); err != nil {
		return unix.Statfs_t{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	key := "path " + path
	if id, err := mountID(path); err == nil {
		key = fmt.Sprint("mount ", id)
	}
	v.probeMu.Lock()
	if _, busy := v.probes[key]; busy {
		v.probeMu.Unlock()
		return unix.Statfs_t{}, fmt.Errorf("statfs %s: %w: an earlier statfs of it has not returned yet", path, ErrNotAnswering)
	}
	if v.probes == nil {
		v.probes = map[string]struct{}{}
	}
	v.probes[key] = struct{}{}
	v.probeMu.Unlock()

	type result struct {
		st  unix.Statfs_t
		err error
	}
	done := make(chan result, 1)
	statfs := v.StatfsFunc
	if statfs == nil {
		statfs = unix.Statfs
	}
	go func() {
		var r result
		r.err = statfs(path, &r.st)
		v.probeMu.Lock()
		delete(v.probes, key)
		v.probeMu.Unlock()
		done <- r
	}()
	timeout := v.TimeoutOrDefault()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return unix.Statfs_t{}, fmt.Errorf("statfs %s: %w", path, r.err)
		}
		return r.st, nil
	case <-t.C:
		return unix.Statfs_t{}, fmt.Errorf("statfs %s: %w within %s (its daemon hangs?)", path, ErrNotAnswering, timeout)
	case <-ctx.Done():
		return unix.Statfs_t{}, fmt.Errorf("statfs %s: %w", path, context.Cause(ctx))
	}
}

// mountID returns the ID of the mount path is on (its root when path is a
// mount point), following no symbolic link. AT_STATX_DONT_SYNC takes the
// attributes the kernel has: a FUSE daemon is not asked, so a hung one
// does not hang the caller.
func mountID(path string) (uint64, error) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &stx)
	if err != nil {
		return 0, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, &os.PathError{Op: "statx", Path: path, Err: errors.New("the kernel returned no mount ID (Linux 5.8 or later needed)")}
	}
	return stx.Mnt_id, nil
}

// IsMountPoint reports whether dir is the root of a mount (a bind of a
// directory of the same file system too), without asking any file
// system's daemon: see [mountID].
func IsMountPoint(dir string) (bool, error) {
	id, err := mountID(dir)
	if err != nil {
		return false, err
	}
	if dir == "/" {
		return true, nil
	}
	parent, err := mountID(filepath.Dir(dir))
	if err != nil {
		return false, err
	}
	return id != parent, nil
}
