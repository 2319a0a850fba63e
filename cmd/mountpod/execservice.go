package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/cmdslots"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/metrics"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
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
// empty when disabled. A socket whose full path would not fit a unix socket
// address is an error naming the path and the limit: the pod would
// otherwise serve only through CRI ExecSync, many times slower, without
// anyone having asked for that.
func execSocketFrom(c *cli.Context, dir, podUID string) (string, error) {
	s := c.String("exec-socket")
	switch s {
	case "none", "":
		return "", nil
	case "auto":
		s = execclient.SocketName(podUID)
	}
	if path := filepath.Join(dir, s); len(path) > execclient.MaxSocketPath {
		return "", fmt.Errorf("exec socket %s: %d bytes, longer than a unix socket address holds (%d); shorten --registration-dir or --exec-socket, or serve no exec service with --exec-socket none",
			path, len(path), execclient.MaxSocketPath)
	}
	return s, nil
}

// startExecService listens on cfg's exec socket and serves it until the
// returned stop function is called; stop waits for the service to end. It
// does nothing when the registration advertises no socket. m, when not
// nil, observes the calls.
func startExecService(cfg registrar.Config, m *metrics.Metrics) (stop func(), err error) {
	if cfg.Pod.ExecSocket == "" {
		return func() {}, nil
	}
	// The daemon creates the registration directory too, later; the socket
	// needs it now.
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create registration directory: %w", err)
	}
	path := filepath.Join(cfg.Dir, cfg.Pod.ExecSocket)
	log := cfg.Logger.With("component", "exec-service")
	l, err := execserver.Listen(path, log)
	if err != nil {
		return nil, err
	}
	// serve checked the setting: an error here is the directory's.
	slots, err := openCommandSlots()
	switch {
	case slots != nil:
		log.Info("commands at once in this container, the batches through CRI ExecSync included", "max", slots.Count(), "env", envCommandSlots)
	case err != nil:
		log.Warn("commands at once in this container are bounded only per exec path", "env", envCommandSlots, "err", err)
	}
	scfg := execserver.Config{
		Identity: execserver.Identity{PodNamespace: cfg.Pod.PodNamespace, PodName: cfg.Pod.PodName, PodUID: cfg.Pod.PodUID, ContainerName: cfg.Pod.ContainerName},
		Version:  version,
		Logger:   log,
		Plugins:  cfg.Plugins,
		Slots:    slots,
	}
	if m != nil {
		scfg.Observer = m
	}
	placer, releasePlacer := earlyPlacer(log)
	if placer != nil {
		scfg.Gate = placer
		log.Info("FUSE mounts are placed in their scopes before mount(8) runs")
	}
	srv := execserver.NewServer(scfg)
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
		releasePlacer()
		// The slots stay open: a call still ending may give its slot
		// back; the process's exit closes them.
		log.Log(context.Background(), slog.LevelInfo, "exec service stopped")
	}, nil
}

// earlyPlacer is [scope.EarlyPlacer] for this pod's helper settings: nil
// when scopes are off or not cgroupfs, or the settings name no one plugin
// (the helper then says why, for each mount).
func earlyPlacer(log *slog.Logger) (placer func(argv []string) func(pid int), release func()) {
	hc, err := scope.HelperConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, func() {}
	}
	return scope.EarlyPlacer(hc, log)
}

// envCommandSlots sets how many commands run at once in the mount
// container, through the exec service and the batches of CRI ExecSync
// together (package cmdslots); 0 bounds them only per path.
const envCommandSlots = "MOUNTPOD_COMMAND_SLOTS"

var errBadCommandSlots = errors.New(envCommandSlots + ": want a whole number from 0 to " + strconv.Itoa(cmdslots.MaxCount))

// commandSlotsCount returns the count envCommandSlots sets.
func commandSlotsCount() (int, error) {
	v, ok := os.LookupEnv(envCommandSlots)
	if !ok {
		return cmdslots.DefaultCount, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > cmdslots.MaxCount {
		return 0, fmt.Errorf("%w, got %q", errBadCommandSlots, v)
	}
	return n, nil
}

// openCommandSlots opens the container's command slots, as
// envCommandSlots sets them: nil and no error when it is 0.
func openCommandSlots() (*cmdslots.Slots, error) {
	n, err := commandSlotsCount()
	if err != nil || n == 0 {
		return nil, err
	}
	return cmdslots.Open(cmdslots.DefaultDir, n)
}
