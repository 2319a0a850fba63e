package execbatch

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
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
	var recorded startgatetest.Gates
	gate := recorded.Gate(t)
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
		if gates := recorded.Take(); len(gates) != 1 || gates[0].Traced != c.traced || r.Failure != "" || r.ExitCode != 3 ||
			string(r.Stdout) != strconv.Itoa(gates[0].PID)+"\n" || string(r.Stderr) != "err\n" {
			t.Errorf("command %d of %s: %+v (stdout %q, stderr %q), gated %+v; want exit 3, err, and gated once, traced %v, with the PID it printed",
				i, c.path, r, r.Stdout, r.Stderr, gates, c.traced)
		}
		startgatetest.WarnedOnce(t, logged.String(), sh, secret) // the first command's, after each
	}
	startgatetest.RanOnceEach(t, marker, 3)
}
