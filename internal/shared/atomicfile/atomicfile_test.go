package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "f")
	if err := WriteFile(dst, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dst, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil || string(got) != "new" {
		t.Fatalf("content %q, %v", got, err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	// A failing writer changes nothing and leaves nothing.
	boom := errors.New("boom")
	if err := Write(dst, 0o644, func(w io.Writer) error { w.Write([]byte("partial")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want boom", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "new" {
		t.Fatalf("failed write changed the file: %q", got)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 {
		t.Fatalf("directory holds %d entries, want only the file", len(des))
	}
}

func TestCopyAndSymlink(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	if err := Copy(src, dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "binary" {
		t.Fatalf("copy %q", got)
	}
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(link, []byte("old file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Symlink("dst", link); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(link); err != nil || target != "dst" {
		t.Fatalf("link %q, %v", target, err)
	}
	if des, _ := os.ReadDir(dir); len(des) != 3 {
		t.Fatalf("directory holds %d entries, want 3", len(des))
	}
	if err := Copy(filepath.Join(dir, "missing"), dst, 0o755); err == nil {
		t.Fatal("Copy of a missing file succeeded")
	}
}
