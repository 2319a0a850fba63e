package clientargs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fuseSuperMagic is statfs(2)'s f_type of a FUSE file system.
const fuseSuperMagic = 0x65735546

// VerifyTimeout bounds [Verify]'s look at the new mount: the client has
// exited 0 by then, so the mount is made and its first answer waits only
// for the client's connection to the servers.
var VerifyTimeout = 60 * time.Second

// mountTable is the mount table [Check] reads (a seam for the tests).
var mountTable = "/proc/self/mountinfo"

// A Mark is what [Check] found at the mount point before the mount.
type Mark struct {
	target string
	dev    uint64
	ino    uint64
}

// Check makes the script's checks of TARGET before a mount: it is not /
// or /tmp (exit 2), it is a directory, no GlusterFS volume is mounted on
// it already (exit 32, as the script's mtab check) and it is not a
// brick of a GlusterFS volume (it has no trusted.gfid attribute; exit 2).
// (The script's other checks are left out: that TARGET is not a parent
// of a brick reads glusterd's state, and no glusterd runs in a mount pod;
// it also edits /etc/updatedb.conf, which a mount pod has no use for.)
// The Mark returned is what [Verify] compares the mount point with.
//
// The mount table is read only when TARGET is the root of a mount (or the
// kernel, before Linux 5.8, cannot tell): it lists every mount of the
// node that the mount pod sees, and reading it cost every mount 1 to
// 1.7 ms of CPU in the mount pod's cgroup with 322 mounts (BENCHMARKS.md,
// "A node under load"), more with more. A GlusterFS mount listed at
// TARGET that is not what TARGET shows (one hidden by a mount over a
// parent directory) no longer refuses the mount: TARGET shows a
// directory, which the new mount goes on.
func Check(target string) (Mark, error) {
	if target == "/" || target == "/tmp" {
		return Mark{}, &Error{Code: 2, Err: fmt.Errorf("cannot mount over %s", target)}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(target, &st); err != nil {
		return Mark{}, refuse("mount point %s: %w", target, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return Mark{}, refuse("mount point %s is not a directory", target)
	}
	if mountRoot(target) {
		mounted, err := glusterfsMountedOn(target)
		if err != nil {
			return Mark{}, refuse("mount point %s: %w", target, err)
		}
		if mounted {
			return Mark{}, &Error{Code: 32, Err: fmt.Errorf("a GlusterFS volume is already mounted on %s", target)}
		}
	}
	if _, err := syscall.Getxattr(target, "trusted.gfid", nil); err == nil {
		return Mark{}, &Error{Code: 2, Err: fmt.Errorf("%s is in use as a brick of a GlusterFS volume (it has trusted.gfid)", target)}
	}
	return Mark{target: target, dev: st.Dev, ino: st.Ino}, nil
}

// Verify checks, after the client exited 0, that a FUSE file system is
// now mounted on the mark's mount point and answers (the script's stat
// of the mount point), within [VerifyTimeout]. When it is not, a mount
// that was made is detached, and the error names the client's log file
// (log-file, or the client's default under /var/log/glusterfs).
func Verify(m Mark, logFile string) error {
	if logFile == "" {
		logFile = DefaultLogFile(m.target)
	}
	type answer struct {
		st  syscall.Stat_t
		fs  syscall.Statfs_t
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		if a.err = syscall.Stat(m.target, &a.st); a.err == nil {
			a.err = syscall.Statfs(m.target, &a.fs)
		}
		done <- a
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(VerifyTimeout):
		a.err = fmt.Errorf("no answer within %v", VerifyTimeout)
	}
	switch {
	case a.err == nil && a.st.Dev == m.dev && a.st.Ino == m.ino:
		return refuse("mount failed: nothing is mounted on %s after the client exited 0; see its log file %s", m.target, logFile)
	case a.err == nil && a.fs.Type != fuseSuperMagic:
		// Not the client's: leave it alone.
		return refuse("mount failed: %s holds a file system of type %#x, not FUSE, after the client exited 0; see its log file %s", m.target, a.fs.Type, logFile)
	case a.err != nil:
		derr := syscall.Unmount(m.target, syscall.MNT_DETACH)
		if errors.Is(derr, syscall.EINVAL) {
			derr = nil // not a mount point: nothing to undo
		}
		if derr != nil {
			return refuse("mount failed: %s: %v (detaching it: %v); see the client's log file %s", m.target, a.err, derr, logFile)
		}
		return refuse("mount failed: %s: %v; see the client's log file %s", m.target, a.err, logFile)
	}
	return nil
}

// LogFile returns the log-file option of a translation of [Args] (empty
// when it has none).
func LogFile(args []string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--log-file="); ok {
			return v
		}
	}
	return ""
}

// DefaultLogFile is the glusterfs client's log file for a mount on target
// when it is given none: /var/log/glusterfs/ and target's path with its
// slashes as dashes, less the first.
func DefaultLogFile(target string) string {
	return "/var/log/glusterfs/" + strings.ReplaceAll(strings.TrimPrefix(target, "/"), "/", "-") + ".log"
}

// mountRoot reports whether target (symbolic links followed, as mount(8)
// follows them) is the root of a mount, or may be: true when statx(2)
// fails or does not know the attribute. It only chooses whether the mount
// table is read: the target is the one the mount goes on, resolved as
// mount(8) and the client resolve it, and a wrong "false" costs no more
// than the mount(8) it stands before (which would mount there too).
func mountRoot(target string) bool {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, target, 0, unix.STATX_TYPE, &stx); err != nil ||
		stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return true
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// glusterfsMountedOn reports whether the mount table lists a GlusterFS
// FUSE mount (type fuse.glusterfs) on target.
func glusterfsMountedOn(target string) (bool, error) {
	data, err := os.ReadFile(mountTable)
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		left, right, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE ...
		f := strings.Split(left, " ")
		t := strings.Split(right, " ")
		if len(f) >= 5 && unescape(f[4]) == target && t[0] == "fuse.glusterfs" {
			return true, nil
		}
	}
	return false, nil
}

// unescape undoes the kernel's octal escapes (\040 for a space) of a
// mount table's field.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
