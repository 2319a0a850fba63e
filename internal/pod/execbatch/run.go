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
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/cmdslots"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
)

// waitDelay bounds the wait for a command's outputs to close after it
// exited: a FUSE helper can leave its daemon holding them.
const waitDelay = 2 * time.Second

// Run runs the requests that args carry, side by side, and writes their
// results (a JSON array, in order) to out. A request that does not decode
// is refused in its result; only a write error, or more than
// wire.MaxRequests requests, is Run's. slots, when not nil, bound the
// commands running at once in the container: each command takes one
// first, and its wait counts in its timeout.
func Run(ctx context.Context, args []string, out io.Writer, slots *cmdslots.Slots) error {
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
			results[i] = runOne(ctx, req, slots)
		}()
	}
	wg.Wait()
	return json.NewEncoder(out).Encode(results)
}

// runOne runs one command with its timeout, in a slot of slots when not
// nil.
func runOne(ctx context.Context, req wire.Request, slots *cmdslots.Slots) wire.Result {
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
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	var stdout, stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	err := cmd.Run()
	res := wire.Result{Stdout: stdout.bytes(), Stderr: stderr.bytes()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		res.ExitCode, res.Failure, res.Error = -1, wire.FailureTimeout, "timed out after "+req.Timeout().String()
	case cmd.Process == nil && (errors.Is(err, exec.ErrNotFound) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES)):
		// As the runtimes say of a single exec (pkg/exec's
		// notFoundMessage: no such file, or permission denied).
		res.ExitCode, res.Failure, res.Error = -1, wire.FailureNotFound, err.Error()
	case errors.As(err, &exit):
		res.ExitCode = exitCode(exit)
	case err != nil && cmd.Process == nil:
		res.ExitCode, res.Failure, res.Error = -1, wire.FailureStart, err.Error()
	case err != nil:
		// Exited 0 but its outputs stayed open past waitDelay: the
		// command's own result stands.
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	return res
}

// exitCode is the shell's convention: 128+N for a signal N.
func exitCode(e *exec.ExitError) int {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return e.ExitCode()
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
