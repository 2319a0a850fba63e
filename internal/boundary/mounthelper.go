package boundary

import (
	"path/filepath"
	"strings"
)

// MountHelperTarget returns the mount target of a mount helper's
// arguments, as mount(8) calls helpers: `mount.TYPE SOURCE TARGET [-sfnv]
// [-o OPTIONS] ...`; ok is false when argv is not a mount (such as
// `mount.glusterfs -V`). The scope helper (cmd/mount-scope) reads every
// helper's arguments so, and the translation of mount.fuse.ceph's too.
func MountHelperTarget(argv []string) (target string, ok bool) {
	if len(argv) < 3 || strings.HasPrefix(argv[1], "-") || strings.HasPrefix(argv[2], "-") {
		return "", false
	}
	t, err := filepath.Abs(argv[2])
	if err != nil {
		return "", false
	}
	return t, true
}

// FUSEClientType reports whether fstype, as mount(8) takes it or the mount
// table shows it, is one whose mounts are served by a FUSE client process
// that can die under them: fuse, fuseblk and fuse.* (fuse.glusterfs,
// fuse.ceph-fuse in the table), and the clients mounted through a helper of
// their own (glusterfs, ceph-fuse). The volume host records such mounts and
// the mount pod recovers them and places their mount(8) in its scope.
func FUSEClientType(fstype string) bool {
	switch {
	case fstype == "glusterfs", fstype == "fuse", fstype == "fuseblk", fstype == "ceph-fuse",
		strings.HasPrefix(fstype, "fuse."):
		return true
	}
	return false
}
