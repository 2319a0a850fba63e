package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
)

// Cmd is a command of one plugin. Where it runs is decided when it starts
// (Run, Output, CombinedOutput or Start). On the host it is the host
// executor's command with the same settings. In a container it is one call
// to the mount pod's exec service when the decision says [ViaSocket] (a
// stream: standard input, output as it comes, Stop kills it), else one CRI
// ExecSync call (no standard input, output at the end); see "Commands
// through ExecSync" and "Exec fast path" in the package documentation.
type Cmd struct {
	e      *Exec
	ctx    context.Context
	name   string
	args   []string
	dir    string
	env    []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	outPipe, errPipe *lazyPipe

	mu       sync.Mutex
	started  bool
	waited   bool
	stopped  bool
	observed bool      // the observer was told
	began    time.Time // when the decision was asked for
	decision Decision
	host     utilexec.Cmd
	cancel   context.CancelFunc
	done     chan struct{}
	res      result
}

var _ utilexec.Cmd = (*Cmd)(nil)

type result struct {
	stdout, stderr []byte
	err            error
}

// dirScript enters $1 and executes the rest of the arguments.
const dirScript = `cd -- "$1" || exit 126; shift; exec "$@"`

// SetDir sets the working directory. In a container the command is wrapped
// as /bin/sh -c 'cd -- "$1" || exit 126; shift; exec "$@"' sh DIR CMD...;
// a directory that cannot be entered exits 126 with the shell's message on
// stderr.
func (c *Cmd) SetDir(dir string) { c.dir = dir }

// SetStdin sets standard input. Through the exec socket it is streamed to
// the command. Through ExecSync there is none: a reader that may hold data
// makes the command fail with [ErrStdinUnsupported]; nil and empty buffers
// are accepted.
func (c *Cmd) SetStdin(in io.Reader) { c.stdin = in }

// SetStdout sets where standard output goes. Through ExecSync it is
// written once the command has finished; through the exec socket as it
// comes (for Start and Run).
func (c *Cmd) SetStdout(out io.Writer) { c.stdout = out }

// SetStderr sets where standard error goes. Through ExecSync it is
// written once the command has finished; through the exec socket as it
// comes (for Start and Run).
func (c *Cmd) SetStderr(out io.Writer) { c.stderr = out }

// SetEnv sets the whole environment, as os/exec.Cmd.Env does. In a
// container the command is wrapped as env -i -- VAR=VALUE... CMD..., so the
// container's own environment (its PATH included) is replaced too; every
// entry must contain "=".
func (c *Cmd) SetEnv(env []string) { c.env = append([]string(nil), env...) }

// StdoutPipe returns a reader of standard output. Through ExecSync it
// yields the output once the command has finished; through the exec socket
// as it comes.
func (c *Cmd) StdoutPipe() (io.ReadCloser, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stdout != nil:
		return nil, errors.New("exec: Stdout already set")
	case c.started:
		return nil, errors.New("exec: StdoutPipe after process started")
	case c.outPipe != nil:
		return nil, errors.New("exec: StdoutPipe already called")
	}
	c.outPipe = newLazyPipe()
	return c.outPipe, nil
}

// StderrPipe returns a reader of standard error. Through ExecSync it
// yields the output once the command has finished; through the exec socket
// as it comes.
func (c *Cmd) StderrPipe() (io.ReadCloser, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.stderr != nil:
		return nil, errors.New("exec: Stderr already set")
	case c.started:
		return nil, errors.New("exec: StderrPipe after process started")
	case c.errPipe != nil:
		return nil, errors.New("exec: StderrPipe already called")
	}
	c.errPipe = newLazyPipe()
	return c.errPipe, nil
}

// Decision returns where the command was placed; ok is false before it
// started or when the decision failed.
func (c *Cmd) Decision() (d Decision, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decision, c.decision.Reason != ""
}

// Run runs the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns its standard output.
func (c *Cmd) Output() ([]byte, error) {
	if c.stdout != nil {
		return nil, errors.New("exec: Stdout already set")
	}
	d, h, err := c.begin()
	if err != nil {
		return nil, err
	}
	if h != nil {
		out, err := h.Output()
		c.observe(err)
		return out, err
	}
	res := c.runContainer(d)
	c.observe(res.err)
	if c.stderr != nil {
		if _, werr := c.stderr.Write(res.stderr); werr != nil && res.err == nil {
			res.err = werr
		}
	}
	return res.stdout, res.err
}

// CombinedOutput runs the command and returns its standard output and
// error. In a container the runtime returns them apart, so the result is
// all of stdout followed by all of stderr, not their interleaving.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	if c.stdout != nil {
		return nil, errors.New("exec: Stdout already set")
	}
	if c.stderr != nil {
		return nil, errors.New("exec: Stderr already set")
	}
	d, h, err := c.begin()
	if err != nil {
		return nil, err
	}
	if h != nil {
		out, err := h.CombinedOutput()
		c.observe(err)
		return out, err
	}
	res := c.runContainer(d)
	c.observe(res.err)
	return combine(res.stdout, res.stderr), res.err
}

// Start starts the command. Through ExecSync the call runs in a goroutine;
// through the exec socket Start returns once the command runs. Wait returns
// the result.
func (c *Cmd) Start() error {
	d, h, err := c.begin()
	if err != nil {
		c.failPipes(err)
		return err
	}
	if d.Via == ViaSocket {
		err := c.startStreaming(d)
		if !errors.Is(err, errSocketGone) {
			return err
		}
		// Nothing started: place the command afresh, once.
		c.e.r.forget(c.e.plugin, d.ContainerID)
		if d, err = c.e.r.decide(c.ctx, c.e.plugin, false); err != nil {
			c.failPipes(err)
			c.observe(err)
			return err
		}
		c.setDecision(d)
		if d.Via == ViaSocket {
			if err := c.startStreaming(d); err != nil {
				c.failPipes(err)
				c.observe(err)
				return err
			}
			return nil
		}
		if d.OnHost() {
			h = c.hostCmd(c.stdout, c.stderr)
		}
	}
	if h != nil {
		if c.outPipe != nil {
			rc, err := h.StdoutPipe()
			c.outPipe.set(rc, err)
			if err != nil {
				c.failPipes(err)
				return err
			}
		}
		if c.errPipe != nil {
			rc, err := h.StderrPipe()
			c.errPipe.set(rc, err)
			if err != nil {
				c.failPipes(err)
				return err
			}
		}
		if err := h.Start(); err != nil {
			c.failPipes(err)
			c.observe(err)
			return err
		}
		return nil
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.done = done
	c.mu.Unlock()
	go func() {
		defer close(done)
		res := c.runContainer(d)
		for _, o := range []struct {
			w    io.Writer
			p    *lazyPipe
			data []byte
		}{{c.stdout, c.outPipe, res.stdout}, {c.stderr, c.errPipe, res.stderr}} {
			if o.p != nil {
				o.p.set(io.NopCloser(bytes.NewReader(o.data)), nil)
			}
			if o.w != nil {
				if _, werr := o.w.Write(o.data); werr != nil && res.err == nil {
					res.err = werr
				}
			}
		}
		c.mu.Lock()
		c.res = res
		c.mu.Unlock()
		c.observe(res.err)
	}()
	return nil
}

// Wait waits for a started command and returns its error.
func (c *Cmd) Wait() error {
	c.mu.Lock()
	started, waited, h, done := c.started, c.waited, c.host, c.done
	c.waited = true
	c.mu.Unlock()
	switch {
	case !started:
		return errors.New("exec: not started")
	case waited:
		return errors.New("exec: Wait was already called")
	case h != nil:
		err := h.Wait()
		c.observe(err)
		return err
	case done == nil:
		return errors.New("exec: not started")
	}
	<-done
	c.mu.Lock()
	err := c.res.err
	c.mu.Unlock()
	c.observe(err)
	return err
}

// Stop stops a started command. On the host it signals the process.
// Through the exec socket it cancels the call, and the service kills the
// command's process group. Through ExecSync it cancels the call: the caller
// gets its answer at once, but the process in the container goes on until
// it exits or the runtime's timeout kills it; the CRI has no call to kill
// an exec.
func (c *Cmd) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return
	}
	c.stopped = true
	if c.cancel != nil {
		c.cancel()
	}
	if c.host != nil {
		c.host.Stop()
	}
}

// begin marks the command started and decides where it runs; on the host
// it returns the host command with the settings applied.
func (c *Cmd) begin() (Decision, utilexec.Cmd, error) {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return Decision{}, nil, errors.New("exec: already started")
	}
	c.started = true
	c.mu.Unlock()
	if c.name == "" {
		return Decision{}, nil, errors.New("exec: no command")
	}
	c.mu.Lock()
	c.began = time.Now()
	c.mu.Unlock()
	d, err := c.e.r.decide(c.ctx, c.e.plugin, true)
	if err != nil {
		c.observe(err)
		return d, nil, err
	}
	c.setDecision(d)
	if !d.OnHost() {
		return d, nil, nil
	}
	return d, c.hostCmd(c.stdout, c.stderr), nil
}

func (c *Cmd) setDecision(d Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decision = d
}

// hostCmd builds the host command with the same settings and records it
// for Stop.
func (c *Cmd) hostCmd(stdout, stderr io.Writer) utilexec.Cmd {
	h := c.e.r.host.CommandContext(c.ctx, c.name, c.args...)
	if c.dir != "" {
		h.SetDir(c.dir)
	}
	if c.env != nil {
		h.SetEnv(c.env)
	}
	if c.stdin != nil {
		h.SetStdin(c.stdin)
	}
	if stdout != nil {
		h.SetStdout(stdout)
	}
	if stderr != nil {
		h.SetStderr(stderr)
	}
	c.mu.Lock()
	c.host = h
	c.mu.Unlock()
	return h
}

// argv returns the command line for ExecSync, wrapped for SetEnv and
// SetDir, and whether it was wrapped.
func (c *Cmd) argv() ([]string, bool, error) {
	argv := append([]string{c.name}, c.args...)
	wrapped := false
	if c.env != nil {
		for _, kv := range c.env {
			if i := strings.IndexByte(kv, '='); i <= 0 {
				return nil, false, fmt.Errorf("exec %s: environment entry %q is not NAME=VALUE", c.name, kv)
			}
		}
		argv = append(append([]string{"env", "-i", "--"}, c.env...), argv...)
		wrapped = true
	}
	if c.dir != "" {
		argv = append([]string{"/bin/sh", "-c", dirScript, "sh", c.dir}, argv...)
		wrapped = true
	}
	return argv, wrapped, nil
}

// timeout returns how long the command may run in d's container: the
// context's deadline, else the resolver's timeout.
func (c *Cmd) timeout(d Decision) (time.Duration, error) {
	timeout := c.e.r.timeout
	if dl, ok := c.ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return 0, fmt.Errorf("exec %s in %s of plugin %s: %w before it started: %w", c.name, d.Where(), d.Plugin, ErrTimeout, context.DeadlineExceeded)
		}
	}
	return timeout, nil
}

// runContainer runs the command in d's container. If the container is gone
// (or its exec socket unusable) before the command started, the decision
// is taken again once.
func (c *Cmd) runContainer(d Decision) result {
	for attempt := 0; ; attempt++ {
		var stdout, stderr []byte
		var err error
		wrapped := false
		if d.Via == ViaSocket {
			call, cerr := c.socketCall(d)
			if cerr != nil {
				return result{err: cerr}
			}
			stdout, stderr, err = c.e.r.runSocket(c.ctx, d, call)
		} else {
			var argv []string
			argv, wrapped, err = c.argv()
			if err != nil {
				return result{err: err}
			}
			if !stdinEmpty(c.stdin) {
				return result{err: fmt.Errorf("exec %s in %s of plugin %s: %w", c.name, d.Where(), d.Plugin, ErrStdinUnsupported)}
			}
			timeout, terr := c.timeout(d)
			if terr != nil {
				return result{err: terr}
			}
			stdout, stderr, err = c.e.r.execSync(c.ctx, d, argv, timeout, c.publishCancel)
		}
		// A container that stopped, an exec socket that cannot be used,
		// or (for callers that accept the host when the runtime is down) a
		// cached decision the runtime cannot confirm, calls for a fresh
		// decision.
		if attempt == 0 && (errors.Is(err, errGone) || errors.Is(err, errSocketGone) || d.Cached && c.e.r.fallback && cri.IsUnavailable(err)) {
			c.e.r.forget(c.e.plugin, d.ContainerID)
			nd, rerr := c.e.r.decide(c.ctx, c.e.plugin, false)
			if rerr != nil {
				return result{err: rerr}
			}
			c.setDecision(nd)
			if nd.OnHost() {
				var o, e bytes.Buffer
				err := c.hostCmd(&o, &e).Run()
				return result{o.Bytes(), e.Bytes(), err}
			}
			if nd.ContainerID != d.ContainerID || nd.Via != d.Via {
				d = nd
				continue
			}
		}
		var exit utilexec.CodeExitError
		if wrapped && errors.As(err, &exit) && exit.Code == 127 {
			// env and sh exit 127 when the command is not found.
			err = utilexec.ErrExecutableNotFound
		}
		return result{stdout, stderr, err}
	}
}

// publishCancel records the ExecSync call's cancel function for Stop.
func (c *Cmd) publishCancel(cancel context.CancelFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancel = cancel
	if c.stopped {
		cancel()
	}
}

// failPipes makes pipes that will never be fed return err.
func (c *Cmd) failPipes(err error) {
	for _, p := range []*lazyPipe{c.outPipe, c.errPipe} {
		if p != nil {
			p.set(nil, err)
		}
	}
}

// lazyPipe is a reader handed out before the command starts and connected
// to its output once there is one.
type lazyPipe struct {
	once  sync.Once
	ready chan struct{}
	rc    io.ReadCloser
	err   error
}

func newLazyPipe() *lazyPipe { return &lazyPipe{ready: make(chan struct{})} }

func (p *lazyPipe) set(rc io.ReadCloser, err error) {
	p.once.Do(func() {
		p.rc, p.err = rc, err
		close(p.ready)
	})
}

// Read blocks until the pipe is connected.
func (p *lazyPipe) Read(b []byte) (int, error) {
	<-p.ready
	if p.err != nil {
		return 0, p.err
	}
	return p.rc.Read(b)
}

// Close closes the connected reader, or makes later reads fail.
func (p *lazyPipe) Close() error {
	p.set(nil, os.ErrClosed)
	if p.rc != nil {
		return p.rc.Close()
	}
	return nil
}
