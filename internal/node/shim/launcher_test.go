package shim

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenHelperHoldsTheCheckedFile checks that the helper is judged
// through a descriptor that keeps naming the checked file when another
// one is renamed over its path before the exec.
func TestOpenHelperHoldsTheCheckedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, HelperName)
	if err := os.WriteFile(p, []byte("checked"), 0o755); err != nil {
		t.Fatal(err)
	}
	var want unix.Stat_t
	if err := unix.Stat(p, &want); err != nil {
		t.Fatal(err)
	}
	fd, err := openHelperIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	swapped := filepath.Join(dir, ".swapped")
	if err := os.WriteFile(swapped, []byte("swapped"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(swapped, p); err != nil {
		t.Fatal(err)
	}
	var got unix.Stat_t
	if err := unix.Stat(filepathOfFD(fd), &got); err != nil {
		t.Fatal(err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		t.Fatalf("the descriptor names inode %d, want the checked %d", got.Ino, want.Ino)
	}

}

// filepathOfFD is the path through which the exec reaches fd.
func filepathOfFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
