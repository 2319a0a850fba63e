package csi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestCreateDirAtOnce: controllers that make their first volumes of an
// administrator's volume at once (two drivers, or a leader and its
// successor) each make the metadata directory or find it made, and none
// fails (seen on the bed: "mkdirat .mountcontainers-csi: file exists").
func TestCreateDirAtOnce(t *testing.T) {
	const rounds, callers = 200, 4
	for r := range rounds {
		top := t.TempDir()
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A root of its own, as each controller's mount is.
				root, err := os.OpenRoot(top)
				if err != nil {
					errs <- err
					return
				}
				defer root.Close()
				if err := createDir(root, fmt.Sprintf("pvc-%d", c), 1<<20); err != nil {
					errs <- fmt.Errorf("round %d, caller %d: %w", r, c, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	// A file where the directory belongs is not taken for it.
	top := t.TempDir()
	if err := os.WriteFile(top+"/"+metadataDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := createDir(root, "pvc-x", 1<<20); err == nil {
		t.Fatalf("createDir with a file named %s: no error", metadataDir)
	}
}

// TestCreateDirLateLookup: another controller made the metadata directory,
// so mkdir says it exists, and this mount's lookup does not see it at
// first: createDir asks again and goes on; a lookup that never sees it
// ends in an error naming the directory, after a bounded number of tries.
func TestCreateDirLateLookup(t *testing.T) {
	top := t.TempDir()
	if err := os.Mkdir(top+"/"+metadataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	real := lstatShared
	t.Cleanup(func() { lstatShared = real })
	for _, late := range []int{2, 1000} {
		calls := 0
		lstatShared = func(root *os.Root, name string) (fs.FileInfo, error) {
			if calls++; calls <= late {
				return nil, &fs.PathError{Op: "fstatat", Path: name, Err: fs.ErrNotExist}
			}
			return real(root, name)
		}
		err := createDir(root, fmt.Sprintf("pvc-%d", late), 1<<20)
		switch {
		case late == 2 && (err != nil || calls != 3):
			t.Errorf("lookup late twice: %v after %d lookups; want it made after 3", err, calls)
		case late > 2 && (err == nil || !errors.Is(err, fs.ErrExist) && !strings.Contains(err.Error(), metadataDir) || calls > 10):
			t.Errorf("lookup never sees it: %v after %d lookups; want an error naming %s within 10", err, calls, metadataDir)
		}
	}
}

// TestCreateDirLateDirectory: the metadata directory is found, but writing
// the record in it says it does not exist, as a GlusterFS client's older
// view does after another's mkdir: the write is tried again and the
// volume made; a view that never catches up ends in the error, after a
// bounded number of tries.
func TestCreateDirLateDirectory(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	real := writeRecordFile
	t.Cleanup(func() { writeRecordFile = real })
	for _, late := range []int{2, 1000} {
		calls := 0
		writeRecordFile = func(root *os.Root, record string, data []byte) error {
			if calls++; calls <= late {
				return &fs.PathError{Op: "openat", Path: record + ".tmp", Err: fs.ErrNotExist}
			}
			return real(root, record, data)
		}
		dir := fmt.Sprintf("pvc-%d", late)
		err := createDir(root, dir, 1<<20)
		switch {
		case late == 2 && (err != nil || calls != 3):
			t.Errorf("the directory seen late twice: %v after %d writes; want the volume made after 3", err, calls)
		case late == 2:
			if fi, err := root.Stat(dir); err != nil || !fi.IsDir() {
				t.Errorf("volume %s not made: %v", dir, err)
			}
		case err == nil || calls > 10:
			t.Errorf("the directory never seen: %v after %d writes; want an error within 10", err, calls)
		}
	}
}
