package execserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/pkg/execserver/api"
)

const (
	// DefaultOutputGrace is how long the server goes on reading a command's
	// output after its main process exited: longer only when something the
	// command left behind holds the pipes.
	DefaultOutputGrace = 200 * time.Millisecond

	// DefaultStopTimeout is how long [Server.Serve] lets running commands
	// finish once its context ends before it kills them.
	DefaultStopTimeout = 5 * time.Second

	// chunkSize is the largest output chunk of one message.
	chunkSize = 32 << 10
)

// Identity is who a server answers for: the registration's pod and
// container.
type Identity struct {
	PodNamespace, PodName, PodUID, ContainerName string
}

// Config configures a [Server].
type Config struct {
	// Identity is the pod and container the server runs in.
	Identity Identity
	// Version is the build version the Identity RPC reports.
	Version string
	// Logger receives the service's log; nil discards it.
	Logger *slog.Logger
	// OutputGrace: see [DefaultOutputGrace] (the default when zero).
	OutputGrace time.Duration
	// StopTimeout: see [DefaultStopTimeout] (the default when zero).
	StopTimeout time.Duration
}

// Server is the exec service. Create it with [NewServer].
type Server struct {
	api.UnimplementedExecServer
	cfg Config
	log *slog.Logger
}

var _ api.ExecServer = (*Server)(nil)

// NewServer returns a server for cfg.
func NewServer(cfg Config) *Server {
	if cfg.OutputGrace <= 0 {
		cfg.OutputGrace = DefaultOutputGrace
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log}
}

// Serve serves on l, accepting only trusted peers (see "Peers" in the
// package documentation), until ctx ends. It then lets running commands
// finish for StopTimeout, cancels those still running (which kills them),
// closes l (removing the socket) and returns nil; or it returns the error
// that stopped it serving.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	gs := grpc.NewServer()
	api.RegisterExecServer(gs, s)
	done := make(chan error, 1)
	go func() { done <- gs.Serve(peerListener{Listener: l, log: s.log}) }()
	select {
	case err := <-done:
		return fmt.Errorf("exec service: %w", err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(s.cfg.StopTimeout):
		s.log.Warn("exec service: commands still running at shutdown, killing them")
		gs.Stop()
		<-stopped
	}
	<-done
	return nil
}

// Identity answers who the server runs for.
func (s *Server) Identity(context.Context, *api.IdentityRequest) (*api.IdentityResponse, error) {
	id := s.cfg.Identity
	return &api.IdentityResponse{
		PodNamespace: id.PodNamespace, PodName: id.PodName, PodUid: id.PodUID, ContainerName: id.ContainerName,
		Version: s.cfg.Version, Pid: int64(os.Getpid()),
	}, nil
}

// Exec runs one command; see the service definition in exec.proto.
func (s *Server) Exec(stream api.Exec_ExecServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	switch {
	case start == nil:
		return status.Error(codes.InvalidArgument, "the first message must be a Start")
	case len(start.GetArgv()) == 0 || start.GetArgv()[0] == "":
		return status.Error(codes.InvalidArgument, "no command")
	case start.GetExpectPodUid() != "" && start.GetExpectPodUid() != s.cfg.Identity.PodUID,
		start.GetExpectContainerName() != "" && start.GetExpectContainerName() != s.cfg.Identity.ContainerName:
		return status.Errorf(codes.FailedPrecondition, "this exec service runs in pod UID %s container %s, not pod UID %s container %s",
			s.cfg.Identity.PodUID, s.cfg.Identity.ContainerName, start.GetExpectPodUid(), start.GetExpectContainerName())
	}
	r := &run{s: s, stream: stream, start: start}
	return r.do()
}

// run is one Exec call.
type run struct {
	s      *Server
	stream api.Exec_ExecServer
	start  *api.Start

	sendMu sync.Mutex
	closed bool // no more sends: the Exit went out
}

// send sends one message unless the call is over.
func (r *run) send(m *api.ExecResponse) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	if r.closed {
		return errors.New("call finished")
	}
	return r.stream.Send(m)
}

// finish sends the Exit; nothing is sent after it.
func (r *run) finish(e *api.Exit) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.closed = true
	return r.stream.Send(&api.ExecResponse{Msg: &api.ExecResponse_Exit{Exit: e}})
}

func (r *run) do() error {
	st := r.start
	argv := st.GetArgv()
	env := os.Environ()
	if st.GetSetEnv() {
		env = append([]string{}, st.GetEnv()...) // empty, not nil: no environment
	}
	// The directory first, as `cd DIR && exec CMD` would.
	if dir := st.GetDir(); dir != "" {
		if err := checkDir(dir); err != nil {
			return r.finish(&api.Exit{Reason: api.Exit_CANNOT_RUN, Code: 126, Message: err.Error()})
		}
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return r.finish(&api.Exit{Reason: api.Exit_NOT_FOUND, Code: 127, Message: err.Error()})
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: st.GetDir(),
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	outR, outW, err := os.Pipe()
	if err != nil {
		return status.Errorf(codes.Internal, "pipe: %v", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return status.Errorf(codes.Internal, "pipe: %v", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inR, inW *os.File
	if st.GetHasStdin() {
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return status.Errorf(codes.Internal, "pipe: %v", err)
		}
		cmd.Stdin = inR
	}
	err = cmd.Start()
	// The child has its copies; ours of its ends must go, or EOF never comes.
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return r.finish(startError(err))
	}
	pid := cmd.Process.Pid
	log := r.s.log.With("argv0", argv[0], "pid", pid)
	log.Debug("exec started", "args", len(argv)-1)
	if err := r.send(&api.ExecResponse{Msg: &api.ExecResponse_Started{Started: &api.Started{Pid: int64(pid)}}}); err != nil {
		// The client is gone: the kill below happens through ctx.
		log.Debug("exec: cannot report start", "err", err)
	}

	// Output pumps.
	var pumps sync.WaitGroup
	pump := func(f *os.File, wrap func([]byte) *api.ExecResponse) {
		defer pumps.Done()
		buf := make([]byte, chunkSize)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				if r.send(wrap(append([]byte(nil), buf[:n]...))) != nil {
					// Keep draining, so that the command never blocks on
					// a full pipe while nobody listens.
					continue
				}
			}
			if err != nil {
				return
			}
		}
	}
	pumps.Add(2)
	go pump(outR, func(b []byte) *api.ExecResponse { return &api.ExecResponse{Msg: &api.ExecResponse_Stdout{Stdout: b}} })
	go pump(errR, func(b []byte) *api.ExecResponse { return &api.ExecResponse{Msg: &api.ExecResponse_Stderr{Stderr: b}} })

	// Killing: by timeout, by the client's cancellation, never after the
	// main process has been reaped (its PID may be reused).
	var killMu sync.Mutex
	reaped, timedOut := false, false
	killGroup := func(why string) {
		killMu.Lock()
		defer killMu.Unlock()
		if reaped {
			return
		}
		if why == "timeout" {
			timedOut = true
		}
		log.Debug("exec: killing the process group", "why", why)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	signal := func(sig syscall.Signal) {
		killMu.Lock()
		defer killMu.Unlock()
		if !reaped {
			_ = syscall.Kill(pid, sig)
		}
	}
	ctx := r.stream.Context()
	stopCtx := context.AfterFunc(ctx, func() { killGroup("call cancelled") })
	defer stopCtx()
	if ms := st.GetTimeoutMs(); ms > 0 {
		t := time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { killGroup("timeout") })
		defer t.Stop()
	}

	// Requests after the Start: stdin, signals. The goroutine ends when the
	// call does (Recv fails).
	var stdin chan []byte
	if inW != nil {
		stdin = make(chan []byte, 8)
		go func(in <-chan []byte) {
			defer inW.Close()
			for b := range in {
				if _, err := inW.Write(b); err != nil {
					// The command closed its stdin or exited: drop the rest.
					for range in {
					}
					return
				}
			}
		}(stdin)
	}
	exited := make(chan struct{})
	go func() {
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
			case *api.ExecRequest_Stdin:
				if stdin != nil && len(m.Stdin) > 0 {
					select {
					case stdin <- m.Stdin:
					case <-exited:
						return
					}
				}
			case *api.ExecRequest_CloseStdin:
				if stdin != nil {
					close(stdin)
					stdin = nil
				}
			case *api.ExecRequest_Signal:
				signal(syscall.Signal(m.Signal.GetNumber()))
			}
		}
	}()

	werr := cmd.Wait()
	killMu.Lock()
	reaped = true
	killMu.Unlock()
	close(exited)
	// The output a command wrote before it exited is in the pipes; a daemon
	// it left behind may hold them open forever. Read for a short grace.
	pumped := make(chan struct{})
	go func() {
		pumps.Wait()
		close(pumped)
	}()
	abandoned := false
	select {
	case <-pumped:
	case <-time.After(r.s.cfg.OutputGrace):
		abandoned = true
		outR.Close()
		errR.Close()
		<-pumped
		log.Debug("exec: output still held open after the command exited (a daemon it started?); abandoned")
	}
	if !abandoned {
		outR.Close()
		errR.Close()
	}
	e := exitOf(cmd.ProcessState, werr)
	e.OutputAbandoned = abandoned
	killMu.Lock()
	if timedOut {
		e.Reason = api.Exit_TIMED_OUT
		e.Message = fmt.Sprintf("timed out after %s", time.Duration(st.GetTimeoutMs())*time.Millisecond)
	}
	killMu.Unlock()
	log.Debug("exec finished", "code", e.Code, "reason", e.Reason.String())
	if err := r.finish(e); err != nil {
		if ctx.Err() != nil {
			return status.FromContextError(ctx.Err()).Err()
		}
		return err
	}
	return nil
}

// exitOf describes how the main process ended.
func exitOf(ps *os.ProcessState, werr error) *api.Exit {
	if ps == nil {
		return &api.Exit{Reason: api.Exit_CANNOT_RUN, Code: 126, Message: fmt.Sprint(werr)}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &api.Exit{Code: 128 + int32(ws.Signal()), Signal: int32(ws.Signal()), Message: ws.Signal().String()}
	}
	return &api.Exit{Code: int32(ps.ExitCode())}
}

// startError classifies a failed start: a missing or non-executable file is
// NOT_FOUND, as container runtimes report it; anything else (a directory
// that cannot be entered, a bad executable format) is CANNOT_RUN.
func startError(err error) *api.Exit {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && pe.Op == "chdir":
		return &api.Exit{Reason: api.Exit_CANNOT_RUN, Code: 126, Message: err.Error()}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission), errors.Is(err, exec.ErrNotFound):
		return &api.Exit{Reason: api.Exit_NOT_FOUND, Code: 127, Message: err.Error()}
	}
	return &api.Exit{Reason: api.Exit_CANNOT_RUN, Code: 126, Message: err.Error()}
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
