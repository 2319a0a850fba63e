// Package execbatch runs, in the mount container, a batch of commands that
// a volume host sent in one CRI ExecSync (`mountpod exec-batch REQUEST...`,
// wire format: package pkg/execbatch): side by side, each with its own
// timeout, and prints their results in order.
package execbatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/cmdslots"
	"github.com/mountcontainers/mountcontainers/internal/pod/outpipe"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
)

// outputGrace bounds the wait for the end of a command's outputs after it
// exited: a FUSE helper can leave its daemon holding them. What they hold
// then is still read; nothing the command wrote before it exited is lost.
// A variable for tests.
var outputGrace = 2 * time.Second

// Run runs the requests that args carry, side by side, and writes their
// results (a JSON array, in order) to out. A request that does not decode
// is refused in its result; only a write error, or more than
// wire.MaxRequests requests, is Run's. slots, when not nil, bound the
// commands running at once in the container: each command takes one
// first, and its wait counts in its timeout. gate, when not nil, is asked
// with each command's argv before it starts; a function it returns is
// called with the command's process ID before the program runs
// (startgate.Start: the mount pod places a FUSE mount in its scope,
// scope.PlaceEarly). log, when not nil, gets the warning of a command
// that could not run traced.
func Run(ctx context.Context, args []string, out io.Writer, slots *cmdslots.Slots, gate func(argv []string) func(pid int), log *slog.Logger) error {
	if len(args) == 0 || len(args) > wire.MaxRequests {
		return errors.New("exec-batch: want 1 to " + strconv.Itoa(wire.MaxRequests) + " requests, got " + strconv.Itoa(len(args)))
	}
	results := make([]wire.Result, len(args))
	var wg sync.WaitGroup
	for i, arg := range args {
		req, err := wire.DecodeRequest(arg)
		if err != nil {
			results[i] = wire.Result{ExitCode: -1, Failure: wire.FailureStart, Error: "request " + strconv.Itoa(i) + ": " + err.Error()}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runOne(ctx, req, slots, gate, log)
		}()
	}
	wg.Wait()
	return json.NewEncoder(out).Encode(results)
}

// runOne runs one command with its timeout, in a slot of slots when not
// nil; gate and log: see [Run].
func runOne(ctx context.Context, req wire.Request, slots *cmdslots.Slots, gate func(argv []string) func(pid int), log *slog.Logger) wire.Result {
	ctx, cancel := context.WithTimeout(ctx, req.Timeout())
	defer cancel()
	if slots != nil {
		release, err := slots.Acquire(ctx)
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded):
			return wire.Result{ExitCode: -1, Failure: wire.FailureTimeout, Error: "timed out after " + req.Timeout().String() + " before it started: " + err.Error()}
		default:
			return wire.Result{ExitCode: -1, Failure: wire.FailureStart, Error: err.Error()}
		}
		defer release()
	}
	// The timeout is the command's only if its kill ended it: one that
	// ended by itself as its time ran out, or whose outputs were read
	// after it, keeps its own result.
	var killed atomic.Bool
	newCmd := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
		cmd.Cancel = func() error {
			killed.Store(ctx.Err() == context.DeadlineExceeded)
			return cmd.Process.Kill()
		}
		return cmd
	}
	var stdout, stderr tailBuffer
	var place func(int)
	if gate != nil {
		place = gate(req.Argv)
	}
	cmd, err := outpipe.Run(newCmd, &stdout, &stderr, outputGrace, place, log)
	res := wire.Result{Stdout: stdout.bytes(), Stderr: stderr.bytes()}
	var ps *os.ProcessState
	if cmd != nil {
		ps = cmd.ProcessState
	}
	switch {
	case ps != nil && killed.Load() && signal(ps) == syscall.SIGKILL,
		ps == nil && ctx.Err() == context.DeadlineExceeded:
		res.ExitCode, res.Failure, res.Error = -1, wire.FailureTimeout, "timed out after "+req.Timeout().String()
	case ps != nil:
		res.ExitCode = exitCode(ps)
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES):
		// As the runtimes say of a single exec (pkg/exec's
		// notFoundMessage: no such file, or permission denied).
		res.ExitCode, res.Failure, res.Error = -1, wire.FailureNotFound, err.Error()
	case err != nil:
		res.ExitCode, res.Failure, res.Error = -1, wire.FailureStart, err.Error()
	}
	return res
}

// signal is the signal that ended the process of ps, or 0.
func signal(ps *os.ProcessState) syscall.Signal {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// exitCode is the shell's convention: 128+N for a signal N.
func exitCode(ps *os.ProcessState) int {
	if sig := signal(ps); sig != 0 {
		return 128 + int(sig)
	}
	return ps.ExitCode()
}

// tailBuffer keeps the last wire.MaxOutput bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.buf.Write(wire.Tail(p, wire.MaxOutput))
	if over := b.buf.Len() - wire.MaxOutput; over > 0 {
		b.buf.Next(over)
	}
	return n, nil
}

func (b *tailBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
