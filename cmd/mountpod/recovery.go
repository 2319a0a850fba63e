package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
	"github.com/mountcontainers/mountcontainers/internal/pod/kubeevents"
	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/metrics"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/known"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// envRecovery turns the recovery of dead FUSE mounts on ("true", the
// default) or off ("false").
const envRecovery = "MOUNTPOD_RECOVERY"

// startRecovery starts bringing back the dead FUSE mounts of cfg's plugins
// (package recovery), unless MOUNTPOD_RECOVERY is false; it returns the
// stop function. When inst installs a Flexvolume driver, a dead mount is
// made again only while the driver's allow-list allows its servers
// ([recoveryAllow]). m, when not nil, observes the recoveries; events, when
// not nil, records them as Kubernetes Events; answers, when not nil, get
// the answers of its stats.
func startRecovery(ctx context.Context, cfg registrar.Config, inst hostinstall.Config, m *metrics.Metrics, events *kubeevents.Recorder, answers *livemount.Answers) (func(), error) {
	switch v := strings.TrimSpace(os.Getenv(envRecovery)); v {
	case "", "true", "1", "on":
	case "false", "0", "off":
		cfg.Logger.Info("recovery of dead FUSE mounts is off", "env", envRecovery)
		return func() {}, nil
	default:
		return nil, fmt.Errorf("%s=%q: want true or false", envRecovery, v)
	}
	r, err := newRecoverer(cfg, inst, m, events)
	if err != nil {
		return nil, err
	}
	r.Answers = answers
	log := r.Logger
	var closeScopes []func() error
	// withScopes gives r what the scopes give: leftovers stopped, and
	// events.
	withScopes := func(scopes scope.Manager, hc scope.HelperConfig) {
		closeScopes = append(closeScopes, scopes.Close)
		r.StopLeftovers = func(_ context.Context, target string) ([]int, error) {
			return scopes.Kill(hc.Plugin, scope.Name(target), leftoverWait)
		}
		if events, err := recovery.NewScopeEvents(scopes, cfg.Plugins, log); err != nil {
			log.Info("dead mounts are found by polling only", "why", err)
		} else {
			r.Events = events
			closeScopes = append(closeScopes, events.Close)
			log.Info("dead mounts are found by their scope's cgroup events and by polling", "watched", events.Watched())
		}
	}
	scopes, hc, err := scopeManager()
	busy := errors.Is(err, scope.ErrNoAnswer)
	switch {
	case busy:
		// Until systemd answers, nothing is mounted again: a leftover
		// in the dead mount's scope could not be stopped, and the mount
		// helper needs systemd too.
		log.Warn("systemd took the connection but did not answer: dead mounts are detached, and made again once it answers; asking again", "err", err)
		r.StopLeftovers = func(context.Context, string) ([]int, error) {
			return nil, fmt.Errorf("systemd has not answered yet, so what runs in the dead mount's scope cannot be stopped (asked again): %w", err)
		}
	case err != nil:
		log.Info("dead mounts are found by polling only, and what they leave running is not stopped", "why", err)
	default:
		withScopes(scopes, hc)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if busy {
			// Passes go on meanwhile: a dead mount is detached at once,
			// and made again once the scopes are had.
			var m scope.Manager
			had := make(chan struct{})
			go func() {
				defer close(had)
				m, _ = awaitScopes(ctx, hc.Config, log, "the recovery of dead mounts")
			}()
			r.RunUntil(ctx, had)
			<-had
			switch {
			case m != nil:
				withScopes(m, hc)
				r.TryNow() // what waited for systemd
				log.Info("systemd answered: dead mounts are made again")
			case ctx.Err() != nil:
				return
			default: // systemd gave another error: awaitScopes logged it
				r.StopLeftovers = nil
				log.Info("dead mounts are found by polling only, and what they leave running is not stopped")
			}
		}
		r.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		for i := len(closeScopes) - 1; i >= 0; i-- {
			closeScopes[i]()
		}
	}, nil
}

// newRecoverer returns the recoverer of startRecovery, without its scopes.
func newRecoverer(cfg registrar.Config, inst hostinstall.Config, m *metrics.Metrics, events *kubeevents.Recorder) (*recovery.Recoverer, error) {
	allow, err := recoveryAllow(inst)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "recovery")
	r := &recovery.Recoverer{Dir: cfg.Dir, Plugins: cfg.Plugins, PodUID: cfg.Pod.PodUID, Logger: log, Allow: allow}
	if allow != nil {
		log.Info("a dead mount is made again only while the Flexvolume driver's allow-list allows the servers its record names",
			"env", envAllowedServers, "allowedServers", inst.FlexvolumeAllowedServers)
	}
	if events != nil {
		r.Reporter = recovery.EventReporter{Events: events, MountPod: selfObject(cfg)}
	}
	if m != nil {
		r.Observer = m
	}
	return r, nil
}

// envAllowedServers is the setting of the Flexvolume driver's allow-list
// (--flexvolume-allowed-servers), for messages.
const envAllowedServers = "MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS"

// recoveryAllow returns the check of a dead mount's record before the
// recovery makes it again, when inst installs a Flexvolume driver: every
// server the record names must be allowed by the driver's allow-list as it
// is now ([known.CheckRecordedMount]), so that a server
// the administrator removed since the mount was made is not connected to
// again. The records of every plugin of this pod are checked: the pod's
// FUSE clients run as root on the node's network, whichever volume host
// asked for the mount. Without a driver there is no allow-list: nil.
func recoveryAllow(inst hostinstall.Config) (func(context.Context, mountrecord.Record) error, error) {
	if inst.FlexvolumeDir == "" {
		return nil, nil
	}
	policy, err := fs.ParseAllowedServers(inst.FlexvolumeAllowedServers)
	if err != nil {
		return nil, fmt.Errorf("--flexvolume-allowed-servers (%s): %w", envAllowedServers, err)
	}
	return func(ctx context.Context, rec mountrecord.Record) error {
		if err := known.CheckRecordedMount(ctx, policy, rec); err != nil {
			return fmt.Errorf("plugin %s: %w; the servers of a dead mount must be allowed by %s when it is made again", rec.Plugin, err, envAllowedServers)
		}
		return nil
	}, nil
}

// leftoverWait bounds how long the recovery waits for the processes it
// kills in a dead mount's scope to be gone.
const leftoverWait = 5 * time.Second

// scopeManager returns the scope manager of this pod's mount helper, and
// its settings (the plugin whose parent holds the scopes), when scopes are
// on.
// When systemd took the connection but did not answer, the error wraps
// [scope.ErrNoAnswer] and hc is whole.
func scopeManager() (scope.Manager, scope.HelperConfig, error) {
	hc, err := scope.HelperConfigFromEnv(os.Getenv)
	switch {
	case err != nil:
		return nil, hc, err
	case !hc.Enabled:
		return nil, hc, fmt.Errorf("scopes are off (%s=false)", scope.EnvScopes)
	}
	m, err := scope.New(hc.Config)
	if err != nil {
		return nil, hc, err
	}
	return m, hc, nil
}

// awaitScopes returns the scope manager cfg selects once systemd answers
// ([scope.NewRetrying]), logging each try that got no answer on behalf of
// what; it fails only when ctx ends or systemd gives another error.
func awaitScopes(ctx context.Context, cfg scope.Config, log *slog.Logger, what string) (scope.Manager, error) {
	m, err := scope.NewRetrying(ctx, cfg, func(err error, wait time.Duration) {
		log.Warn("systemd did not answer; asking again", "for", what, "in", wait, "err", err)
	})
	if err != nil && ctx.Err() == nil {
		log.Error("scopes unavailable: FUSE mounts through this pod will fail until this is fixed, or scopes are turned off (MOUNTPOD_SCOPES=false)", "for", what, "err", err)
	}
	return m, err
}

// reattachCommand is run by the recovery itself, in a workload container's
// mount namespace (see package recovery); it is not for people.
func reattachCommand() *cli.Command {
	return &cli.Command{
		Name:        recovery.ReattachCommand,
		Hidden:      true,
		Usage:       "Replace a container's dead mount with a new one (run by the recovery).",
		Description: "Replace the dead mount at --path (mount --mount-id in the container's mountinfo) with the mount tree of descriptor --fd (run by the recovery in a container's mount namespace).",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "fd", Required: true},
			&cli.StringFlag{Name: "path", Required: true},
			&cli.Uint64Flag{Name: "mount-id", Required: true},
		},
		Action: func(c *cli.Context) error {
			err := recovery.ReattachMain(c.Int("fd"), c.String("path"), c.Uint64("mount-id"))
			if errors.Is(err, recovery.ErrUnreachable) {
				return cli.Exit(err.Error(), recovery.ExitUnreachable)
			}
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			return nil
		},
	}
}

// startEvents returns the recorder of this pod's Kubernetes Events, or nil
// (logged) when the pod has no token or is not in a cluster: the log then
// says everything, and nothing else changes.
func startEvents(cfg registrar.Config) *kubeevents.Recorder {
	host, _ := os.Hostname()
	events, err := kubeevents.InCluster("mountpod", host, cfg.Logger.With("component", "events"))
	if err != nil {
		cfg.Logger.Info("no Kubernetes Events: this pod's log alone reports yields and recoveries", "why", err)
		return nil
	}
	cfg.Logger.Info("yields, take-backs and recoveries are also reported as Kubernetes Events")
	return events
}

// selfObject is this pod, as Events name it.
func selfObject(cfg registrar.Config) kubeevents.Object {
	return kubeevents.Object{Namespace: cfg.Pod.PodNamespace, Name: cfg.Pod.PodName, UID: cfg.Pod.PodUID}
}
