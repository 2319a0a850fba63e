package shim

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	utilexec "k8s.io/utils/exec"
)

// TestLookPathSkipsRelativePathEntries checks that an empty or relative
// PATH entry never finds a binary: the current directory must not choose
// what runs as root.
func TestLookPathSkipsRelativePathEntries(t *testing.T) {
	cwd := t.TempDir()
	if err := os.Mkdir(filepath.Join(cwd, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(cwd, "planted"), filepath.Join(cwd, "bin", "planted")} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(cwd)
	abs := t.TempDir()
	for i, path := range []string{"", ":", ".", "bin", "./bin", abs + "::" + abs, abs + ":bin"} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			e := &selfSkippingExec{exec: utilexec.New(), path: path}
			if p, err := e.LookPath("planted"); !errors.Is(err, utilexec.ErrExecutableNotFound) {
				t.Errorf("PATH=%q: LookPath(planted) = %q, %v; want ErrExecutableNotFound", path, p, err)
			}
		})
	}
	t.Run("absolute entry still found", func(t *testing.T) {
		e := &selfSkippingExec{exec: utilexec.New(), path: "bin:" + filepath.Join(cwd, "bin")}
		if p, err := e.LookPath("planted"); err != nil || p != filepath.Join(cwd, "bin", "planted") {
			t.Errorf("LookPath(planted) = %q, %v; want %s", p, err, filepath.Join(cwd, "bin", "planted"))
		}
	})
}
