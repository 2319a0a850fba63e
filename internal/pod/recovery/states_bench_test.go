package recovery

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// statesDir returns a records directory of n records, one of them with a
// recovery's state, and their targets.
func statesDir(b *testing.B, n int) (string, []string) {
	dir := filepath.Join(b.TempDir(), "var", "lib", "kubelet", "plugin-containers", mountrecord.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	var targets []string
	for i := range n {
		t := "/var/lib/kubelet/pods/" + strconv.Itoa(i) + "/volumes/x/vol"
		targets = append(targets, t)
		if err := os.WriteFile(filepath.Join(dir, mountrecord.FileName(t)), []byte("{}"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(statePath(dir, targets[0]), []byte(stateVersion+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	return dir, targets
}

// BenchmarkStates100EachRecord: a pass over 100 records looks for each
// record's state file, as it did before [readStates].
func BenchmarkStates100EachRecord(b *testing.B) {
	dir, targets := statesDir(b, 100)
	for b.Loop() {
		n := 0
		for _, t := range targets {
			if _, ok := readState(dir, t); ok {
				n++
			}
		}
		if n != 1 {
			b.Fatalf("%d states; want 1", n)
		}
	}
}

// BenchmarkStates100OncePerPass: the same pass reads the directory's state
// files once.
func BenchmarkStates100OncePerPass(b *testing.B) {
	dir, targets := statesDir(b, 100)
	for b.Loop() {
		n := 0
		states := readStates(dir)
		for _, t := range targets {
			if _, ok := states.of(dir, t); ok {
				n++
			}
		}
		if n != 1 {
			b.Fatalf("%d states; want 1", n)
		}
	}
}
