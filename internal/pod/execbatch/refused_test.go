package execbatch

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/startgate/startgatetest"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
)

// TestCRIBatchRefusedTracedExec: in a CRI batch, a command whose traced
// execve a security module refuses runs once, untraced, with its outputs
// and exit status as usual, and is still gated with its own PID; the
// warning names the program, never its arguments. The program's next
// command starts untraced at once; another program's starts traced.
func TestCRIBatchRefusedTracedExec(t *testing.T) {
	sh := startgatetest.RefusedProgram(t, "/bin/sh")
	type gated struct {
		pid    int
		traced bool
	}
	var mu sync.Mutex
	var gates []gated
	gate := func([]string) func(int) {
		return func(pid int) {
			traced, err := startgatetest.Traced(pid)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			gates = append(gates, gated{pid, traced})
		}
	}
	var logged bytes.Buffer // written by Run's goroutines, read once it returned
	log := slog.New(slog.NewTextHandler(&logged, nil))
	marker := filepath.Join(t.TempDir(), "ran")
	const secret = "--password=s3cr3t-4f9a"
	for i, c := range []struct {
		path   string
		traced bool
	}{{sh, false}, {sh, false}, {"/bin/sh", true}} {
		args, err := wire.EncodeRequests([]wire.Request{{Argv: []string{c.path, "-c", `echo ran >> "$1"; echo "$$"; echo err >&2; exit 3`, "sh", marker, secret}, TimeoutMs: long}})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := Run(context.Background(), args, &out, nil, gate, log); err != nil {
			t.Fatal(err)
		}
		rs, err := wire.DecodeResults(out.Bytes(), 1)
		if err != nil {
			t.Fatal(err)
		}
		r := rs[0]
		mu.Lock()
		if len(gates) != 1 || gates[0].traced != c.traced || r.Failure != "" || r.ExitCode != 3 ||
			string(r.Stdout) != strconv.Itoa(gates[0].pid)+"\n" || string(r.Stderr) != "err\n" {
			t.Errorf("command %d of %s: %+v (stdout %q, stderr %q), gated %+v; want exit 3, err, and gated once, traced %v, with the PID it printed",
				i, c.path, r, r.Stdout, r.Stderr, gates, c.traced)
		}
		gates = nil
		mu.Unlock()
		if n := strings.Count(logged.String(), "level=WARN"); n != 1 {
			t.Errorf("after command %d: %d warnings; want 1, the first command's", i, n)
		}
	}
	if b, _ := os.ReadFile(marker); string(b) != "ran\nran\nran\n" {
		t.Errorf("the commands ran %q; want once each", b)
	}
	if s := logged.String(); !strings.Contains(s, "could not run traced") || !strings.Contains(s, "argv0="+sh) || strings.Contains(s, "s3cr3t") {
		t.Errorf("logged %q; want the warning naming %s, not the arguments", s, sh)
	}
}
