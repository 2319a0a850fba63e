package hostinstall

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// maxDepth bounds how deep removeAll descends.
const maxDepth = 32

// nodeRoot is the node's root directory, open, and what the uninstall
// does beneath it: every path is resolved from the descriptor by openat2
// with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS (a symbolic link anywhere
// on a path refuses it; one named by a path is removed itself, never
// followed), and a removal never descends into another mount.
type nodeRoot struct {
	fd   int
	name string // for messages: the root as given
	// mountPoints are the node's, from its mount table: nothing at or
	// above one is removed, whether or not this process's view of the
	// root has the mount (a pod's copy of the node's / does not get the
	// mounts made after it started).
	mountPoints []string
}

func openNodeRoot(dir string) (*nodeRoot, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open node root", Path: dir, Err: err}
	}
	return &nodeRoot{fd: fd, name: dir}, nil
}

func (r *nodeRoot) Close() error { return unix.Close(r.fd) }

// rel turns an absolute node path into one relative to the root, refusing
// anything but a clean absolute path.
func rel(p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		return "", fmt.Errorf("%q is not a clean absolute path below /", p)
	}
	return strings.TrimPrefix(p, "/"), nil
}

const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openAt opens name (relative) beneath dirfd with how's flags.
func openAt(dirfd int, name string, flags uint64, resolve uint64) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: resolve})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

// parent opens the directory holding node path p and returns it with p's
// last component. ok is false when the directory does not exist.
func (r *nodeRoot) parent(p string) (dfd int, base string, ok bool, err error) {
	rp, err := rel(p)
	if err != nil {
		return -1, "", false, err
	}
	dir, base := path.Split(rp)
	if dir == "" {
		dir = "."
	}
	dfd, err = openAt(r.fd, dir, unix.O_PATH|unix.O_DIRECTORY, resolveBeneath)
	switch {
	case errors.Is(err, unix.ENOENT):
		return -1, "", false, nil
	case errors.Is(err, unix.ELOOP):
		return -1, "", false, fmt.Errorf("%s: a symbolic link on the path: refused", path.Dir(p))
	case errors.Is(err, unix.ENOTDIR):
		return -1, "", false, fmt.Errorf("%s: not a directory", path.Dir(p))
	case err != nil:
		return -1, "", false, &fs.PathError{Op: "open", Path: path.Dir(p), Err: err}
	}
	return dfd, base, true, nil
}

// lstat returns what node path p is, without following it; ok is false
// when it does not exist.
func (r *nodeRoot) lstat(p string) (st unix.Stat_t, ok bool, err error) {
	dfd, _, st, ok, err := r.statAt(p)
	if ok {
		unix.Close(dfd)
	}
	return st, ok, err
}

// statAt opens the directory holding node path p and stats p's last
// component in it, without following it. When ok, the caller closes dfd;
// ok is false when p does not exist.
func (r *nodeRoot) statAt(p string) (dfd int, base string, st unix.Stat_t, ok bool, err error) {
	dfd, base, ok, err = r.parent(p)
	if err != nil || !ok {
		return -1, "", st, false, err
	}
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		unix.Close(dfd)
		if errors.Is(err, unix.ENOENT) {
			return -1, "", st, false, nil
		}
		return -1, "", st, false, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return dfd, base, st, true, nil
}

// readFile returns the content of the regular file at node path p, owned
// by root and writable by nobody else, of at most max bytes; ok is false
// when it does not exist. A FIFO or device there is refused, never
// opened for reading.
func (r *nodeRoot) readFile(p string, max int64) (data []byte, ok bool, err error) {
	rp, err := rel(p)
	if err != nil {
		return nil, false, err
	}
	fd, err := openAt(r.fd, rp, unix.O_PATH, resolveBeneath)
	if errors.Is(err, unix.ENOENT) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if err := trusted(p, &st, unix.S_IFREG); err != nil {
		return nil, false, err
	}
	if st.Size > max {
		return nil, false, fmt.Errorf("%s: %d bytes, more than the %d accepted", p, st.Size, max)
	}
	// Reopened through the O_PATH handle: the file checked is the file read.
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &fs.PathError{Op: "reopen", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(rfd), p)
	defer f.Close()
	data, err = io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > max {
		return nil, false, fmt.Errorf("%s: more than the %d bytes accepted", p, max)
	}
	return data, true, nil
}

// trusted fails unless st is of type typ, owned by root and not writable
// by group or others.
func trusted(p string, st *unix.Stat_t, typ uint32) error {
	if st.Mode&unix.S_IFMT != typ {
		return fmt.Errorf("%s is a %s, not a %s: refused", p, registration.FileType(st.Mode), registration.FileType(typ))
	}
	if st.Uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, not root: refused", p, st.Uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %#o): refused", p, st.Mode&0o7777)
	}
	return nil
}

// remove removes node path p if it is not a directory (a symbolic link is
// removed itself), or an empty directory; it reports whether something
// was removed. A directory that is not empty is left, with no error.
func (r *nodeRoot) remove(p string) (bool, error) {
	if err := r.holdsNoMount(p); err != nil {
		return false, err
	}
	dfd, base, st, ok, err := r.statAt(p)
	if err != nil || !ok {
		return false, err
	}
	defer unix.Close(dfd)
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if st.Uid != 0 {
			return false, fmt.Errorf("%s is owned by uid %d, not root: refused", p, st.Uid)
		}
		flags = unix.AT_REMOVEDIR
	}
	err = unix.Unlinkat(dfd, base, flags)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case flags != 0 && (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)):
		return false, nil
	case errors.Is(err, unix.EBUSY):
		return false, fmt.Errorf("%s is a mount point: refused", p)
	}
	return false, &fs.PathError{Op: "remove", Path: p, Err: err}
}

// removeAll removes node path p and, when it is a directory, everything
// in it. A directory removed must be root's; a symbolic link in it is
// removed, not followed; a mount point in it stops the removal with an
// error naming it (nothing on another file system is touched). It
// reports whether p existed.
func (r *nodeRoot) removeAll(p string) (bool, error) {
	if err := r.holdsNoMount(p); err != nil {
		return false, err
	}
	dfd, base, ok, err := r.parent(p)
	if err != nil || !ok {
		return false, err
	}
	defer unix.Close(dfd)
	err = removeAt(dfd, base, p, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// holdsNoMount fails when node path p is a mount point of the node's, or
// holds one.
func (r *nodeRoot) holdsNoMount(p string) error {
	for _, m := range r.mountPoints {
		if m == p || strings.HasPrefix(m, p+"/") {
			return fmt.Errorf("%s is a mount point: refused (unmount it first)", m)
		}
	}
	return nil
}

func removeAt(dfd int, name, p string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return &fs.PathError{Op: "remove", Path: p, Err: err}
		}
		return nil
	}
	if st.Uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, not root: refused", p, st.Uid)
	}
	if depth >= maxDepth {
		return fmt.Errorf("%s: more than %d directories deep: refused", p, maxDepth)
	}
	// RESOLVE_NO_XDEV: a mount point is refused, not entered.
	cfd, err := openAt(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, resolveBeneath|unix.RESOLVE_NO_XDEV)
	if errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%s is a mount point: refused (unmount it first)", p)
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	d := os.NewFile(uintptr(cfd), p)
	defer d.Close()
	// The directory opened is the one checked (not one renamed into its
	// place meanwhile).
	var ost unix.Stat_t
	if err := unix.Fstat(cfd, &ost); err != nil {
		return &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if ost.Dev != st.Dev || ost.Ino != st.Ino || ost.Uid != 0 {
		return fmt.Errorf("%s changed while it was removed: refused", p)
	}
	for {
		names, err := d.Readdirnames(256)
		for _, n := range names {
			if err := removeAt(cfd, n, path.Join(p, n), depth+1); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			break
		}
		if err != nil {
			return &fs.PathError{Op: "read directory", Path: p, Err: err}
		}
	}
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%s is a mount point: refused (unmount it first)", p)
		}
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// answers reports whether the unix socket at node path p accepts a
// connection within timeout: a process serves it. The socket is reached
// through an O_PATH handle, never through the path.
func (r *nodeRoot) answers(p string, timeout time.Duration) (bool, error) {
	rp, err := rel(p)
	if err != nil {
		return false, err
	}
	fd, err := openAt(r.fd, rp, unix.O_PATH, resolveBeneath)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return false, nil
	}
	c, err := net.DialTimeout("unix", "/proc/self/fd/"+strconv.Itoa(fd), timeout)
	switch {
	case err == nil:
		c.Close()
		return true, nil
	case errors.Is(err, unix.ECONNREFUSED), errors.Is(err, unix.ENOENT):
		return false, nil // nobody listens
	}
	// A full backlog, a timeout: a process may still serve it.
	return false, fmt.Errorf("%s does not say whether it is served: %w", p, err)
}

// readlink returns the target of the symbolic link at node path p.
func (r *nodeRoot) readlink(p string) (string, error) {
	dfd, base, ok, err := r.parent(p)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", &fs.PathError{Op: "readlink", Path: p, Err: fs.ErrNotExist}
	}
	defer unix.Close(dfd)
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dfd, base, buf)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: p, Err: err}
	}
	return string(buf[:n]), nil
}

// lock takes an exclusive flock(2) on the lock file at node path p (made
// when missing, root's, mode 0600), waiting at most 30 s, and returns its
// release, which may be called more than once. A missing directory takes
// no lock.
func (r *nodeRoot) lock(p string) (func(), error) {
	rp, err := rel(p)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat2(r.fd, rp, &unix.OpenHow{Flags: unix.O_RDWR | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Mode: 0o600, Resolve: resolveBeneath})
	if errors.Is(err, unix.ENOENT) {
		return func() {}, nil
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open lock", Path: p, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: not a regular file", p)
	}
	if err := registration.LockFD(fd, 30*time.Second); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	var once sync.Once
	return func() { once.Do(func() { unix.Close(fd) }) }, nil
}
