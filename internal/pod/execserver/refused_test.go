package execserver

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/startgate/startgatetest"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

// TestExecSocketRefusedTracedExec: on the exec socket, a command whose
// traced execve a security module refuses runs once, untraced, with its
// output and exit status as usual, and is still gated with its own PID;
// the warning names the program, never its arguments. The program's next
// command starts untraced at once; another program's starts traced.
func TestExecSocketRefusedTracedExec(t *testing.T) {
	sh := startgatetest.RefusedProgram(t, "/bin/sh") // before the server: undone after it stops
	var recorded startgatetest.Gates
	var logged lockedBuffer
	ts := startServer(t, Config{
		Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		Gate:   recorded.Gate(t),
	})
	marker := filepath.Join(t.TempDir(), "ran")
	const secret = "--password=s3cr3t-4f9a"
	for i, c := range []struct {
		path   string
		traced bool
	}{{sh, false}, {sh, false}, {"/bin/sh", true}} {
		var out, errb lockedBuffer
		p, err := ts.client.Start(context.Background(), execclient.Command{
			Argv:   []string{c.path, "-c", `echo ran >> "$1"; echo "$$"; echo err >&2; exit 3`, "sh", marker, secret},
			Stdout: &out, Stderr: &errb,
		})
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		res, err := p.Wait()
		if err != nil || res.Code != 3 || out.String() != strconv.Itoa(p.Pid())+"\n" || errb.String() != "err\n" {
			t.Errorf("command %d: %+v, %v, stdout %q, stderr %q; want exit 3, its PID %d and err", i, res, err, out.String(), errb.String(), p.Pid())
		}
		if gates, want := recorded.Take(), (startgatetest.Gated{PID: p.Pid(), Traced: c.traced}); len(gates) != 1 || gates[0] != want {
			t.Errorf("command %d of %s: gated %+v; want once, %+v", i, c.path, gates, want)
		}
		startgatetest.WarnedOnce(t, logged.String(), sh, secret) // the first command's, after each
	}
	startgatetest.RanOnceEach(t, marker, 3)
}
