package execservice

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
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
