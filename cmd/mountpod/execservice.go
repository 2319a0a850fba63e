package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/execservice"
	"github.com/mountcontainers/mountcontainers/internal/mountpod"
	"github.com/mountcontainers/mountcontainers/pkg/execserver"
)

// execSocketFlag chooses the exec service's socket; shared by serve and
// check, since the socket is part of the registration both compare.
func execSocketFlag() cli.Flag {
	return &cli.StringFlag{
		Name: "exec-socket", EnvVars: []string{"MOUNTPOD_EXEC_SOCKET"}, Value: "auto",
		Usage: `Unix socket of the exec service (the fast path for volume hosts), relative to the registration directory and advertised in the registrations: "auto" for .exec/<pod UID>.sock, "none" to serve no exec service.`,
	}
}

// execSocketFrom returns the registration's execSocket for the flags of c:
// empty when disabled, or when the socket's full path would not fit a unix
// socket address (the pod then serves only through CRI ExecSync; serve
// logs why).
func execSocketFrom(c *cli.Context, dir, podUID string) string {
	s := c.String("exec-socket")
	switch s {
	case "none", "":
		return ""
	case "auto":
		s = execserver.SocketName(podUID)
	}
	if len(filepath.Join(dir, s)) > execserver.MaxSocketPath {
		return ""
	}
	return s
}

// startExecService listens on cfg's exec socket and serves it until the
// returned stop function is called; stop waits for the service to end. It
// does nothing when the registration advertises no socket.
func startExecService(c *cli.Context, cfg mountpod.Config) (stop func(), err error) {
	if cfg.Pod.ExecSocket == "" {
		if s := c.String("exec-socket"); s != "none" && s != "" {
			cfg.Logger.Warn("exec service disabled: its socket path would be longer than a unix socket address holds; volume hosts use CRI ExecSync",
				"dir", cfg.Dir, "socket", s, "max", execserver.MaxSocketPath)
		}
		return func() {}, nil
	}
	// The daemon creates the registration directory too, later; the socket
	// needs it now.
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create registration directory: %w", err)
	}
	path := filepath.Join(cfg.Dir, cfg.Pod.ExecSocket)
	log := cfg.Logger.With("component", "exec-service")
	l, err := execservice.Listen(path, log)
	if err != nil {
		return nil, err
	}
	srv := execservice.NewServer(execservice.Config{
		Identity: execservice.Identity{PodNamespace: cfg.Pod.PodNamespace, PodName: cfg.Pod.PodName, PodUID: cfg.Pod.PodUID, ContainerName: cfg.Pod.ContainerName},
		Version:  version,
		Logger:   log,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, l); err != nil {
			log.Error("exec service failed; volume hosts fall back to CRI ExecSync", "err", err)
		}
	}()
	log.Info("exec service listening", "socket", path)
	return func() {
		cancel()
		<-done
		log.Log(context.Background(), slog.LevelInfo, "exec service stopped")
	}, nil
}
