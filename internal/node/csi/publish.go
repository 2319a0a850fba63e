package csi

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
)

// bindVolume is [volume.Bind] (a seam for the tests, which hold it).
var bindVolume = volume.Bind

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
