package execserver

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/pod/cmdslots"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

// TestOutputCapped: each stream carries at most MaxOutput bytes; the
// Result says which was truncated; the command is not disturbed.
func TestOutputCapped(t *testing.T) {
	ts := startServer(t, Config{MaxOutput: 1000})
	res, out, errOut, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' o; printf small >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1000 || errOut != "small" || res.Code != 3 || !res.StdoutTruncated || res.StderrTruncated {
		t.Fatalf("got %d bytes of stdout, stderr %q, result %+v; want 1000, \"small\", code 3, stdout truncated", len(out), errOut, res)
	}
	res, out, _, err = runCmd(t, ts.client, execclient.Command{Argv: []string{"head", "-c", "1000", "/dev/zero"}})
	if err != nil || len(out) != 1000 || res.StdoutTruncated {
		t.Fatalf("exactly the limit: %d bytes, %+v, %v; want 1000, not truncated", len(out), res, err)
	}
}

// TestOutputCappedDefault: the default limit is the 16 MiB of
// execclient.MaxOutput, as CRI ExecSync.
func TestOutputCappedDefault(t *testing.T) {
	ts := startServer(t, Config{})
	res, out, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"head", "-c", strconv.Itoa(execclient.MaxOutput + 100000), "/dev/zero"}})
	if err != nil || len(out) != execclient.MaxOutput || !res.StdoutTruncated {
		t.Fatalf("%d bytes, %+v, %v; want %d and truncated", len(out), res, err, execclient.MaxOutput)
	}
	// A service that sends more (another build, another limit): the
	// client keeps no more than its own limit either.
	lax := startServer(t, Config{MaxOutput: 2 * execclient.MaxOutput})
	res, out, _, err = runCmd(t, lax.client, execclient.Command{Argv: []string{"head", "-c", strconv.Itoa(execclient.MaxOutput + 100000), "/dev/zero"}})
	if err != nil || len(out) != execclient.MaxOutput || !res.StdoutTruncated {
		t.Fatalf("from a lax service: %d bytes, %+v, %v; want %d and truncated", len(out), res, err, execclient.MaxOutput)
	}
}

// TestTimeoutDefaultAndMaximum: a call without a timeout gets the
// default, one over the maximum is refused before anything runs.
func TestTimeoutDefaultAndMaximum(t *testing.T) {
	ts := startServer(t, Config{CommandTimeout: 300 * time.Millisecond, MaxTimeout: time.Second})
	start := time.Now()
	res, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"sleep", "30"}})
	if err != nil || !res.TimedOut {
		t.Fatalf("no timeout given: %+v, %v; want killed by the default timeout", res, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
	marker := filepath.Join(ts.dir, "ran")
	_, _, _, err = runCmd(t, ts.client, execclient.Command{Argv: []string{"touch", marker}, Timeout: 2 * time.Second})
	if status.Code(errors.Unwrap(err)) != codes.InvalidArgument && !strings.Contains(err.Error(), "InvalidArgument") {
		t.Fatalf("timeout over the maximum: %v, want InvalidArgument", err)
	}
	if !strings.Contains(err.Error(), "at most 1s") {
		t.Errorf("error %q does not name the maximum", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran")
	}
}

// TestConcurrencyCap: with MaxConcurrent commands running, a call waits at
// most QueueWait and is then refused, ErrNotStarted, without running; a
// call that finds a slot within the wait runs.
func TestConcurrencyCap(t *testing.T) {
	ts := startServer(t, Config{MaxConcurrent: 2, QueueWait: 300 * time.Millisecond})
	var procs []*execclient.Process
	for range 2 {
		p, err := ts.client.Start(context.Background(), execclient.Command{Argv: []string{"sleep", "30"}})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	marker := filepath.Join(ts.dir, "ran")
	start := time.Now()
	_, err := ts.client.Start(context.Background(), execclient.Command{Argv: []string{"touch", marker}})
	if !errors.Is(err, execclient.ErrNotStarted) || !strings.Contains(err.Error(), "exec service busy: 2 commands running") {
		t.Fatalf("third call: %v, want ErrNotStarted naming the limit", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("refused after %s, before the queue wait", d)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused command ran")
	}

	// One ends while the next call waits: it runs.
	go func() {
		time.Sleep(100 * time.Millisecond)
		procs[0].Kill()
	}()
	res, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"touch", marker}})
	if err != nil || res.Code != 0 {
		t.Fatalf("call after a slot freed: %+v, %v", res, err)
	}
	procs[1].Kill()
	procs[0].Wait()
	procs[1].Wait()
}

// TestStdinNotLeaked: a command that exits leaving a daemon holding its
// standard input, unread, while the client goes on sending: once the call
// is over, the server has no goroutine or descriptor more than before.
func TestStdinNotLeaked(t *testing.T) {
	ts := startServer(t, Config{})
	// Warm up: the connection and gRPC's own goroutines.
	if _, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"true"}, Stdin: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	g0, fd0 := settle(t, -1, -1)

	pidFile := filepath.Join(ts.dir, "daemon.pid")
	// The daemon gets the command's stdin on fd 0 (a background job of a
	// non-interactive shell would get /dev/null), never reads it, and
	// lives on after sh exits; meanwhile the client fills the pipe.
	script := `exec 3<&0; sleep 60 <&3 >/dev/null 2>&1 & echo $! >` + pidFile + `; sleep 0.5; exit 0`
	input := bytes.Repeat([]byte("y"), 1<<20) // far more than a pipe holds
	res, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"sh", "-c", script}, Stdin: bytes.NewReader(input)})
	if data, rerr := os.ReadFile(pidFile); rerr == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(data))); pid > 0 {
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		}
	} else {
		t.Fatalf("no daemon: %v", rerr)
	}
	if err != nil || res.Code != 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	g1, fd1 := settle(t, g0, fd0)
	if g1 > g0 || fd1 > fd0 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("after the call: %d goroutines (before %d), %d descriptors (before %d)\n%s", g1, g0, fd1, fd0, buf[:n])
	}
	t.Logf("goroutines %d -> %d, descriptors %d -> %d", g0, g1, fd0, fd1)
}

// settle returns the goroutine and descriptor counts of this process once
// they are at most the wanted ones (-1: once they stop changing), or after
// 3 seconds.
func settle(t *testing.T, wantG, wantFD int) (int, int) {
	t.Helper()
	var g, fd int
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pg, pfd := g, fd
		g, fd = runtime.NumGoroutine(), countFDs(t)
		switch {
		case wantG < 0 && g == pg && fd == pfd:
			return g, fd
		case wantG >= 0 && g <= wantG && fd <= wantFD:
			return g, fd
		case time.Now().After(deadline):
			return g, fd
		}
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestQueueBounds: a waiting call ends with its caller's deadline, and a
// call finding MaxQueued calls waiting is refused at once; neither runs.
func TestQueueBounds(t *testing.T) {
	ts := startServer(t, Config{MaxConcurrent: 1, MaxQueued: 1})
	running, err := ts.client.Start(context.Background(), execclient.Command{Argv: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { running.Kill(); running.Wait() }()
	marker := filepath.Join(ts.dir, "ran")

	// The one waiting call: it waits until its deadline, not a fixed bound.
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		_, err := ts.client.Start(ctx, execclient.Command{Argv: []string{"touch", marker}})
		waited <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	_, err = ts.client.Start(context.Background(), execclient.Command{Argv: []string{"touch", marker}})
	if !errors.Is(err, execclient.ErrNotStarted) || !strings.Contains(err.Error(), "1 calls waiting (their limit)") {
		t.Fatalf("a call past the queue: %v, want ErrNotStarted naming the queue's limit", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused after %s, want at once", d)
	}
	err = <-waited
	if err == nil || !strings.Contains(err.Error(), "DeadlineExceeded") && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the waiting call: %v, want its deadline", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a refused command ran")
	}
}

// TestContainerSlots: with the container's command slots all held by
// another process (a batch run through CRI ExecSync), a call waits at most
// QueueWait for one and is then refused, ErrNotStarted, without running;
// once one is free, a call runs.
func TestContainerSlots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the slots' directory must be root's")
	}
	dir := filepath.Join(t.TempDir(), "slots")
	slots, err := cmdslots.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the server has stopped (cleanups run last first): a
	// call's handler gives its slot back after the client has its result.
	t.Cleanup(func() { slots.Close() })
	batch, err := cmdslots.Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	release, err := batch.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, Config{QueueWait: 300 * time.Millisecond, Slots: slots})
	marker := filepath.Join(ts.dir, "ran")
	_, err = ts.client.Start(context.Background(), execclient.Command{Argv: []string{"touch", marker}})
	if !errors.Is(err, execclient.ErrNotStarted) || !strings.Contains(err.Error(), "all 1 command slots of the container busy") {
		t.Fatalf("call with the container's slots held: %v, want ErrNotStarted naming them", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the refused command ran")
	}
	release()
	res, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"touch", marker}})
	if err != nil || res.Code != 0 {
		t.Fatalf("call after the slot was freed: %+v, %v", res, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
}
