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

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/boundary/execsocket"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// ExecMode chooses how commands reach a live mount container.
type ExecMode = boundary.ExecMode

// The exec modes.
const (
	// ModeAuto uses the registration's exec socket when it answers for the
	// registered pod and container, and CRI ExecSync otherwise.
	ModeAuto = boundary.ModeAuto
	// ModeCRI always uses CRI ExecSync.
	ModeCRI = boundary.ModeCRI
	// ModeSocket requires the exec socket for a live registration: a
	// decision that cannot use it is an error wrapping
	// [ErrSocketUnavailable] instead of falling back to ExecSync.
	ModeSocket = boundary.ModeSocket
)

// ParseExecMode parses "auto", "cri" or "socket"; empty means auto.
func ParseExecMode(s string) (ExecMode, error) { return boundary.ParseExecMode(s) }

// Via is how commands reach a live container.
type Via = boundary.Via

// The ways to a container.
const (
	// ViaSocket: the mount pod's exec service (package execclient).
	ViaSocket = boundary.ViaSocket
	// ViaExecSync: CRI ExecSync.
	ViaExecSync = boundary.ViaExecSync
)

// DefaultSocketTimeout bounds the Identity call that checks an exec socket.
// A socket nobody serves refuses the connection at once; the bound is for a
// server that is slow to answer, and was chosen on a node under load
// (BENCHMARKS.md, "A node under load"). kubelet-exec-shim proves a socket
// live within the same bound.
const DefaultSocketTimeout = execsocket.ProbeTimeout

// ErrSocketUnavailable is wrapped by the error of a decision in
// [ModeSocket] when the registered container is running but its exec socket
// cannot be used.
var ErrSocketUnavailable = errors.New("exec socket unavailable")

// ErrOutputLimit is wrapped by the error of a command through the exec
// socket that wrote more than execclient.MaxOutput (16 MiB, as CRI
// ExecSync) to its standard output or error: the caller got the first
// 16 MiB of that stream. (Through ExecSync, a response over the same limit
// is an error wrapping cri.ErrResponseTooLarge.) A command that also exited
// non-zero gets its utilexec.CodeExitError instead, which names the
// truncation.
var ErrOutputLimit = errors.New("output over the 16 MiB limit")

// errSocketGone marks a command that did not start because the exec socket
// could not be used (gone, refusing, or serving another pod): it may be
// placed afresh.
var errSocketGone = errors.New("exec socket unusable")

// Reasons of a Via.
const (
	viaSocketOK     = "exec socket answers for the registered pod and container"
	viaModeCRI      = "exec mode cri"
	viaNoSocket     = execsocket.NoSocket
	viaSocketPrefix = "exec socket not used: "
)

// socketProbe is what the registration's exec socket said when asked
// before a decision.
type socketProbe struct {
	path string // the checked socket path; "" when it is not usable
	why  string // why the socket cannot be used; "" when it answers for the registration

	// proof is what the socket proved of the registered container, once
	// it answered for the registration.
	proof execsocket.Proof
}

// proved reports whether the probe proves the registered container is
// running (see execsocket.Prove).
func (p socketProbe) proved() bool { return p.why == "" && p.proof.Proved() }

// probeSocket asks reg's exec socket whom it serves, and the kernel which
// container serves it.
func (r *Resolver) probeSocket(ctx context.Context, reg registration.Registration) socketProbe {
	if reg.ExecSocket == "" {
		return socketProbe{why: viaNoSocket}
	}
	path, err := execclient.CheckSocket(r.dir, reg.ExecSocket)
	if err != nil {
		return socketProbe{why: viaSocketPrefix + err.Error()}
	}
	p := socketProbe{path: path}
	c, release, err := r.socketClient(path)
	if err != nil {
		p.why = viaSocketPrefix + err.Error()
		return p
	}
	defer release()
	ictx, cancel := context.WithTimeout(ctx, r.socketTimeout)
	defer cancel()
	p.proof = execsocket.Prove(ictx, proofConn{c}, execsocket.Identity{
		PodNamespace: reg.PodNamespace, PodName: reg.PodName, PodUID: reg.PodUID, ContainerName: reg.ContainerName,
	}, r.procRoot)
	if p.proof.Refused != nil {
		p.why = viaSocketPrefix + p.proof.Refused.Error()
	}
	return p
}

// proofConn is an exec-socket client as execsocket.Prove asks it.
type proofConn struct{ c *execclient.Client }

func (p proofConn) Identity(ctx context.Context) (execsocket.Identity, error) {
	id, err := p.c.Identity(ctx)
	if err != nil {
		return execsocket.Identity{}, err
	}
	return execsocket.Identity{
		PodNamespace: id.GetPodNamespace(), PodName: id.GetPodName(), PodUID: id.GetPodUid(),
		ContainerName: id.GetContainerName(), Version: id.GetVersion(), PID: id.GetPid(),
	}, nil
}

func (p proofConn) PeerPID() int { return p.c.PeerPID() }

// chooseVia decides how to reach d's running container, found through the
// runtime, by what the exec socket said before (p).
func (r *Resolver) chooseVia(d *Decision, reg registration.Registration, p socketProbe) error {
	if r.mode == ModeCRI {
		d.Via, d.ViaReason = ViaExecSync, viaModeCRI
		return nil
	}
	d.Socket = p.path
	why := p.why
	if why == "" {
		if w := r.checkPeer(p.proof.PID, d.ContainerID); w != "" {
			why = viaSocketPrefix + w
		}
	}
	if why == "" {
		d.Via, d.ViaReason = ViaSocket, viaSocketOK
		return nil
	}
	if r.mode == ModeSocket {
		return fmt.Errorf("plugin %s is registered to pod %s, which is running, but exec mode is socket: %w: %s",
			d.Plugin, reg, ErrSocketUnavailable, why)
	}
	d.Via, d.ViaReason = ViaExecSync, why
	return nil
}

// maxSocketClients is how many exec-socket clients a resolver keeps
// beyond those in use. Each mount pod has its own socket (named after its
// pod UID), so a long-lived resolver meets a new one at every mount pod
// replacement.
const maxSocketClients = 8

// socketEntry is a kept client of one exec socket.
type socketEntry struct {
	c        *execclient.Client
	users    int // calls using it now
	lastUsed time.Time
}

// socketClient returns the shared client of the socket at path and the
// function to call once the caller is done with it (the client itself
// stays open for later calls). Dialling a socket not seen before prunes
// the clients nobody uses whose socket is gone (a mount pod that was
// replaced), and then the least recently used beyond [maxSocketClients].
func (r *Resolver) socketClient(path string) (*execclient.Client, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, errors.New("resolver closed")
	}
	e, ok := r.sockets[path]
	if !ok {
		c, err := execclient.Dial(path)
		if err != nil {
			return nil, nil, err
		}
		e = &socketEntry{c: c}
		r.sockets[path] = e
		r.pruneSocketsLocked(path)
	}
	e.users++
	e.lastUsed = time.Now()
	var once sync.Once
	return e.c, func() {
		once.Do(func() {
			r.mu.Lock()
			e.users--
			r.mu.Unlock()
		})
	}, nil
}

// pruneSocketsLocked closes and forgets the clients no call uses whose
// socket is gone, then the least recently used idle ones beyond
// maxSocketClients; never keep's. r.mu is held.
func (r *Resolver) pruneSocketsLocked(keep string) {
	for path, e := range r.sockets {
		if path == keep || e.users > 0 {
			continue
		}
		if _, err := os.Lstat(path); err != nil {
			e.c.Close()
			delete(r.sockets, path)
		}
	}
	for len(r.sockets) > maxSocketClients {
		oldest := ""
		for path, e := range r.sockets {
			if path != keep && e.users == 0 && (oldest == "" || e.lastUsed.Before(r.sockets[oldest].lastUsed)) {
				oldest = path
			}
		}
		if oldest == "" {
			return // all in use
		}
		r.sockets[oldest].c.Close()
		delete(r.sockets, oldest)
	}
}

// socketCall is one command through an exec socket.
type socketCall struct {
	argv           []string
	env            []string
	dir            string
	stdin          io.Reader
	stdout, stderr io.Writer
	timeout        time.Duration
	publish        func(context.CancelFunc)
}

// startSocket starts call in d's container through the exec socket. An
// error wrapping errSocketGone means nothing started. A command the
// service could not start is a finished process: a missing executable is
// utilexec.ErrExecutableNotFound, any other failure exit status 126 with
// the reason on stderr (as with the shell wrapper of the ExecSync path).
func (r *Resolver) startSocket(ctx context.Context, d Decision, call socketCall) (*execclient.Process, error) {
	c, release, err := r.socketClient(d.Socket)
	if err != nil {
		return nil, fmt.Errorf("exec %s in %s of plugin %s: %w: %w", call.argv[0], d.Where(), d.Plugin, errSocketGone, err)
	}
	// As with ExecSync, the service enforces the timeout and reports it
	// best; the call's own deadline is a little later, and only the
	// caller's cancellation (not its deadline) ends the call early.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), call.timeout+grace(call.timeout))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			cancel()
		}
	})
	if call.publish != nil {
		call.publish(cancel)
	}
	p, err := c.Start(callCtx, execclient.Command{
		Plugin: d.Plugin, Argv: call.argv, Env: call.env, Dir: call.dir, Timeout: call.timeout,
		ExpectPodUID: d.Registration.PodUID, ExpectContainer: d.Registration.ContainerName,
		Stdin: call.stdin, Stdout: call.stdout, Stderr: call.stderr,
	})
	if err != nil {
		stop()
		cancel()
		release()
		var se *execclient.StartError
		switch {
		case errors.As(err, &se) && se.NotFound:
			return nil, utilexec.ErrExecutableNotFound
		case errors.As(err, &se):
			if call.stderr != nil {
				fmt.Fprintf(call.stderr, "%s\n", se.Message)
			}
			return nil, utilexec.CodeExitError{Err: fmt.Errorf("exit status 126 (in %s of plugin %s: %s)", d.Where(), d.Plugin, se.Message), Code: 126}
		case errors.Is(err, execclient.ErrNotStarted):
			return nil, fmt.Errorf("exec %s in %s of plugin %s: %w: %w", call.argv[0], d.Where(), d.Plugin, errSocketGone, err)
		}
		return nil, socketError(call.argv[0], d, err)
	}
	go func() {
		<-p.Done()
		stop()
		cancel()
		release()
	}()
	return p, nil
}

// socketResult turns how a socket command ended into the error callers of
// utilexec expect.
func socketResult(name string, d Decision, timeout time.Duration, res execclient.Result, err error) error {
	switch {
	case err != nil:
		return socketError(name, d, err)
	case res.TimedOut:
		return fmt.Errorf("exec %s in %s of plugin %s: %w after %s: %w", name, d.Where(), d.Plugin, ErrTimeout, timeout, context.DeadlineExceeded)
	case res.Code != 0:
		return utilexec.CodeExitError{
			Err:  fmt.Errorf("exit status %d (in %s of plugin %s)%s", res.Code, d.Where(), d.Plugin, truncation(res)),
			Code: res.Code,
		}
	case res.StdoutTruncated || res.StderrTruncated:
		return fmt.Errorf("exec %s in %s of plugin %s via exec socket: %w:%s", name, d.Where(), d.Plugin, ErrOutputLimit, truncation(res))
	}
	return nil
}

// truncation says which output streams were truncated, or "".
func truncation(res execclient.Result) string {
	var s string
	if res.StdoutTruncated {
		s += fmt.Sprintf(" stdout truncated to its first %d bytes", execclient.MaxOutput)
	}
	if res.StderrTruncated {
		if s != "" {
			s += ","
		}
		s += fmt.Sprintf(" stderr truncated to its first %d bytes", execclient.MaxOutput)
	}
	return s
}

func socketError(name string, d Decision, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("exec %s in %s of plugin %s: %w", name, d.Where(), d.Plugin, context.Canceled)
	}
	return fmt.Errorf("exec %s in %s of plugin %s via exec socket: %w", name, d.Where(), d.Plugin, err)
}

// runSocket runs call to the end and returns its output.
func (r *Resolver) runSocket(ctx context.Context, d Decision, call socketCall) (stdout, stderr []byte, err error) {
	var o, e bytes.Buffer
	call.stdout, call.stderr = &o, &e
	p, err := r.startSocket(ctx, d, call)
	if err != nil {
		return o.Bytes(), e.Bytes(), err
	}
	res, err := p.Wait()
	return o.Bytes(), e.Bytes(), socketResult(call.argv[0], d, call.timeout, res, err)
}

// startStreaming starts c through d's exec socket with its output streamed
// to its writers and pipes as it comes; Wait returns the result. An error
// wrapping errSocketGone means nothing started and nothing was consumed.
func (c *Cmd) startStreaming(d Decision) error {
	call, err := c.socketCall(d)
	if err != nil {
		c.failPipes(err)
		return err
	}
	var outR, errR *io.PipeReader
	var outW, errW *io.PipeWriter
	call.stdout, call.stderr = c.stdout, c.stderr
	if c.outPipe != nil {
		outR, outW = io.Pipe()
		call.stdout = outW
	}
	if c.errPipe != nil {
		errR, errW = io.Pipe()
		call.stderr = errW
	}
	p, err := c.e.r.startSocket(c.ctx, d, call)
	if errors.Is(err, errSocketGone) {
		return err
	}
	if outR != nil {
		c.outPipe.set(outR, nil)
	}
	if errR != nil {
		c.errPipe.set(errR, nil)
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.done = done
	c.mu.Unlock()
	go func() {
		defer close(done)
		if err == nil {
			res, werr := p.Wait()
			err = socketResult(call.argv[0], d, call.timeout, res, werr)
		}
		for _, w := range []*io.PipeWriter{outW, errW} {
			if w != nil {
				w.Close()
			}
		}
		c.mu.Lock()
		c.res = result{err: err}
		c.mu.Unlock()
		c.observe(err)
	}()
	return nil
}

// socketCall describes c for the exec socket: the service takes the
// environment and directory itself, and standard input.
func (c *Cmd) socketCall(d Decision) (socketCall, error) {
	for _, kv := range c.env {
		if i := strings.IndexByte(kv, '='); i <= 0 {
			return socketCall{}, fmt.Errorf("exec %s: environment entry %q is not NAME=VALUE", c.name, kv)
		}
	}
	timeout, err := c.timeout(d)
	if err != nil {
		return socketCall{}, err
	}
	return socketCall{
		argv: append([]string{c.name}, c.args...), env: c.env, dir: c.dir,
		stdin: c.stdin, timeout: timeout, publish: c.publishCancel,
	}, nil
}
