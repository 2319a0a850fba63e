package recovery

import (
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// TestSubPathStaysInTheVolume: the names along a bind's root (a subPath)
// are the volume's, written by whoever writes the volume, who may make any
// of them a symbolic link, or anything else, while the daemon is dead.
// The new mount is cloned at a root that is a directory or file of the
// volume, and at nothing else: not through a symbolic link (absolute or
// relative, last or within the path), not on another mount, not a FIFO.
func TestSubPathStaysInTheVolume(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	base := mountfdtest.Base(t)
	node := filepath.Join(base, "node") // a node directory: /var/lib/kubelet
	mkdir(t, filepath.Join(node, "x"))
	writeFile(t, filepath.Join(node, "secret"), "node")
	vol := filepath.Join(base, "new") // the new mount
	mountfdtest.MountTmpfs(t, vol)
	mkdir(t, filepath.Join(vol, "sub"), filepath.Join(vol, "a", "b"), filepath.Join(vol, "mnt"))
	writeFile(t, filepath.Join(vol, "sub", "ok"), "volume")
	writeFile(t, filepath.Join(vol, "a", "b", "ok"), "volume")
	writeFile(t, filepath.Join(vol, "file"), "volume")
	symlink(t, node, filepath.Join(vol, "link"))
	symlink(t, "../node", filepath.Join(vol, "rel"))
	symlink(t, node, filepath.Join(vol, "a", "link"))
	if err := unix.Mkfifo(filepath.Join(vol, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(node, filepath.Join(vol, "mnt"), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		root string
		// shows is a file the clone shows, "" for a clone of a file.
		shows string
	}{
		{"/", "sub/ok"},
		{"/sub", "ok"},
		{"/a/b", "ok"},
		{"/file", ""},
	} {
		tree, err := mountfd.CloneBeneath(vol, tt.root)
		if err != nil {
			t.Errorf("root %s: %v", tt.root, err)
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(tree.Fd()), tt.shows, &st, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Errorf("root %s: the clone does not show the file %q: %v", tt.root, tt.shows, err)
		}
		tree.Close()
	}
	for _, root := range []string{"/link", "/rel", "/link/x", "/a/link/x", "/a/link/../b", "/mnt", "/mnt/x", "/fifo", "/gone", "/../node"} {
		tree, err := mountfd.CloneBeneath(vol, root)
		if err == nil {
			tree.Close()
			t.Errorf("root %s: cloned (%s); want it refused", root, tree.Name())
			continue
		}
		if !errors.Is(err, mountfd.ErrNotInVolume) {
			t.Errorf("root %s: %v; want errNotInVolume", root, err)
		}
	}
	if tree, err := mountfd.CloneBeneath(filepath.Join(base, "node"), "/"); err == nil {
		tree.Close()
		t.Errorf("a directory that is not a mount was cloned")
	}
}
