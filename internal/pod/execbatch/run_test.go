package execbatch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/cmdslots"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
)

func run(t *testing.T, reqs ...wire.Request) []wire.Result {
	t.Helper()
	args, err := wire.EncodeRequests(reqs)
	if err != nil {
		t.Fatal(err)
	}
	return runArgs(t, args)
}

func runArgs(t *testing.T, args []string) []wire.Result {
	t.Helper()
	return runSlots(t, args, nil)
}

func runSlots(t *testing.T, args []string, slots *cmdslots.Slots) []wire.Result {
	t.Helper()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), args, &out, slots, nil, nil) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a hang guard, not a verdict on speed
		t.Fatal("Run did not return")
	}
	rs, err := wire.DecodeResults(out.Bytes(), len(args))
	if err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	return rs
}

const long = int64(30_000) // ms: a bound no command here should reach

// TestRunResults: each command's outputs and exit status in its request's
// position; a missing executable, a timeout and a request that does not
// decode are failures of their own result, not of the batch.
func TestRunResults(t *testing.T) {
	rs := runArgs(t, []string{
		mustEncode(t, wire.Request{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, TimeoutMs: long}),
		mustEncode(t, wire.Request{Argv: []string{"true"}, TimeoutMs: long}),
		mustEncode(t, wire.Request{Argv: []string{"no-such-tool-here"}, TimeoutMs: long}),
		mustEncode(t, wire.Request{Argv: []string{"sleep", "30"}, TimeoutMs: 100}),
		`{"argv":`,
		mustEncode(t, wire.Request{Argv: []string{"sh", "-c", "kill -9 $$"}, TimeoutMs: long}),
	})
	checks := []struct {
		ok  func(wire.Result) bool
		say string
	}{
		{func(r wire.Result) bool {
			return r.Failure == "" && r.ExitCode == 3 && string(r.Stdout) == "out\n" && string(r.Stderr) == "err\n"
		}, "exit 3 with its outputs"},
		{func(r wire.Result) bool { return r.Failure == "" && r.ExitCode == 0 }, "exit 0"},
		{func(r wire.Result) bool { return r.Failure == wire.FailureNotFound }, "not found"},
		{func(r wire.Result) bool { return r.Failure == wire.FailureTimeout }, "timed out"},
		{func(r wire.Result) bool {
			return r.Failure == wire.FailureStart && strings.Contains(r.Error, "request 4")
		}, "refused, naming the request"},
		{func(r wire.Result) bool { return r.Failure == "" && r.ExitCode == 128+9 }, "exit 137 (SIGKILL)"},
	}
	for i, c := range checks {
		if !c.ok(rs[i]) {
			t.Errorf("result %d: %+v (stdout %q, stderr %q), want %s", i, rs[i], rs[i].Stdout, rs[i].Stderr, c.say)
		}
	}
}

// TestRunSideBySide: the commands of a batch run at once: each of two
// waits for the other's file, which only works if both run together.
func TestRunSideBySide(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	wait := func(mine, other string) wire.Request {
		return wire.Request{Argv: []string{"sh", "-c", fmt.Sprintf(`touch %s; while [ ! -e %s ]; do sleep 0.01; done`, mine, other)}, TimeoutMs: long}
	}
	rs := run(t, wait(a, b), wait(b, a))
	for i, r := range rs {
		if r.Failure != "" || r.ExitCode != 0 {
			t.Errorf("command %d: %+v, want both done", i, r)
		}
	}
}

// TestRunDaemonHoldingOutput: a command that leaves a process holding its
// outputs (as a FUSE helper's daemon can) is done when it exits: its
// result comes, not a wait for the daemon.
func TestRunDaemonHoldingOutput(t *testing.T) {
	rs := run(t, wire.Request{Argv: []string{"sh", "-c", "sleep 5 & echo started"}, TimeoutMs: long})
	if rs[0].Failure != "" || rs[0].ExitCode != 0 || string(rs[0].Stdout) != "started\n" {
		t.Fatalf("%+v (stdout %q), want exit 0 with its output", rs[0], rs[0].Stdout)
	}
}

// TestRunOutputBeforeExitIsNeverLost: what a command wrote before it
// exited is in its result however late the copies run after the exit. A
// grace of a nanosecond ends every wait for the outputs' end before the
// copies have read them, as a busy node's scheduler can.
func TestRunOutputBeforeExitIsNeverLost(t *testing.T) {
	defer func(g time.Duration) { outputGrace = g }(outputGrace)
	outputGrace = time.Nanosecond
	const n, outSize, errSize = 20, 48 << 10, 16 << 10
	reqs := make([]wire.Request, n)
	for i := range reqs {
		reqs[i] = wire.Request{Argv: []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero; head -c %d /dev/zero >&2; exit %d", outSize, errSize, i%3)}, TimeoutMs: long}
	}
	for i, r := range run(t, reqs...) {
		if r.Failure != "" || r.ExitCode != i%3 || len(r.Stdout) != outSize || len(r.Stderr) != errSize {
			t.Errorf("command %d: failure %q, exit %d, %d bytes out, %d bytes err; want exit %d, %d and %d bytes",
				i, r.Failure, r.ExitCode, len(r.Stdout), len(r.Stderr), i%3, outSize, errSize)
		}
	}
}

// TestRunTimeoutIsTheKills: a command that exited by itself is not timed
// out because its outputs, held by a daemon it left, were read past its
// timeout: its own exit status stands.
func TestRunTimeoutIsTheKills(t *testing.T) {
	// 1 s: time enough for sh to start its daemon and exit on a loaded
	// machine, and still shorter than the wait for the outputs (2 s).
	rs := run(t, wire.Request{Argv: []string{"sh", "-c", "sleep 5 & echo started"}, TimeoutMs: 1000})
	if rs[0].Failure != "" || rs[0].ExitCode != 0 || string(rs[0].Stdout) != "started\n" {
		t.Fatalf("%+v (stdout %q), want exit 0 with its output", rs[0], rs[0].Stdout)
	}
}

// TestRunOutputTail: an output longer than wire.MaxOutput keeps its end.
func TestRunOutputTail(t *testing.T) {
	rs := run(t, wire.Request{Argv: []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo END", 3*wire.MaxOutput)}, TimeoutMs: long})
	if n := len(rs[0].Stdout); n != wire.MaxOutput || !strings.HasSuffix(string(rs[0].Stdout), "xEND\n") {
		t.Fatalf("%d bytes ending %q, want %d ending with END", n, rs[0].Stdout[max(0, n-8):], wire.MaxOutput)
	}
}

// TestRunRefusesBadBatch: no request, or more than wire.MaxRequests, is
// the batch's error.
func TestRunRefusesBadBatch(t *testing.T) {
	for _, n := range []int{0, wire.MaxRequests + 1} {
		args := make([]string, n)
		for i := range args {
			args[i] = mustEncode(t, wire.Request{Argv: []string{"true"}, TimeoutMs: long})
		}
		var out bytes.Buffer
		if err := Run(context.Background(), args, &out, nil, nil, nil); err == nil || out.Len() != 0 {
			t.Errorf("%d requests: %v, output %q; want an error and no output", n, err, out.Bytes())
		}
	}
}

func mustEncode(t *testing.T, r wire.Request) string {
	t.Helper()
	args, err := wire.EncodeRequests([]wire.Request{r})
	if err != nil {
		t.Fatal(err)
	}
	return args[0]
}

// TestRunInSlots: with the container's slots, a batch's commands run no
// more at once than there are slots, and a command that gets no slot within
// its timeout fails as timed out, before it started. Without slots the
// batch's commands run side by side (each waits until all three have
// started); with one slot each claims a directory no other may hold while
// it runs.
func TestRunInSlots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the slots' directory must be root's")
	}
	dir := filepath.Join(t.TempDir(), "slots")
	claim := filepath.Join(t.TempDir(), "claim")
	met := t.TempDir()
	failed := func(rs []wire.Result) int {
		n := 0
		for _, r := range rs {
			if r.ExitCode != 0 {
				n++
			}
		}
		return n
	}
	var together []string
	for i := range 3 {
		// Up to 30 s for the others to start: a hang guard on a loaded
		// machine, not a measure of speed.
		together = append(together, mustEncode(t, wire.Request{Argv: []string{"sh", "-c",
			`touch "$1/$2"; i=0; while [ "$(ls "$1" | wc -l)" -lt 3 ]; do i=$((i+1)); [ $i -lt 300 ] || exit 1; sleep 0.1; done`,
			"sh", met, strconv.Itoa(i)}, TimeoutMs: long}))
	}
	if rs := runSlots(t, together, nil); failed(rs) != 0 {
		t.Fatalf("without slots: %+v, want the three commands side by side, all exited 0", rs)
	}
	exclusive := mustEncode(t, wire.Request{Argv: []string{"sh", "-c", `mkdir "$1" && sleep 0.3 && rmdir "$1"`, "sh", claim}, TimeoutMs: long})
	batch := []string{exclusive, exclusive, exclusive}
	slots, err := cmdslots.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer slots.Close()
	if rs := runSlots(t, batch, slots); failed(rs) != 0 {
		t.Fatalf("with one slot: %+v, want the three commands one after another, all exited 0", rs)
	}
	// Another process (another opener) holds the one slot.
	other, err := cmdslots.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	release, err := other.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	rs := runSlots(t, []string{mustEncode(t, wire.Request{Argv: []string{"touch", claim}, TimeoutMs: 100})}, slots)
	if r := rs[0]; r.Failure != wire.FailureTimeout || !strings.Contains(r.Error, "before it started") || !strings.Contains(r.Error, dir) {
		t.Errorf("a command that got no slot: %+v, want a timeout before it started, naming %s", r, dir)
	}
	if _, err := os.Stat(claim); err == nil {
		t.Error("the command that got no slot ran")
	}
}
