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
	"sync"
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

// WarnedOnce fails tb unless logged (a text log) holds one warning, that a
// command could not run traced, naming argv0 and not secret (an argument
// of the command).
func WarnedOnce(tb testing.TB, logged, argv0, secret string) {
	tb.Helper()
	if n := strings.Count(logged, "level=WARN"); n != 1 || !strings.Contains(logged, "could not run traced") ||
		!strings.Contains(logged, "argv0="+argv0) || strings.Contains(logged, secret) {
		tb.Errorf("logged %q (%d warnings); want one warning, naming %s and not the arguments", logged, n, argv0)
	}
}

// RanOnceEach fails tb unless the file marker holds n lines "ran": the
// commands of a test, each appending one, ran once each.
func RanOnceEach(tb testing.TB, marker string, n int) {
	tb.Helper()
	if b, _ := os.ReadFile(marker); string(b) != strings.Repeat("ran\n", n) {
		tb.Errorf("the commands ran %q; want once each, %d", b, n)
	}
}

// Gated is a call of a gate: the PID it was given, and whether that
// process was traced then (stopped before its first instruction).
type Gated struct {
	PID    int
	Traced bool
}

// Gates records the calls of the gates it makes.
type Gates struct {
	mu    sync.Mutex
	calls []Gated
}

// Gate returns a gate, for any command, that records its calls in g;
// failing to read the process's tracer fails tb.
func (g *Gates) Gate(tb testing.TB) func([]string) func(int) {
	return func([]string) func(int) {
		return func(pid int) {
			traced, err := Traced(pid)
			if err != nil {
				tb.Error(err)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			g.calls = append(g.calls, Gated{pid, traced})
		}
	}
}

// Take returns the calls recorded since the last Take.
func (g *Gates) Take() []Gated {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls := g.calls
	g.calls = nil
	return calls
}
