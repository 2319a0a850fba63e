// Package mountfd opens what lies beneath a mount by descriptors, the way
// root must when the names along the path belong to whoever writes the
// volume: resolved by openat2 beneath the mount's root, following no
// symbolic link and crossing no mount, and cloned (open_tree) from the
// descriptor, never by path. The mount pod's recovery attaches a new mount
// at a bind's root (a subPath) with it, the CSI node plugin publishes a
// volume's directory with it.
package mountfd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNotInVolume refuses a path beneath a mount that does not name a
// directory or file of that mount.
var ErrNotInVolume = errors.New("refused: the path is not a directory or file of the volume's mount (a symbolic link, another mount, or gone)")

// CloneBeneath returns a detached clone (open_tree) of the mount whose root
// is at target, showing root, a path from the top of that mount (a bind's
// subPath, a volume's directory). Whoever writes the volume controls the
// names along
// root, so they are resolved beneath the mount's root by openat2, which
// follows no symbolic link and crosses no mount, and what they name must be
// a directory or regular file on that same mount: anything else is
// refused ([ErrNotInVolume]).
func CloneBeneath(target, root string) (*os.File, error) {
	top, err := openRoot(target)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	sub, err := openInVolume(top, root)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	fd, err := unix.OpenTree(int(sub.Fd()), "", unix.AT_EMPTY_PATH|unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("open_tree %s: %w", sub.Name(), err)
	}
	return os.NewFile(uintptr(fd), sub.Name()), nil
}

// openRoot opens (O_PATH) the root of the mount at target, and fails
// when target is not the root of a mount.
func openRoot(target string) (*os.File, error) {
	fd, err := unix.Open(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the mount at %s: %w", target, err)
	}
	f := os.NewFile(uintptr(fd), target)
	st, err := Stat(f)
	if err == nil && !IsRoot(st) {
		err = fmt.Errorf("no mount at %s", target)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openInVolume opens (O_PATH) root beneath top, following no symbolic
// link and crossing no mount, and checks that it is a directory or regular
// file on top's mount.
func openInVolume(top *os.File, root string) (*os.File, error) {
	rel := strings.TrimLeft(root, "/")
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(int(top.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotInVolume, root, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(top.Name(), rel))
	if err := sameMount(top, f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrNotInVolume, root, err)
	}
	return f, nil
}

// sameMount checks that f, a directory or regular file, is on top's mount.
func sameMount(top, f *os.File) error {
	want, err := Stat(top)
	if err != nil {
		return err
	}
	st, err := Stat(f)
	switch {
	case err != nil:
		return err
	case st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("file type %#o", st.Mode&unix.S_IFMT)
	case st.Mnt_id != want.Mnt_id:
		return fmt.Errorf("on mount %d, not %d", st.Mnt_id, want.Mnt_id)
	}
	return nil
}

// Stat returns f's type, mount ID and attributes as the kernel holds
// them (AT_STATX_DONT_SYNC: a dead FUSE mount's root answers too).
func Stat(f *os.File) (unix.Statx_t, error) {
	var st unix.Statx_t
	err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC,
		unix.STATX_TYPE|unix.STATX_MNT_ID, &st)
	switch {
	case err != nil:
		return st, fmt.Errorf("statx %s: %w", f.Name(), err)
	case st.Mask&unix.STATX_MNT_ID == 0 || st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0:
		return st, fmt.Errorf("statx %s: no mount ID or mount root attribute (Linux 5.8 or later is needed)", f.Name())
	}
	return st, nil
}

// IsRoot tells whether st is of the root of a mount.
func IsRoot(st unix.Statx_t) bool {
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}
