package shim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// maxSymlinks bounds the symbolic links one walk resolves, as the kernel's
// MAXSYMLINKS does.
const maxSymlinks = 40

// CheckTrustedDir refuses dir unless root may act on what it holds: a
// directory owned by root (or the effective user) and not writable by group
// or others, reached by [walkTrusted] through no symbolic link, the rules
// of a registration directory (package registration). The host root of
// nsenter mode is checked so.
func CheckTrustedDir(dir string) error {
	fd, _, err := openTrustedDir(dir)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// openTrustedDir is [CheckTrustedDir] returning an O_PATH descriptor of
// the checked directory, and its absolute path.
func openTrustedDir(dir string) (fd int, path string, err error) {
	w, err := walkTrusted(dir, false)
	if err != nil {
		return -1, "", err
	}
	err = checkTrustedFile(&w.st, w.path, unix.S_IFDIR)
	if err == nil && w.st.Mode&0o022 != 0 {
		err = fmt.Errorf("%s is writable by group or others (mode %04o)", w.path, w.st.Mode&0o7777)
	}
	if err != nil {
		unix.Close(w.fd)
		return -1, "", err
	}
	return w.fd, w.path, nil
}

// CheckRuntimeSocket returns the container runtime's socket at path, its
// symbolic links resolved, once root may talk to it: a socket owned by root
// (or the effective user), reached by [walkTrusted] through no symbolic
// link but root's. Those cannot be refused here, as they are for
// registrations: /var/run is root's link to /run on most distributions, and
// kubeadm, crictl and package cri's probed defaults name sockets through
// it. The socket's own mode is not checked: a client needs write permission
// to connect, and the mode says who may connect, not who serves. A socket
// that does not exist is returned as it is, for the dial to report the
// runtime down, when nobody but its directory's owner could create it; in
// a directory writable by others (root's and sticky) it is refused, as
// anyone could create it before the dial.
func CheckRuntimeSocket(path string) (string, error) {
	w, err := walkTrusted(path, true)
	var missing *missingError
	switch {
	case errors.As(err, &missing) && !missing.shared:
		return missing.path, nil
	case err != nil:
		return "", err
	}
	defer unix.Close(w.fd)
	if err := checkTrustedFile(&w.st, w.path, unix.S_IFSOCK); err != nil {
		return "", err
	}
	return w.path, nil
}

// checkTrustedFile refuses the file of st, at path, unless it is of type
// typ and owned by root or the effective user.
func checkTrustedFile(st *unix.Stat_t, path string, typ uint32) error {
	if st.Mode&unix.S_IFMT != typ {
		return fmt.Errorf("%s is a %s, not a %s", path, registration.FileType(st.Mode), registration.FileType(typ))
	}
	if !trustedOwner(st.Uid) {
		return fmt.Errorf("%s is owned by uid %d, not by root%s", path, st.Uid, orSelf())
	}
	return nil
}

// trustedOwner reports whether a file owned by uid may decide what root
// does: root's, or the effective user's own (who could do it anyway).
func trustedOwner(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

// orSelf completes "not by root" for a shim that does not run as root.
func orSelf() string {
	if euid := os.Geteuid(); euid != 0 {
		return fmt.Sprintf(" or uid %d", euid)
	}
	return ""
}

// walked is the last component of a path [walkTrusted] walked.
type walked struct {
	fd   int         // O_PATH descriptor, never a symbolic link
	path string      // absolute, symbolic links resolved
	st   unix.Stat_t // of fd
}

// missingError is the error of [walkTrusted] for a component that does not
// exist.
type missingError struct {
	path   string // the whole path, resolved as far as it exists
	dir    string // where the component is missing
	shared bool   // dir is writable by others (root's and sticky)
}

func (e *missingError) Error() string {
	return fmt.Sprintf("%s does not exist (nothing in %s by that name)", e.path, e.dir)
}

func (e *missingError) Unwrap() error { return fs.ErrNotExist }

// walkTrusted opens path one component at a time from /, each relative to
// the directory above it with O_PATH|O_NOFOLLOW, so that what is checked is
// what is opened and the kernel follows no symbolic link. Every directory
// passed through must be owned by root (or the effective user) and not
// writable by group or others, unless it is root's and sticky (as /tmp):
// there only root and an entry's owner may rename or remove the entry.
// These are the rules of package registration's walk, which it does not
// export. A symbolic link on the way is refused, unless rootLinks is set
// and root (or the effective user) owns it: then it sits in a directory
// that passed the checks, only its owner could have made it, and the walk
// starts again from / on its target (joined lexically, as [filepath.Join]
// does), every component of which is checked too. What the last component
// is, the caller checks. A missing component is a [*missingError]. Errors
// name the path that fails and why.
func walkTrusted(path string, rootLinks bool) (walked, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return walked{}, fmt.Errorf("resolve %s: %w", path, err)
	}
	for range maxSymlinks + 1 {
		w, target, err := walkOnce(abs, rootLinks)
		if err != nil || target == "" {
			return w, err
		}
		abs = target
	}
	return walked{}, fmt.Errorf("%s: more than %d symbolic links on the way", path, maxSymlinks)
}

// walkOnce walks the absolute, clean path abs as [walkTrusted] describes;
// when it meets a symbolic link it may follow it returns the path to walk
// instead, target.
func walkOnce(abs string, rootLinks bool) (w walked, target string, err error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return walked{}, "", fmt.Errorf("open /: %w", err)
	}
	cur := "/"
	names := strings.Split(abs, "/")[1:]
	if abs == "/" {
		names = nil
	}
	for i, name := range names {
		shared, err := checkPassedDir(fd, cur)
		if err != nil {
			unix.Close(fd)
			return walked{}, "", err
		}
		child, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		next := filepath.Join(cur, name)
		switch {
		case errors.Is(err, unix.ENOENT):
			return walked{}, "", &missingError{path: filepath.Join(append([]string{next}, names[i+1:]...)...), dir: cur, shared: shared}
		case err != nil:
			return walked{}, "", fmt.Errorf("open %s: %w", next, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(child, &st); err != nil {
			unix.Close(child)
			return walked{}, "", fmt.Errorf("stat %s: %w", next, err)
		}
		last := i == len(names)-1
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if !rootLinks || !trustedOwner(st.Uid) {
				unix.Close(child)
				return walked{}, "", symlinkError(next, &st, rootLinks)
			}
			link, err := readLink(child)
			unix.Close(child)
			if err != nil {
				return walked{}, "", fmt.Errorf("read symbolic link %s: %w", next, err)
			}
			if !filepath.IsAbs(link) {
				link = filepath.Join(cur, link)
			}
			return walked{}, filepath.Join(append([]string{link}, names[i+1:]...)...), nil
		case unix.S_IFDIR:
		default:
			if !last {
				unix.Close(child)
				return walked{}, "", fmt.Errorf("%s is a %s, not a directory", next, registration.FileType(st.Mode))
			}
		}
		fd, cur = child, next
		if last {
			return walked{fd: fd, path: cur, st: st}, "", nil
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return walked{}, "", fmt.Errorf("stat /: %w", err)
	}
	return walked{fd: fd, path: "/", st: st}, "", nil
}

// symlinkError refuses the symbolic link at path.
func symlinkError(path string, st *unix.Stat_t, rootLinks bool) error {
	if !rootLinks {
		return fmt.Errorf("%s is a symbolic link: not followed", path)
	}
	return fmt.Errorf("%s is a symbolic link owned by uid %d, not by root%s: not followed", path, st.Uid, orSelf())
}

// checkPassedDir checks the directory fd, at path, that a walk passes
// through, and reports whether others may write it (it is root's and
// sticky).
func checkPassedDir(fd int, path string) (shared bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if !trustedOwner(st.Uid) {
		return false, fmt.Errorf("%s is owned by uid %d, not by root%s", path, st.Uid, orSelf())
	}
	if st.Mode&0o022 == 0 {
		return false, nil
	}
	if st.Uid != 0 || st.Mode&unix.S_ISVTX == 0 {
		return false, fmt.Errorf("%s is writable by group or others (mode %04o), and it is not root's with the sticky bit", path, st.Mode&0o7777)
	}
	return true, nil
}

// readLink returns the target of the symbolic link fd, an O_PATH
// descriptor.
func readLink(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	if n == len(buf) {
		return "", errors.New("target longer than PATH_MAX")
	}
	return string(buf[:n]), nil
}
