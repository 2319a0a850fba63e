// Package atomicfile replaces files atomically and durably, the way
// google/renameio does plus a sync of the directory: the content goes to a
// temporary file whose name starts with a dot (directory watchers, the
// kubelet's Flexvolume prober among them, ignore dotfiles) in the target's
// directory, is synced, renamed over the target, and the directory is synced.
// A crash leaves the old file or the new one, never a partial one; at worst a
// temporary file named by [TempPattern] stays behind.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempPattern is the os.CreateTemp pattern of the temporary files for the
// file named base: ".<base>.tmp-*".
func TempPattern(base string) string {
	return "." + base + ".tmp-*"
}

// Write replaces dst with what fill writes, with mode mode. On error dst is
// unchanged and no temporary file is left.
func Write(dst string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	dir, base := filepath.Split(dst)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPattern(base))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), dst); err != nil {
		return err
	}
	return SyncDir(dir)
}

// WriteFile replaces dst with data, with mode mode.
func WriteFile(dst string, data []byte, mode os.FileMode) error {
	return Write(dst, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Copy replaces dst with a copy of the file src, with mode mode.
func Copy(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return Write(dst, mode, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// Symlink replaces dst with a symbolic link to target.
func Symlink(target, dst string) error {
	dir, base := filepath.Split(dst)
	if dir == "" {
		dir = "."
	}
	for i := 0; ; i++ {
		tmp := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%d", base, os.Getpid(), i))
		err := os.Symlink(target, tmp)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue // a leftover of a crashed writer with our PID
		}
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return err
		}
		return SyncDir(dir)
	}
}

// SyncDir syncs the directory dir, making renames and removals in it
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
