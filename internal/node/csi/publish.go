package csi

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd"
)

// bindVolume is bind (a seam for the tests, which hold it).
var bindVolume = bind

// bind clones the mount at staging, showing sub (resolved beneath it by
// descriptors, see [mountfd.CloneBeneath]), sets it nosuid and nodev, and
// read-only when ro, and moves it onto target, opened without following a
// symbolic link.
func bind(staging, sub, target string, ro bool) error {
	tree, err := mountfd.CloneBeneath(staging, sub)
	if err != nil {
		return err
	}
	defer tree.Close()
	// No set-user-ID program or device node of the volume's writers
	// takes effect through the bind (nor in the containers, whose binds
	// of the target inherit its flags).
	attr := unix.MountAttr{Propagation: unix.MS_PRIVATE, Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if ro {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(int(tree.Fd()), "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	fd, err := unix.Open(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open target %s: %w", target, err)
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(int(tree.Fd()), "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount onto %s: %w", target, err)
	}
	return nil
}

// unbind unmounts target, never through a symbolic link (a dead FUSE bind
// is detached, and so is one whose daemon does not answer), until nothing
// is mounted there, and removes the directory; a target that is gone is
// done already.
func unbind(ctx context.Context, v *volume.Mounter, target string) error {
	for range 8 { // a target stacked this deep was not made by NodePublish
		st, err := v.StateContext(ctx, target)
		switch {
		case errors.Is(err, volume.ErrNotAnswering):
			st = volume.Corrupted
		case err != nil:
			return err
		case st == volume.Missing:
			return nil
		case st == volume.NotMounted:
			if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove target %s: %w", target, err)
			}
			return nil
		}
		flags := unix.UMOUNT_NOFOLLOW
		if st == volume.Corrupted {
			flags |= unix.MNT_DETACH
		}
		if err := unix.Unmount(target, flags); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 8 unmounts", target)
}
