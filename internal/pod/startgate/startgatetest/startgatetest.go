// Package startgatetest makes, in a test, a program whose traced execve
// package startgate sees refused with EPERM, as a security module's rule
// for a program run traced does (AppArmor, SELinux), which a test cannot
// have on demand: the callers of startgate.Start prove with it that such a
// command runs once, untraced, and is still gated.
package startgatetest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/startgate/internal/seam"
)

// RefusedProgram copies the program at path into a directory of tb's and
// returns the copy's path, whose traced execve startgate.Start fails with
// EPERM (without starting anything) until tb ends; untraced, it runs. A
// copy of the test's own, not path itself: startgate keeps the program
// untraced once its untraced start succeeded, for the process's life,
// and other tests of the binary must find path as it was.
func RefusedProgram(tb testing.TB, path string) string {
	tb.Helper()
	if !testing.Testing() {
		panic("startgatetest: outside a test binary")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	prog := filepath.Join(tb.TempDir(), filepath.Base(path))
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(seam.Refuse(prog))
	return prog
}

// Traced reports whether the process pid has a tracer (TracerPid in
// /proc/PID/status): at a gate, whether startgate.Start started the
// command traced.
func Traced(pid int) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	return false, errors.New("no TracerPid in /proc/" + strconv.Itoa(pid) + "/status")
}
