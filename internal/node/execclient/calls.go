package execclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mountcontainers/mountcontainers/internal/boundary/execsocket"
)

// The service's methods (pkg/execapi/exec.proto).
const (
	methodIdentity = "/mountcontainers.exec.v1.Exec/Identity"
	methodExec     = "/mountcontainers.exec.v1.Exec/Exec"
)

// Identity is the service's answer to whom it runs for.
type Identity = execsocket.Identity

// Identity asks the service whom it runs for.
func (c *Conn) Identity(ctx context.Context) (Identity, error) {
	var id Identity
	s, err := c.open(methodIdentity, timeoutOf(ctx))
	if err != nil {
		return id, c.callError("identity", err, true)
	}
	defer c.forget(s)
	if err := c.send(ctx, s, nil, true); err != nil && !errors.Is(err, io.EOF) {
		return id, c.callError("identity", err, true)
	}
	var got []byte
	for {
		msg, end, err := c.recv(ctx, s)
		if err != nil {
			c.cancel(s)
			return id, c.callError("identity", err, true)
		}
		if end != nil {
			if err := end.error(); err != nil {
				return id, c.callError("identity", err, true)
			}
			break
		}
		got = msg
	}
	if got == nil {
		return id, c.callError("identity", errors.New("no answer"), true)
	}
	err = fields(got, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
		switch {
		case typ == protowire.BytesType && num == 1:
			id.PodNamespace = string(v)
		case typ == protowire.BytesType && num == 2:
			id.PodName = string(v)
		case typ == protowire.BytesType && num == 3:
			id.PodUID = string(v)
		case typ == protowire.BytesType && num == 4:
			id.ContainerName = string(v)
		case typ == protowire.BytesType && num == 5:
			id.Version = string(v)
		case typ == protowire.VarintType && num == 6:
			id.PID = int64(n)
		}
	})
	if err != nil {
		return id, c.callError("identity", err, false)
	}
	return id, nil
}

// Command is what [Conn.Run] runs.
type Command struct {
	Argv []string
	// Timeout kills the command's process group after this long; 0 for
	// the service's default.
	Timeout time.Duration
	// ExpectPodUID and ExpectContainer must be the service's, or nothing
	// runs (the error wraps [ErrNotStarted]).
	ExpectPodUID, ExpectContainer string
	// Plugin is for the service's metrics and logs.
	Plugin string
	// Stdin, when not nil, is streamed to the command, then closed; nil
	// gives it /dev/null.
	Stdin io.Reader
	// Stdout and Stderr get the output as it comes; nil discards it.
	Stdout, Stderr io.Writer
}

// Exit reasons of the service (Exit.Reason).
const (
	reasonExited    = 0
	reasonNotFound  = 1
	reasonCannotRun = 2
	reasonTimedOut  = 3
)

// Result is how a command ended.
type Result struct {
	// Code is the exit status, or 128 + Signal.
	Code int
	// Signal is the signal that killed the main process, or 0.
	Signal syscall.Signal
	// NotFound: argv[0] was not found or is not executable; nothing ran.
	NotFound bool
	// CannotRun: the command could not be started; Message says why.
	CannotRun bool
	// TimedOut: Timeout passed; the process group was killed.
	TimedOut bool
	// Message is the service's explanation of NotFound or CannotRun.
	Message string
	// OutputAbandoned, StdoutTruncated, StderrTruncated: as in
	// pkg/execclient's Result.
	OutputAbandoned, StdoutTruncated, StderrTruncated bool
}

// ChunkSize is the largest standard-input chunk sent in one message, as
// pkg/execclient's ChunkSize.
const ChunkSize = 32 << 10

// stdinGrace is how long Run lets the standard-input copy notice that the
// call ended before it returns without it (a reader blocked in Read).
const stdinGrace = 100 * time.Millisecond

// Run runs cmd to its end. Its error wraps [ErrNotStarted] when the command
// certainly did not start (the service is busy, serves another pod, or went
// away before the command started); any other error is about the call,
// after which it is unknown whether the command ran. Cancelling ctx kills
// the command's process group.
func (c *Conn) Run(ctx context.Context, cmd Command) (Result, error) {
	var res Result
	s, err := c.open(methodExec, 0)
	if err != nil {
		return res, c.callError("exec", err, true)
	}
	defer c.forget(s)
	if err := c.send(ctx, s, startMessage(cmd), false); err != nil && !errors.Is(err, io.EOF) {
		c.cancel(s)
		return res, c.callError("exec", err, true)
	}
	started := false
	var stdinDone chan struct{}
	defer func() {
		if stdinDone != nil {
			select {
			case <-stdinDone:
			case <-time.After(stdinGrace):
			}
		}
	}()
	for {
		msg, end, err := c.recv(ctx, s)
		if err != nil {
			c.cancel(s)
			return res, c.callError("exec", err, !started)
		}
		if end != nil {
			err := end.error()
			if err == nil {
				err = errors.New("the service ended the call without an exit status")
			}
			return res, c.callError("exec", err, !started)
		}
		var out, errOut []byte
		var exit []byte
		var pid bool
		err = fields(msg, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
			if typ != protowire.BytesType {
				return
			}
			switch num {
			case 1:
				pid = true
			case 2:
				out = v
			case 3:
				errOut = v
			case 4:
				exit = v
			}
		})
		if err != nil {
			c.cancel(s)
			return res, c.callError("exec", err, false)
		}
		switch {
		case pid && !started:
			started = true
			if cmd.Stdin != nil {
				stdinDone = make(chan struct{})
				go c.pumpStdin(ctx, s, cmd.Stdin, stdinDone)
			}
		case len(out) > 0 && cmd.Stdout != nil:
			if _, err := cmd.Stdout.Write(out); err != nil {
				c.cancel(s)
				return res, fmt.Errorf("exec: write output: %w", err)
			}
		case len(errOut) > 0 && cmd.Stderr != nil:
			if _, err := cmd.Stderr.Write(errOut); err != nil {
				c.cancel(s)
				return res, fmt.Errorf("exec: write output: %w", err)
			}
		case exit != nil:
			if err := decodeExit(exit, &res); err != nil {
				return res, c.callError("exec", err, false)
			}
			return res, nil
		}
	}
}

// pumpStdin streams in to the command, then closes its standard input.
func (c *Conn) pumpStdin(ctx context.Context, s *stream, in io.Reader, done chan struct{}) {
	defer close(done)
	buf := make([]byte, ChunkSize)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if c.send(ctx, s, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), buf[:n]), false) != nil {
				return
			}
		}
		if err != nil {
			closeStdin := protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), nil)
			c.send(ctx, s, closeStdin, false)
			return
		}
	}
}

// startMessage encodes ExecRequest{start: Start{...}}.
func startMessage(cmd Command) []byte {
	var b []byte
	for _, a := range cmd.Argv {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, a)
	}
	if cmd.Timeout > 0 {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(max(1, cmd.Timeout.Milliseconds())))
	}
	for _, f := range []struct {
		num protowire.Number
		v   string
	}{{6, cmd.ExpectPodUID}, {7, cmd.ExpectContainer}, {9, cmd.Plugin}} {
		if f.v != "" {
			b = protowire.AppendTag(b, f.num, protowire.BytesType)
			b = protowire.AppendString(b, f.v)
		}
	}
	if cmd.Stdin != nil {
		b = protowire.AppendTag(b, 8, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
}

// decodeExit decodes an Exit message into res.
func decodeExit(b []byte, res *Result) error {
	reason := uint64(reasonExited)
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
		switch {
		case typ == protowire.VarintType && num == 1:
			reason = n
		case typ == protowire.VarintType && num == 2:
			res.Code = int(int32(n))
		case typ == protowire.VarintType && num == 3:
			res.Signal = syscall.Signal(int32(n))
		case typ == protowire.BytesType && num == 4:
			res.Message = string(v)
		case typ == protowire.VarintType && num == 5:
			res.OutputAbandoned = n != 0
		case typ == protowire.VarintType && num == 6:
			res.StdoutTruncated = n != 0
		case typ == protowire.VarintType && num == 7:
			res.StderrTruncated = n != 0
		}
	})
	switch reason {
	case reasonExited:
	case reasonNotFound:
		res.NotFound = true
	case reasonCannotRun:
		res.CannotRun = true
	case reasonTimedOut:
		res.TimedOut = true
	default:
		return fmt.Errorf("unknown exit reason %d", reason)
	}
	return err
}

// fields calls fn for each field of the protobuf message b: v for a
// length-delimited value, n for a varint.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64)) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("bad message: %w", protowire.ParseError(l))
		}
		b = b[l:]
		switch typ {
		case protowire.VarintType:
			n, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return fmt.Errorf("bad message: %w", protowire.ParseError(l))
			}
			fn(num, typ, nil, n)
			b = b[l:]
		case protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return fmt.Errorf("bad message: %w", protowire.ParseError(l))
			}
			fn(num, typ, v, 0)
			b = b[l:]
		default:
			l := protowire.ConsumeFieldValue(num, typ, b)
			if l < 0 {
				return fmt.Errorf("bad message: %w", protowire.ParseError(l))
			}
			b = b[l:]
		}
	}
	return nil
}

// error is the call's end as an error; nil for status OK.
func (e *callEnd) error() error {
	switch {
	case e.err != nil:
		return e.err
	case e.status == codeOK:
		return nil
	}
	return &StatusError{Code: e.status, Message: e.message}
}

// callError names the socket; before the command started, an unreachable
// or busy service, or one of another pod, wraps [ErrNotStarted].
func (c *Conn) callError(what string, err error, beforeStart bool) error {
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Code {
		case codeUnavailable, codeFailedPrecondition, codeResourceExhausted:
			if beforeStart {
				return fmt.Errorf("exec socket %s: %s: %w: %s", c.path, what, ErrNotStarted, se.Message)
			}
		case codeCanceled:
			return fmt.Errorf("exec socket %s: %s: %w", c.path, what, context.Canceled)
		}
		return fmt.Errorf("exec socket %s: %s: %w", c.path, what, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("exec socket %s: %s: %w", c.path, what, err)
	}
	if beforeStart {
		return fmt.Errorf("exec socket %s: %s: %w: %w", c.path, what, ErrNotStarted, err)
	}
	return fmt.Errorf("exec socket %s: %s: %w", c.path, what, err)
}

// timeoutOf is what is left of ctx's deadline, or 0.
func timeoutOf(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Millisecond, time.Until(dl))
	}
	return 0
}
