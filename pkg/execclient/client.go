package execclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/pkg/execapi"
)

// DialTimeout bounds connecting to the socket.
const DialTimeout = 2 * time.Second

// ChunkSize is the largest payload of one message of an Exec call, on
// either side: a chunk of standard input from the client, of output from
// the service.
const ChunkSize = 32 << 10

// MaxOutput is the most of each output stream, standard output and standard
// error, that a call carries: 16 MiB, as CRI ExecSync. The service sends no
// more and says so in the Result; the client keeps no more whatever the
// service sends.
const MaxOutput = 16 << 20

// ErrNotStarted is wrapped by the error of [Client.Start] when the command
// certainly did not start because the service could not be used: the
// socket is gone or refuses us, or the service runs in another pod than
// expected. The caller may place the command elsewhere.
var ErrNotStarted = errors.New("exec service unusable, command not started")

// Client is a connection to an exec service. It is safe for concurrent use
// and meant to be kept; Close it when done.
type Client struct {
	path    string
	cc      *grpc.ClientConn
	api     execapi.ExecClient
	peerPID atomic.Int32
}

// Dial returns a client of the service at path (see [CheckSocket] for the
// checks to make first). It does no I/O: each connection is made on need,
// and refused unless the serving process runs as root or the caller's
// effective user.
func Dial(path string) (*Client, error) {
	client := &Client{path: path}
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: DialTimeout}
		c, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, err
		}
		uid, pid, err := PeerCredentials(c)
		if err == nil && !TrustedUID(uid) {
			err = fmt.Errorf("%w: served by pid %d as uid %d, not root", ErrUntrustedSocket, pid, uid)
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("exec socket %s: %w", path, err)
		}
		client.peerPID.Store(pid)
		return c, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer),
		grpc.WithAuthority("localhost"),
	)
	if err != nil {
		return nil, fmt.Errorf("exec socket %s: %w", path, err)
	}
	client.cc, client.api = cc, execapi.NewExecClient(cc)
	return client, nil
}

// PeerPID returns the process ID of the process serving the connection
// made last, as SO_PEERCRED gave it: in the caller's PID namespace, 0 when
// that process is not visible there or no connection was made yet.
func (c *Client) PeerPID() int { return int(c.peerPID.Load()) }

// Path returns the socket's path.
func (c *Client) Path() string { return c.path }

// Close closes the connection; calls in flight fail.
func (c *Client) Close() error { return c.cc.Close() }

// Identity asks the service whom it runs for.
func (c *Client) Identity(ctx context.Context) (*execapi.IdentityResponse, error) {
	id, err := c.api.Identity(ctx, &execapi.IdentityRequest{})
	if err != nil {
		return nil, fmt.Errorf("exec socket %s: identity: %w", c.path, err)
	}
	return id, nil
}

// Command is what [Client.Start] runs.
type Command struct {
	// Argv is the command line; Argv[0] is looked up in the PATH of Env
	// (when set) or of the service.
	Argv []string
	// Env, when not nil, replaces the whole environment.
	Env []string
	// Dir is the working directory; empty for the service's.
	Dir string
	// Timeout kills the command's process group after this long; 0 means
	// the service's default (2 minutes in the mount pod). A timeout over
	// the service's maximum (an hour) is refused before anything runs.
	Timeout time.Duration
	// ExpectPodUID and ExpectContainer, when set, must be the service's or
	// nothing runs (and Start's error wraps [ErrNotStarted]).
	ExpectPodUID, ExpectContainer string
	// Plugin is the volume plugin the command runs for; the service uses
	// it in its metrics and logs only.
	Plugin string
	// Stdin, when not nil, is copied to the command's standard input, then
	// closed; nil gives it /dev/null.
	Stdin io.Reader
	// Stdout and Stderr receive the output as it comes; nil discards it.
	// They are written from one goroutine, in the order of arrival, so
	// they may be the same writer.
	Stdout, Stderr io.Writer
}

// StartError is the error of [Client.Start] for a command that the service
// could not start.
type StartError struct {
	// NotFound is true for a missing or non-executable file.
	NotFound bool
	// Message is the service's explanation.
	Message string
}

// Error returns the message.
func (e *StartError) Error() string { return e.Message }

// Result is how a command ended.
type Result struct {
	// Code is the exit status, or 128 + Signal.
	Code int
	// Signal is the signal that killed the main process, or 0.
	Signal syscall.Signal
	// TimedOut is true when the command's Timeout killed it.
	TimedOut bool
	// OutputAbandoned is true when something the command left behind kept
	// its output open after it exited.
	OutputAbandoned bool
	// StdoutTruncated and StderrTruncated are true when the command wrote
	// more than [MaxOutput] to that stream: the writer got the first
	// MaxOutput bytes.
	StdoutTruncated, StderrTruncated bool
}

// Process is a command started by [Client.Start].
type Process struct {
	pid       int
	stream    execapi.Exec_ExecClient
	cancel    context.CancelFunc
	sendMu    sync.Mutex
	done      chan struct{}
	res       Result
	err       error
	stdinDone chan struct{}
}

// Start starts cmd and returns once it runs. Its error is a *[StartError]
// when the service could not start the command, wraps [ErrNotStarted] when
// the service could not be used at all, and is otherwise a transport error
// after which it is unknown whether the command started. Cancelling ctx
// kills the command.
func (c *Client) Start(ctx context.Context, cmd Command) (*Process, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.api.Exec(ctx)
	if err != nil {
		cancel()
		return nil, c.callError(err, true)
	}
	start := &execapi.Start{
		Argv: cmd.Argv, Env: cmd.Env, SetEnv: cmd.Env != nil, Dir: cmd.Dir,
		ExpectPodUid: cmd.ExpectPodUID, ExpectContainerName: cmd.ExpectContainer, Plugin: cmd.Plugin,
		HasStdin: cmd.Stdin != nil,
	}
	if cmd.Timeout > 0 {
		start.TimeoutMs = max(1, cmd.Timeout.Milliseconds())
	}
	if err := stream.Send(&execapi.ExecRequest{Msg: &execapi.ExecRequest_Start{Start: start}}); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return nil, c.callError(err, true)
	}
	// io.EOF from Send means the server ended the call: Recv says why.
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, c.callError(err, true)
	}
	switch m := first.GetMsg().(type) {
	case *execapi.ExecResponse_Exit:
		cancel()
		return nil, &StartError{NotFound: m.Exit.GetReason() == execapi.Exit_NOT_FOUND, Message: m.Exit.GetMessage()}
	case *execapi.ExecResponse_Started:
		p := &Process{pid: int(m.Started.GetPid()), stream: stream, cancel: cancel, done: make(chan struct{})}
		if cmd.Stdin != nil {
			p.stdinDone = make(chan struct{})
			go p.pumpStdin(cmd.Stdin)
		}
		go p.receive(c, cmd.Stdout, cmd.Stderr)
		return p, nil
	}
	cancel()
	return nil, fmt.Errorf("exec socket %s: unexpected first answer %T", c.path, first.GetMsg())
}

// callError names the socket; before anything started, an unreachable
// or busy service, or one of another pod, is [ErrNotStarted].
func (c *Client) callError(err error, beforeStart bool) error {
	code := status.Code(err)
	if beforeStart && (code == codes.Unavailable || code == codes.FailedPrecondition || code == codes.ResourceExhausted) {
		return fmt.Errorf("exec socket %s: %w: %w", c.path, ErrNotStarted, err)
	}
	if code == codes.Canceled {
		return fmt.Errorf("exec socket %s: %w", c.path, context.Canceled)
	}
	return fmt.Errorf("exec socket %s: %w", c.path, err)
}

// Pid returns the command's process ID in the service's PID namespace.
func (p *Process) Pid() int { return p.pid }

// Signal sends sig to the command's main process.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.send(&execapi.ExecRequest{Msg: &execapi.ExecRequest_Signal{Signal: &execapi.Signal{Number: int32(sig)}}})
}

// Kill cancels the call: the service kills the command's process group.
// Wait then returns an error wrapping context.Canceled.
func (p *Process) Kill() { p.cancel() }

func (p *Process) send(m *execapi.ExecRequest) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	select {
	case <-p.done:
		return errors.New("exec: process already finished")
	default:
	}
	return p.stream.Send(m)
}

// pumpStdin copies in to the command, then closes its standard input. It
// stops at the first failed send (the call ended).
func (p *Process) pumpStdin(in io.Reader) {
	defer close(p.stdinDone)
	buf := make([]byte, ChunkSize)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if p.send(&execapi.ExecRequest{Msg: &execapi.ExecRequest_Stdin{Stdin: append([]byte(nil), buf[:n]...)}}) != nil {
				return
			}
		}
		if err != nil {
			_ = p.send(&execapi.ExecRequest{Msg: &execapi.ExecRequest_CloseStdin{CloseStdin: &execapi.CloseStdin{}}})
			return
		}
	}
}

// outputQueue is how many chunks of one stream may wait for a slow
// writer before the call stops reading: like a pipe's buffer, it keeps a
// caller that reads stdout and stderr one after the other from blocking
// the other stream.
const outputQueue = 64

// receive writes the output and records the end.
func (p *Process) receive(c *Client, stdout, stderr io.Writer) {
	outQ := newWriterQueue(stdout)
	errQ := outQ
	if !sameWriter(stdout, stderr) {
		errQ = newWriterQueue(stderr)
	}
	var res Result
	var err error
	outLeft, errLeft := MaxOutput, MaxOutput
	var outCut, errCut bool
	for {
		m, rerr := p.stream.Recv()
		if rerr != nil {
			if rerr == io.EOF {
				rerr = errors.New("the service ended the call without an exit status")
			}
			err = c.callError(rerr, false)
			break
		}
		if b := m.GetStdout(); len(b) > 0 {
			outQ.put(capped(b, &outLeft, &outCut))
			continue
		}
		if b := m.GetStderr(); len(b) > 0 {
			errQ.put(capped(b, &errLeft, &errCut))
			continue
		}
		if e := m.GetExit(); e != nil {
			res = Result{Code: int(e.GetCode()), Signal: syscall.Signal(e.GetSignal()),
				TimedOut: e.GetReason() == execapi.Exit_TIMED_OUT, OutputAbandoned: e.GetOutputAbandoned(),
				StdoutTruncated: e.GetStdoutTruncated() || outCut, StderrTruncated: e.GetStderrTruncated() || errCut}
			break
		}
	}
	werr := outQ.close()
	if errQ != outQ {
		werr = errors.Join(werr, errQ.close())
	}
	if err == nil && werr != nil {
		err = fmt.Errorf("exec: write output: %w", werr)
	}
	p.sendMu.Lock()
	p.res, p.err = res, err
	close(p.done)
	p.sendMu.Unlock()
	p.cancel()
}

// capped returns what of b fits in *left bytes, counting it off, and sets
// *cut when something did not fit.
func capped(b []byte, left *int, cut *bool) []byte {
	if len(b) > *left {
		b, *cut = b[:*left], true
	}
	*left -= len(b)
	return b
}

// sameWriter reports whether a and b are the same writer.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil { // uncomparable dynamic type
			same = false
		}
	}()
	return a == b
}

// writerQueue writes chunks to w in a goroutine of its own.
type writerQueue struct {
	w    io.Writer
	ch   chan []byte
	done chan struct{}
	err  error // the first failed write; later chunks are dropped
}

func newWriterQueue(w io.Writer) *writerQueue {
	q := &writerQueue{w: w, ch: make(chan []byte, outputQueue), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for b := range q.ch {
			if q.w != nil && q.err == nil {
				_, q.err = q.w.Write(b)
			}
		}
	}()
	return q
}

func (q *writerQueue) put(b []byte) {
	if len(b) > 0 {
		q.ch <- b
	}
}

// close waits for the queued chunks to be written.
func (q *writerQueue) close() error {
	close(q.ch)
	<-q.done
	return q.err
}

// stdinGrace is how long Wait lets the standard-input copy notice that the
// call ended; a reader blocked in Read (a terminal) is abandoned after it.
const stdinGrace = 100 * time.Millisecond

// Wait waits for the command to end. Its error is about the call (the
// service went away, a write of output failed, the context ended); the
// command's own exit status is in the Result.
func (p *Process) Wait() (Result, error) {
	<-p.done
	if p.stdinDone != nil {
		select {
		case <-p.stdinDone:
		case <-time.After(stdinGrace):
		}
	}
	return p.res, p.err
}

// Done is closed when the command has ended.
func (p *Process) Done() <-chan struct{} { return p.done }
