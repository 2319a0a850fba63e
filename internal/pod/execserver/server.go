package execserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/pod/cmdslots"
	"github.com/mountcontainers/mountcontainers/pkg/execapi"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

const (
	// DefaultOutputGrace is how long the server waits for the end of a
	// command's output pipes after its main process exited; it then sends
	// what they hold and ends the call. It matters only when something the
	// command left behind holds the pipes: no output written before the
	// exit is lost after it.
	DefaultOutputGrace = 200 * time.Millisecond

	// DefaultStopTimeout is how long [Server.Serve] lets running commands
	// finish once its context ends before it kills them: a mount under way
	// on a loaded node ends rather than failing half done. It leaves the
	// rest of mountpod's shutdown (the recovery's last kill of a scope, up
	// to 5 s; the Events, 2 s) room in the mount pod's termination grace of
	// 30 s (deploy/base), whose end kills what is left.
	DefaultStopTimeout = 15 * time.Second

	// DefaultCommandTimeout is the timeout of a command whose call gives
	// none: a call cannot ask for no limit. It is the Exec resolver's
	// default (exec.DefaultTimeout).
	DefaultCommandTimeout = 2 * time.Minute

	// DefaultMaxTimeout is the longest timeout a call may ask for; a call
	// asking for more is refused before anything runs.
	DefaultMaxTimeout = time.Hour

	// DefaultMaxConcurrent is how many commands run at once; more calls
	// wait, in order, for one to end.
	DefaultMaxConcurrent = 32

	// DefaultQueueWait is the longest a call waits for a command to end
	// when [DefaultMaxConcurrent] run; its caller's deadline ends the wait
	// sooner. A node mounting every volume at once after a reboot queues
	// mounts here rather than failing them: a refused mount is retried by
	// the kubelet only after a back-off, and reported as FailedMount.
	DefaultQueueWait = 2 * time.Minute

	// DefaultMaxQueued is how many calls may wait at once; a further call
	// is refused at once (RESOURCE_EXHAUSTED).
	DefaultMaxQueued = 1024
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
	// CommandTimeout: see [DefaultCommandTimeout] (the default when zero).
	CommandTimeout time.Duration
	// MaxTimeout: see [DefaultMaxTimeout] (the default when zero).
	MaxTimeout time.Duration
	// MaxConcurrent: see [DefaultMaxConcurrent] (the default when zero).
	MaxConcurrent int
	// QueueWait: see [DefaultQueueWait] (the default when zero).
	QueueWait time.Duration
	// MaxQueued: see [DefaultMaxQueued] (the default when zero).
	MaxQueued int
	// MaxOutput is the most of each output stream a call gets:
	// execclient.MaxOutput (16 MiB, as CRI ExecSync) when zero.
	MaxOutput int
	// Plugins are the plugins the pod serves: a call naming one of them
	// is observed under its name, any other under [PluginOther].
	Plugins []string
	// Observer, when set, is told of every call (the mount pod's
	// metrics).
	Observer Observer
	// Slots, when set, bound the commands running at once in the whole
	// container (the batches run through CRI ExecSync take them too): a
	// command takes one after its place among MaxConcurrent, waiting for
	// it at most QueueWait more.
	Slots *cmdslots.Slots
	// Gate, when set, is asked with each command's argv before it
	// starts; a function it returns is called with the command's
	// process ID before the program runs (startgate.Start: the mount pod
	// places a FUSE mount in its scope, scope.PlaceEarly). The command
	// waits, stopped, until it returns, so it must return within a
	// bounded time.
	Gate func(argv []string) func(pid int)
}

// Server is the exec service. Create it with [NewServer].
type Server struct {
	execapi.UnimplementedExecServer
	cfg   Config
	log   *slog.Logger
	slots chan struct{} // one per running command
	queue chan struct{} // one per call waiting for a slot
}

var _ execapi.ExecServer = (*Server)(nil)

// NewServer returns a server for cfg.
func NewServer(cfg Config) *Server {
	if cfg.OutputGrace <= 0 {
		cfg.OutputGrace = DefaultOutputGrace
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	cfg.CommandTimeout = min(cfg.CommandTimeout, cfg.MaxTimeout)
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.QueueWait <= 0 {
		cfg.QueueWait = DefaultQueueWait
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = execclient.MaxOutput
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log, slots: make(chan struct{}, cfg.MaxConcurrent), queue: make(chan struct{}, cfg.MaxQueued)}
}

// Serve serves on l, accepting only trusted peers (see "Peers" in the
// package documentation), until ctx ends. It then lets running commands
// finish for StopTimeout, cancels those still running (which kills them),
// closes l (removing the socket) and returns nil; or it returns the error
// that stopped it serving.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	gs := grpc.NewServer()
	execapi.RegisterExecServer(gs, s)
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
func (s *Server) Identity(context.Context, *execapi.IdentityRequest) (*execapi.IdentityResponse, error) {
	id := s.cfg.Identity
	return &execapi.IdentityResponse{
		PodNamespace: id.PodNamespace, PodName: id.PodName, PodUid: id.PodUID, ContainerName: id.ContainerName,
		Version: s.cfg.Version, Pid: int64(os.Getpid()),
	}, nil
}

// Exec runs one command; see the service definition in exec.proto.
func (s *Server) Exec(stream execapi.Exec_ExecServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	timeout, err := s.checkStart(start)
	if err != nil {
		return err
	}
	plugin, tool := s.pluginLabel(start.GetPlugin()), toolName(start.GetArgv()[0])
	release, err := s.acquire(stream.Context())
	if err != nil {
		if s.cfg.Observer != nil && status.Code(err) == codes.ResourceExhausted {
			s.cfg.Observer.ExecRefused(plugin, tool, ResultBusy)
		}
		return err
	}
	defer release()
	r := &run{s: s, stream: stream, start: start, timeout: timeout}
	if s.cfg.Observer == nil {
		return r.do()
	}
	began := time.Now()
	s.cfg.Observer.ExecStarted(plugin, tool)
	err = r.do()
	s.cfg.Observer.ExecEnded(plugin, tool, resultOf(r.exit), time.Since(began))
	return err
}

// checkStart validates the first message of a call before anything runs
// and returns the command's timeout.
func (s *Server) checkStart(start *execapi.Start) (time.Duration, error) {
	switch {
	case start == nil:
		return 0, status.Error(codes.InvalidArgument, "the first message must be a Start")
	case len(start.GetArgv()) == 0 || start.GetArgv()[0] == "":
		return 0, status.Error(codes.InvalidArgument, "no command")
	case start.GetExpectPodUid() != "" && start.GetExpectPodUid() != s.cfg.Identity.PodUID,
		start.GetExpectContainerName() != "" && start.GetExpectContainerName() != s.cfg.Identity.ContainerName:
		return 0, status.Errorf(codes.FailedPrecondition, "this exec service runs in pod UID %s container %s, not pod UID %s container %s",
			s.cfg.Identity.PodUID, s.cfg.Identity.ContainerName, start.GetExpectPodUid(), start.GetExpectContainerName())
	}
	return s.timeout(start.GetTimeoutMs())
}

// timeout is the timeout of a command whose call asks for ms milliseconds.
func (s *Server) timeout(ms int64) (time.Duration, error) {
	switch {
	case ms == 0:
		return s.cfg.CommandTimeout, nil
	case ms < 0 || ms > int64(s.cfg.MaxTimeout/time.Millisecond):
		return 0, status.Errorf(codes.InvalidArgument, "timeout %s: the exec service runs a command for at most %s", askedTimeout(ms), s.cfg.MaxTimeout)
	default:
		return time.Duration(ms) * time.Millisecond, nil
	}
}

// askedTimeout names a timeout of ms milliseconds: as a duration when one
// holds it, else in milliseconds (a duration of more than 292 years wraps).
func askedTimeout(ms int64) string {
	const most = math.MaxInt64 / int64(time.Millisecond)
	if ms > most || ms < -most {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// acquire takes a command slot of this service and then one of the
// container ([Config.Slots]), waiting for each until ctx (the call's
// deadline) ends or QueueWait has passed, and returns the function that
// gives them back. When MaxQueued calls wait already, it refuses at once.
func (s *Server) acquire(ctx context.Context) (func(), error) {
	own, err := s.acquireOwn(ctx)
	if err != nil || s.cfg.Slots == nil {
		return own, err
	}
	wait, cancel := context.WithTimeout(ctx, s.cfg.QueueWait)
	defer cancel()
	free, err := s.cfg.Slots.Acquire(wait)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		own()
		return nil, status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, context.DeadlineExceeded):
		own()
		s.log.Warn("exec service busy: call refused", "waited", s.cfg.QueueWait, "err", err)
		return nil, status.Errorf(codes.ResourceExhausted, "exec service busy: %v", err)
	default:
		own()
		s.log.Error("exec service: the container's command slots failed", "err", err)
		return nil, status.Errorf(codes.Internal, "exec service: %v", err)
	}
	return func() { free(); own() }, nil
}

// acquireOwn takes a command slot of this service: see [Server.acquire].
func (s *Server) acquireOwn(ctx context.Context) (release func(), err error) {
	release = func() { <-s.slots }
	select {
	case s.slots <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case s.queue <- struct{}{}:
		defer func() { <-s.queue }()
	default:
		s.log.Warn("exec service busy: call refused", "running", s.cfg.MaxConcurrent, "waiting", s.cfg.MaxQueued)
		return nil, status.Errorf(codes.ResourceExhausted, "exec service busy: %d commands running (its limit) and %d calls waiting (their limit)", s.cfg.MaxConcurrent, s.cfg.MaxQueued)
	}
	t := time.NewTimer(s.cfg.QueueWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		s.log.Warn("exec service busy: call refused", "running", s.cfg.MaxConcurrent, "waited", s.cfg.QueueWait)
		return nil, status.Errorf(codes.ResourceExhausted, "exec service busy: %d commands running (its limit), none ended within %s", s.cfg.MaxConcurrent, s.cfg.QueueWait)
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}
