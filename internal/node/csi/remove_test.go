package csi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// volumeTree makes the volume dir of the administrator's volume at top, as
// CreateVolume does, filled with files and directories and a link out of
// the volume to outside, a file that must stay.
func volumeTree(t *testing.T, top, dir string) (*os.Root, string) {
	t.Helper()
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if err := createDir(root, dir, 1<<20); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		sub := filepath.Join(top, dir, fmt.Sprint("d", i), "e")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 20 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprint("f", j)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(top, dir, "d0", "link")); err != nil {
		t.Fatal(err)
	}
	return root, outside
}

// TestDeleteDirStopsWithContext: DeleteVolume's removal stops when the
// call's context ends, with the context's code, and leaves the record so
// that the next call finishes it; it follows no link out of the volume.
func TestDeleteDirStopsWithContext(t *testing.T) {
	top := t.TempDir()
	root, outside := volumeTree(t, top, "pvc-1")
	record := filepath.Join(top, metadataDir, "pvc-1")

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	for _, tc := range []struct {
		ctx  context.Context
		code codes.Code
	}{{cancelled, codes.Canceled}, {expired, codes.DeadlineExceeded}} {
		err := deleteDir(tc.ctx, root, "pvc-1")
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), "pvc-1") {
			t.Fatalf("deleteDir with an ended context: %v; want %s naming pvc-1", err, tc.code)
		}
		if _, err := os.Lstat(filepath.Join(top, "pvc-1", "d4", "e", "f19")); err != nil {
			t.Fatalf("deleteDir with an ended context removed files: %v", err)
		}
		if _, err := os.Lstat(record); err != nil {
			t.Fatalf("deleteDir that stopped removed the record: %v", err)
		}
	}

	for range 2 { // the second call finds it done
		if err := deleteDir(context.Background(), root, "pvc-1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, gone := range []string{filepath.Join(top, "pvc-1"), record} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", gone, err)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the file a link of the volume pointed to is removed: %v", err)
	}
}

// TestDeleteDirStopsAtMount: nothing beneath a mount point in a volume's
// directory is removed.
func TestDeleteDirStopsAtMount(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	top := mountfdtest.Base(t)
	root, _ := volumeTree(t, top, "pvc-1")
	mnt := filepath.Join(top, "pvc-1", "d1", "mnt")
	mountfdtest.MountTmpfs(t, mnt)
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(mnt, "data"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := deleteDir(context.Background(), root, "pvc-1")
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "pvc-1/d1/mnt") {
		t.Fatalf("deleteDir of a tree with a mount: %v; want Internal naming pvc-1/d1/mnt", err)
	}
	if _, err := os.Lstat(filepath.Join(mnt, "data")); err != nil {
		t.Fatalf("a file beneath the mount is removed: %v", err)
	}
}

// TestRemoveTreeDepthBounded: a tenant's tree nested deeper than
// maxTreeDepth is refused with a message that names it (quoted, cut), not
// walked until memory or descriptors run out; one within the bound goes.
func TestRemoveTreeDepthBounded(t *testing.T) {
	top := t.TempDir()
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	nest := func(name string, depth int) {
		t.Helper()
		fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := name
		for i := 0; i < depth; i++ {
			if err := unix.Mkdirat(fd, n, 0o755); err != nil {
				t.Fatal(err)
			}
			next, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			fd, n = next, strings.Repeat("d", 200)
		}
		unix.Close(fd)
	}
	nest("shallow", maxTreeDepth-1)
	if err := removeTree(context.Background(), root, "shallow"); err != nil {
		t.Fatalf("a tree %d deep: %v", maxTreeDepth-1, err)
	}
	if _, err := root.Lstat("shallow"); !os.IsNotExist(err) {
		t.Fatalf("the tree %d deep is left: %v", maxTreeDepth-1, err)
	}
	nest("deep", maxTreeDepth+5)
	err = removeTree(context.Background(), root, "deep")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d directories deep", maxTreeDepth)) {
		t.Fatalf("a tree %d deep: %v; want it refused as too deep", maxTreeDepth+5, err)
	}
	if len(err.Error()) > 400 {
		t.Errorf("the error names the path in %d bytes; want it cut: %.100s...", len(err.Error()), err)
	}
}

// TestCreateDirAdoptsNoForeignDirectory: a directory already at a new
// volume's name, which no earlier call for it made (no record), is not
// taken over (its mode and contents would go to the volume's users, and
// DeleteVolume would remove it); a retry of a call that made it is fine.
func TestCreateDirAdoptsNoForeignDirectory(t *testing.T) {
	top := t.TempDir()
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.Mkdir("pvc-theirs", 0o700); err != nil {
		t.Fatal(err)
	}
	err = createDir(root, "pvc-theirs", 1<<20)
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("createDir over a directory it did not make: %v; want AlreadyExists", err)
	}
	if fi, err := root.Lstat("pvc-theirs"); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the foreign directory after the refusal: %v, %v; want it as it was (0700)", fi, err)
	}
	if _, err := root.Lstat(metadataDir + "/pvc-theirs"); !os.IsNotExist(err) {
		t.Errorf("a record is left for the refused volume: %v", err)
	}
	for i := 0; i < 2; i++ { // made, then the retry of the same call
		if err := createDir(root, "pvc-ours", 1<<20); err != nil {
			t.Fatalf("createDir, call %d: %v", i+1, err)
		}
	}
}
