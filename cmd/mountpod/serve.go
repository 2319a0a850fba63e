package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
)

func serveCommand(logTo io.Writer) *cli.Command {
	return &cli.Command{
		Name:        "serve",
		Usage:       "Register this container for its plugins and serve them until SIGTERM or SIGINT.",
		Description: "Check the required tools, register this container for every plugin, install the host-side driver and shim if asked, and keep the registrations until SIGTERM or SIGINT, then remove those that still name this pod. Meanwhile log the live FUSE mounts (adopting those of earlier pods: nothing is ever unmounted or killed) and remove the scopes whose mount and processes are gone; bring back in place, on the node and in every container using it, a recorded FUSE mount whose daemon died (MOUNTPOD_RECOVERY=false turns that off).",
		Flags:       slices.Concat(settingsFlags(), installFlags(), mountFlags(), []cli.Flag{metricsFlag(), gcPercentFlag()}, logging.Flags("MOUNTPOD_")),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("serve takes no arguments", exitUsage)
			}
			cfg, err := configFrom(c)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			if cfg.Logger, err = logging.FromFlags(c, logTo, exitUsage); err != nil {
				return err
			}
			setGCPercent(c, cfg.Logger)
			defer startMemoryTrim(c.Context, cfg.Logger)()
			inst := installConfigFrom(c)
			if err := inst.Validate(); err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			// The batches through CRI read this setting too, and cannot
			// refuse it.
			if _, err := commandSlotsCount(); err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			m, stopMetrics := startMetrics(c.String("metrics-address"), cfg.Plugins, cfg.Logger)
			defer stopMetrics()
			if m != nil {
				cfg.Observer = m
			}
			// Kubernetes Events on this pod and on the workload pods whose
			// mounts come back, when the pod has a token (deploy/base/rbac.yaml).
			events := startEvents(cfg)
			defer events.Close(2 * time.Second)
			var evObs *registrar.EventObserver
			if events != nil {
				evObs = &registrar.EventObserver{Next: cfg.Observer, Events: events, Pod: selfObject(cfg)}
				cfg.Observer = evObs
			}
			// The exec service is a fast path: a socket that cannot listen
			// (something else at its path, a directory of the wrong owner)
			// must not keep the pod from serving through CRI ExecSync, so
			// the registrations then advertise no socket.
			stopExec, err := startExecService(cfg, m)
			if err != nil {
				cfg.Logger.Error("exec service cannot listen: registering without execSocket, volume hosts use CRI ExecSync",
					"socket", filepath.Join(cfg.Dir, cfg.Pod.ExecSocket), "err", err)
				cfg.Pod.ExecSocket = ""
				stopExec = func() {}
			}
			// The exec service stops after d.Run has removed the
			// registrations that advertise it.
			defer stopExec()
			d, err := registrar.New(cfg)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			// The keeper's surveys take the recovery's stats of the mounts
			// for their health, rather than stat them again.
			answers := &livemount.Answers{}
			stopKeeper, err := startMountKeeper(c.Context, c, cfg.Logger, surveyObserver(m, cfg.Dir), answers)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			defer stopKeeper()
			stopRecovery, err := startRecovery(c.Context, cfg, inst, m, events, answers)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			defer stopRecovery()
			ctx, cancel := context.WithCancelCause(c.Context)
			defer cancel(nil)
			done := make(chan error, 1)
			go func() { done <- d.Run(ctx) }()
			var installErr error
			if inst.Enabled() {
				select {
				case <-d.Registered():
					// Installed only once registered, so that the driver's
					// first call finds the pod to run in.
					if err := inst.Install(cfg.Plugins, cfg.Dir, cfg.Logger); err != nil {
						installErr = err
						cancel(err)
					}
				case err := <-done:
					done <- err
				}
			}
			err = <-done
			var missing *registrar.MissingToolsError
			if evObs != nil && errors.As(err, &missing) {
				evObs.ToolsMissing(missing)
			}
			if err = errors.Join(installErr, err); err != nil {
				cfg.Logger.Error("mountpod failed", "err", err)
				return cli.Exit("", exitFailure)
			}
			return nil
		},
	}
}
