package execservertest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Heartbeat is a command that shows it runs by touching a file every 50 ms
// until it is killed: for tests that a cancelled or interrupted call kills
// the command it started.
type Heartbeat struct {
	path string
}

// NewHeartbeat returns a heartbeat in a new temporary directory.
func NewHeartbeat(tb testing.TB) *Heartbeat {
	return &Heartbeat{path: filepath.Join(tb.TempDir(), "alive")}
}

// Argv is the command.
func (h *Heartbeat) Argv() []string {
	return []string{"sh", "-c", "while :; do touch " + h.path + "; sleep 0.05; done"}
}

// WaitBeating fails the test unless the command beats within timeout.
func (h *Heartbeat) WaitBeating(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(h.path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the command never ran: no %s after %s", h.path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CheckStopped fails the test if the command still beats: it removes the
// file after its process group had time to die, and the file must stay
// gone for six beats.
func (h *Heartbeat) CheckStopped(tb testing.TB) {
	tb.Helper()
	time.Sleep(300 * time.Millisecond)
	os.Remove(h.path)
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(h.path); err == nil {
		tb.Fatal("the command still runs")
	}
}
