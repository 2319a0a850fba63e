package execserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/pod/outpipe"
	"github.com/mountcontainers/mountcontainers/internal/pod/startgate"
	"github.com/mountcontainers/mountcontainers/pkg/execapi"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

// run is one Exec call.
type run struct {
	s       *Server
	stream  execapi.Exec_ExecServer
	start   *execapi.Start
	timeout time.Duration // the command's: the call's or the default
	log     *slog.Logger  // set once the command has started

	stdoutTruncated, stderrTruncated atomic.Bool
	stdoutEnded, stderrEnded         atomic.Bool // the pipe's end was read

	sendMu sync.Mutex
	closed bool          // no more sends: the Exit went out
	exit   *execapi.Exit // the Exit sent, for the observer
}

// send sends one message unless the call is over.
func (r *run) send(m *execapi.ExecResponse) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.closed {
		return errors.New("call finished")
	}
	return r.stream.Send(m)
}

// finish sends the Exit; nothing is sent after it.
func (r *run) finish(e *execapi.Exit) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.closed = true
	if err := r.stream.Send(&execapi.ExecResponse{Msg: &execapi.ExecResponse_Exit{Exit: e}}); err != nil {
		return err
	}
	r.exit = e
	return nil
}

// do runs the command of the Start to its end: it starts the command, sends
// its output as it comes, feeds it the client's standard input and signals,
// kills it on timeout or cancellation, and sends how it ended.
func (r *run) do() error {
	newCmd, exit := r.command()
	if exit != nil {
		return r.finish(exit)
	}
	var place func(pid int)
	if r.s.cfg.Gate != nil {
		place = r.s.cfg.Gate(r.start.GetArgv())
	}
	p, err := openPipes(r.start.GetHasStdin())
	if err != nil {
		return status.Errorf(codes.Internal, "pipe: %v", err)
	}
	cmd, err := startgate.Start(func() *exec.Cmd {
		cmd := newCmd()
		p.connect(cmd)
		return cmd
	}, place, r.s.log)
	// The child has its copies; ours of its ends must go, or EOF never comes.
	p.closeChildEnds()
	if err != nil {
		p.closeOurEnds()
		return r.finish(startError(err))
	}
	pid := cmd.Process.Pid
	r.log = r.s.log.With("argv0", cmd.Args[0], "pid", pid)
	r.reportStarted(pid)
	pumped := r.pumpOutput(p)

	k := &killer{pid: pid, log: r.log}
	ctx := r.stream.Context()
	defer r.armKills(ctx, k)()
	exited := make(chan struct{})
	go r.serveRequests(p.feedStdin(), k, exited)

	werr := startgate.Wait(cmd)
	k.markReaped()
	close(exited)
	// Input for a command that has exited is dropped; a daemon it left
	// behind may hold its standard input without ever reading it, and a
	// write blocked on that pipe would hold its goroutine and descriptor
	// for as long as the daemon lives.
	p.abandonStdin()
	abandoned := r.awaitOutput(p, pumped)
	// The timeout is the command's only if its kill ended it: the timer can
	// fire between the exit and the reaping.
	return r.report(ctx, exitOf(cmd.ProcessState, werr), abandoned, k.didTimeOut() && killedBy(cmd.ProcessState, syscall.SIGKILL))
}

// killedBy reports whether sig ended the process of ps.
func killedBy(ps *os.ProcessState, sig syscall.Signal) bool {
	if ps == nil {
		return false
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// command returns the function that makes the command of the Start (a Cmd
// starts only once, and startgate.Start may need two), or the Exit of one
// that cannot run: a working directory that cannot be entered (checked
// first, as `cd DIR && exec CMD` would) or an executable not found in the
// PATH of the environment the command gets.
func (r *run) command() (newCmd func() *exec.Cmd, exit *execapi.Exit) {
	st := r.start
	argv := st.GetArgv()
	env := os.Environ()
	if st.GetSetEnv() {
		env = append([]string{}, st.GetEnv()...) // empty, not nil: no environment
	}
	if dir := st.GetDir(); dir != "" {
		if err := checkDir(dir); err != nil {
			return nil, &execapi.Exit{Reason: execapi.Exit_CANNOT_RUN, Code: 126, Message: err.Error()}
		}
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return nil, &execapi.Exit{Reason: execapi.Exit_NOT_FOUND, Code: 127, Message: err.Error()}
	}
	return func() *exec.Cmd {
		return &exec.Cmd{Path: path, Args: argv, Env: env, Dir: st.GetDir(),
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	}, nil
}

// reportStarted tells the client the command runs. If the client is gone,
// the kill happens through the call's context.
func (r *run) reportStarted(pid int) {
	r.log.Debug("exec started", "args", len(r.start.GetArgv())-1)
	if err := r.send(&execapi.ExecResponse{Msg: &execapi.ExecResponse_Started{Started: &execapi.Started{Pid: int64(pid)}}}); err != nil {
		r.log.Debug("exec: cannot report start", "err", err)
	}
}

// pipes are the command's standard streams: the read ends of its output,
// the write end of its input (nil without standard input), and the
// command's ends until it has started.
type pipes struct {
	outR, outW, errR, errW *os.File
	inR, inW               *os.File
}

// openPipes makes the pipes of a command's output, and of its input if
// stdin is set (else the command gets /dev/null). On error nothing stays
// open.
func openPipes(stdin bool) (*pipes, error) {
	p := &pipes{}
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeChildEnds()
		p.closeOurEnds()
		return nil, err
	}
	if stdin {
		if p.inR, p.inW, err = os.Pipe(); err != nil {
			p.closeChildEnds()
			p.closeOurEnds()
			return nil, err
		}
	}
	return p, nil
}

// connect makes cmd's standard streams the command's ends of p. A command
// whose start was refused wrote nothing to them; the next one gets them.
func (p *pipes) connect(cmd *exec.Cmd) {
	if p.inR != nil {
		cmd.Stdin = p.inR
	}
	cmd.Stdout, cmd.Stderr = p.outW, p.errW
}

// closeChildEnds closes our copies of the command's ends.
func (p *pipes) closeChildEnds() {
	closeAll(p.outW, p.errW, p.inR)
}

// closeOurEnds closes the ends the server reads and writes.
func (p *pipes) closeOurEnds() {
	closeAll(p.outR, p.errR, p.inW)
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// pumpOutput sends the command's output as it comes and returns a channel
// closed once both pumps have ended: each at the end of its pipe, or, once
// awaitOutput stopped them, after sending what its pipe held then.
func (r *run) pumpOutput(p *pipes) <-chan struct{} {
	var pumps sync.WaitGroup
	pumps.Add(2)
	go r.pump(&pumps, p.outR, &r.stdoutTruncated, &r.stdoutEnded, func(b []byte) *execapi.ExecResponse {
		return &execapi.ExecResponse{Msg: &execapi.ExecResponse_Stdout{Stdout: b}}
	})
	go r.pump(&pumps, p.errR, &r.stderrTruncated, &r.stderrEnded, func(b []byte) *execapi.ExecResponse {
		return &execapi.ExecResponse{Msg: &execapi.ExecResponse_Stderr{Stderr: b}}
	})
	pumped := make(chan struct{})
	go func() {
		pumps.Wait()
		close(pumped)
	}()
	return pumped
}

// pump sends what f yields, wrapped, as [outpipe.Copy] reads it, and sets
// ended if that reached the pipe's end. At most MaxOutput bytes are sent;
// the rest is read and dropped, and truncated set.
func (r *run) pump(wg *sync.WaitGroup, f *os.File, truncated, ended *atomic.Bool, wrap func([]byte) *execapi.ExecResponse) {
	defer wg.Done()
	left := r.s.cfg.MaxOutput
	if outpipe.Copy(f, make([]byte, execclient.ChunkSize), func(b []byte) {
		if len(b) > left {
			b = b[:left]
			truncated.Store(true)
		}
		if len(b) > 0 {
			left -= len(b)
			// A failed send is not the end: keep draining, so that the
			// command never blocks on a full pipe while nobody listens.
			_ = r.send(wrap(append([]byte(nil), b...)))
		}
	}) {
		ended.Store(true)
	}
}

// killer kills the command's process group or signals its main process,
// never after the main process has been reaped (its PID may be reused).
type killer struct {
	pid int
	log *slog.Logger

	mu       sync.Mutex
	reaped   bool
	timedOut bool
}

// killGroup kills the command's process group with SIGKILL.
func (k *killer) killGroup(why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.reaped {
		return
	}
	if why == "timeout" {
		k.timedOut = true
	}
	k.log.Debug("exec: killing the process group", "why", why)
	_ = syscall.Kill(-k.pid, syscall.SIGKILL)
}

// signal sends sig to the command's main process.
func (k *killer) signal(sig syscall.Signal) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.reaped {
		_ = syscall.Kill(k.pid, sig)
	}
}

// markReaped records that the main process has been waited for.
func (k *killer) markReaped() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reaped = true
}

// didTimeOut reports whether the timeout killed the command.
func (k *killer) didTimeOut() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.timedOut
}

// armKills makes the end of ctx (the client cancelled or went away) and
// the command's timeout kill the command's process group, and returns the
// function that disarms them.
func (r *run) armKills(ctx context.Context, k *killer) (disarm func()) {
	stopCtx := context.AfterFunc(ctx, func() { k.killGroup("call cancelled") })
	t := time.AfterFunc(r.timeout, func() { k.killGroup("timeout") })
	return func() {
		t.Stop()
		stopCtx()
	}
}

// feedStdin returns the channel whose chunks a goroutine writes to the
// command's standard input, which it closes once the channel is closed;
// nil when the command has no standard input from the client. Once the
// command closed its input or exited, the rest is dropped.
func (p *pipes) feedStdin() chan []byte {
	if p.inW == nil {
		return nil
	}
	in := make(chan []byte, 8)
	go func(w *os.File) {
		defer w.Close()
		for b := range in {
			if _, err := w.Write(b); err != nil {
				for range in {
				}
				return
			}
		}
	}(p.inW)
	return in
}

// abandonStdin makes a write to the command's standard input that blocks
// (nobody reads it) fail now, and every later one at once; the feeding
// goroutine then drops the rest and closes the pipe.
func (p *pipes) abandonStdin() {
	if p.inW != nil {
		_ = p.inW.SetWriteDeadline(time.Unix(1, 0))
	}
}

// serveRequests handles the requests after the Start (standard input, its
// end, signals) until the call ends (Recv fails); it then closes stdin if
// that is still open. A chunk of input that finds the command exited is
// dropped.
func (r *run) serveRequests(stdin chan []byte, k *killer, exited <-chan struct{}) {
	defer func() {
		if stdin != nil {
			close(stdin)
		}
	}()
	for {
		m, err := r.stream.Recv()
		if err != nil {
			return
		}
		switch m := m.GetMsg().(type) {
		case *execapi.ExecRequest_Stdin:
			if stdin != nil && len(m.Stdin) > 0 {
				select {
				case stdin <- m.Stdin:
				case <-exited:
					return
				}
			}
		case *execapi.ExecRequest_CloseStdin:
			if stdin != nil {
				close(stdin)
				stdin = nil
			}
		case *execapi.ExecRequest_Signal:
			k.signal(syscall.Signal(m.Signal.GetNumber()))
		}
	}
}

// awaitOutput lets the pumps send the command's output to the end of the
// pipes, for at most the output grace: a daemon the command left behind may
// hold the pipes open forever. After the grace the pumps send what the
// pipes hold, without waiting for more; what the command wrote before it
// exited is never lost, however late the pumps run. It closes the read ends
// and reports whether output was abandoned (a pipe still had a writer).
func (r *run) awaitOutput(p *pipes, pumped <-chan struct{}) (abandoned bool) {
	outpipe.Await(pumped, r.s.cfg.OutputGrace, p.outR, p.errR)
	closeAll(p.outR, p.errR)
	abandoned = !r.stdoutEnded.Load() || !r.stderrEnded.Load()
	if abandoned {
		r.log.Debug("exec: output still held open after the command exited (a daemon it started?); abandoned")
	}
	return abandoned
}

// report sends the Exit: e, marked abandoned or timed out as it was.
func (r *run) report(ctx context.Context, e *execapi.Exit, abandoned, timedOut bool) error {
	e.OutputAbandoned = abandoned
	e.StdoutTruncated, e.StderrTruncated = r.stdoutTruncated.Load(), r.stderrTruncated.Load()
	if e.StdoutTruncated || e.StderrTruncated {
		r.log.Warn("exec: output over the limit, truncated", "limit", r.s.cfg.MaxOutput,
			"stdout", e.StdoutTruncated, "stderr", e.StderrTruncated)
	}
	if timedOut {
		e.Reason = execapi.Exit_TIMED_OUT
		e.Message = fmt.Sprintf("timed out after %s", r.timeout)
	}
	r.log.Debug("exec finished", "code", e.Code, "reason", e.Reason.String())
	if err := r.finish(e); err != nil {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		return err
	}
	return nil
}

// exitOf describes how the main process ended.
func exitOf(ps *os.ProcessState, werr error) *execapi.Exit {
	if ps == nil {
		return &execapi.Exit{Reason: execapi.Exit_CANNOT_RUN, Code: 126, Message: fmt.Sprint(werr)}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &execapi.Exit{Code: 128 + int32(ws.Signal()), Signal: int32(ws.Signal()), Message: ws.Signal().String()}
	}
	return &execapi.Exit{Code: int32(ps.ExitCode())}
}

// startError classifies a failed start: a missing or non-executable file is
// NOT_FOUND, as container runtimes report it; anything else (a directory
// that cannot be entered, a bad executable format) is CANNOT_RUN.
func startError(err error) *execapi.Exit {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && pe.Op == "chdir":
		return &execapi.Exit{Reason: execapi.Exit_CANNOT_RUN, Code: 126, Message: err.Error()}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, exec.ErrNotFound):
		return &execapi.Exit{Reason: execapi.Exit_NOT_FOUND, Code: 127, Message: err.Error()}
	}
	return &execapi.Exit{Reason: execapi.Exit_CANNOT_RUN, Code: 126, Message: err.Error()}
}

// checkDir reports why dir cannot be a working directory.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("chdir %s: %w", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("chdir %s: %w", dir, syscall.ENOTDIR)
	}
	if err := syscall.Access(dir, 1); err != nil {
		return fmt.Errorf("chdir %s: %w", dir, err)
	}
	return nil
}

// defaultPath is execvp's search path when the environment has no PATH.
const defaultPath = "/bin:/usr/bin"

// lookPath finds file as execvp(3) would with environment env: in env's
// PATH, as `env -i ... CMD` does in a container.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil // its errors come from the start
	}
	path, found := defaultPath, false
	for i := len(env) - 1; i >= 0 && !found; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			path, found = v, true
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
}
