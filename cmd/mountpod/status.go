package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// mountFlags are the flags of what surveys the live mounts: serve and
// status.
func mountFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubelet-dir", EnvVars: []string{"MOUNTPOD_KUBELET_DIR"}, Usage: "The kubelet's directory, under which the live FUSE mounts of the plugins are looked for (default: the parent of the registration directory)."},
	}
}

// surveyOptions returns the live-mount survey's options from c's flags and
// the MOUNTPOD_SCOPE* environment, with the scope manager to close (nil
// when scopes are off or unavailable: then scopeErr says why).
func surveyOptions(c *cli.Context) (o livemount.Options, scopeErr error, err error) {
	dir := c.String("kubelet-dir")
	if dir == "" {
		dir = filepath.Dir(filepath.Clean(c.String("registration-dir")))
	}
	o = livemount.Options{KubeletDir: dir, Plugins: c.StringSlice("plugins")}
	enabled, cfg, err := scope.ConfigFromEnv(os.Getenv)
	if err != nil {
		return o, nil, err
	}
	if enabled {
		m, err := scope.New(cfg)
		if err != nil {
			return o, err, nil
		}
		o.Scopes = m
	}
	return o, scopeErr, nil
}

// startMountKeeper starts the keeper of the live mounts (see
// livemount.Keeper) and returns its stop function; observe, when not nil,
// gets each survey, and answers, when not nil, are the recovery's stats
// that the surveys take for the mounts' health. While systemd takes the connection but does not answer
// ([scope.ErrNoAnswer]), the keeper asks again ([awaitScopes]) before its
// first survey.
func startMountKeeper(ctx context.Context, c *cli.Context, log *slog.Logger, observe func(livemount.Report, []livemount.Scope), answers *livemount.Answers) (func(), error) {
	o, scopeErr, err := surveyOptions(c)
	if err != nil {
		return nil, err
	}
	o.Answers = answers
	busy := errors.Is(scopeErr, scope.ErrNoAnswer)
	switch {
	case busy:
		log.Warn("systemd took the connection but did not answer: the live mounts are surveyed once it does; asking again", "err", scopeErr)
	case scopeErr != nil:
		// Not fatal: the registrations still serve every other utility.
		// A FUSE mount through this pod fails with the same error, named
		// by the mount helper.
		log.Error("scopes unavailable: FUSE mounts through this pod will fail until this is fixed, or scopes are turned off (MOUNTPOD_SCOPES=false)", "err", scopeErr)
	case o.Scopes != nil:
		log.Info("FUSE mounts run in scopes", "backend", o.Scopes.Backend())
	}
	k := &livemount.Keeper{Options: o, Logger: log, Observe: observe}
	var emptied *recovery.ScopeEvents
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if busy {
			// A survey without the scopes would report every mount
			// unscoped: none until systemd answers.
			_, cfg, _ := scope.ConfigFromEnv(os.Getenv) // read above
			m, err := awaitScopes(ctx, cfg, log, "the survey of live mounts")
			switch {
			case err == nil:
				k.Options.Scopes = m
				log.Info("FUSE mounts run in scopes", "backend", m.Backend())
			case ctx.Err() != nil:
				return
			default:
				// systemd gave another error (awaitScopes logged it):
				// the surveys go on without scopes, as when that is the
				// error at start.
			}
		}
		if k.Options.Scopes != nil {
			// cgroup v2: a scope is removed within about a second of its
			// daemon's exit (an unmount), not at the next survey. Elsewhere
			// the surveys alone find it.
			if e, err := recovery.NewScopeEvents(k.Options.Scopes, o.Plugins, nil); err == nil {
				emptied, k.Events = e, e
			} else {
				log.Info("the scopes of unmounted volumes are removed at the next survey", "period", livemount.DefaultKeepPeriod, "reason", err)
			}
		}
		k.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
		if emptied != nil {
			emptied.Close()
		}
		if k.Options.Scopes != nil {
			k.Options.Scopes.Close()
		}
	}, nil
}

func statusCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:        "status",
		Usage:       "Print the live FUSE mounts, their daemons and scopes, and the scopes without a mount.",
		Description: "Print the live FUSE mounts under the kubelet's directory (those made by earlier mount pods included), their daemons, whether each daemon runs in its mount's scope and whether the mount answers, and the plugins' scopes that have no mount. When scopes are on but unavailable it says why and shows no mount as scoped.",
		Flags: append(mountFlags(),
			&cli.StringSliceFlag{Name: "plugins", EnvVars: []string{boundary.EnvPlugins}, Usage: "Volume plugin whose scopes are listed; repeat the flag or separate names with commas."},
			&cli.StringFlag{Name: "registration-dir", EnvVars: oldnames.Vars(envRegistrationDir, envRenames), Value: registration.DefaultDir, Usage: "Directory of the registration files."},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: `Output format: "text" or "json".`},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("status takes no arguments", exitUsage)
			}
			format := c.String("output")
			if format != "text" && format != "json" {
				return cli.Exit(fmt.Sprintf("--output %q: want text or json", format), exitUsage)
			}
			o, scopeErr, err := surveyOptions(c)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			if scopeErr != nil {
				// The mounts and their daemons are still worth reporting
				// (a rollout asks every mount pod), as serve's keeper
				// does: with no mount scoped, and why.
				o.Scopes = nil
			}
			if o.Scopes != nil {
				defer o.Scopes.Close()
			}
			r, err := livemount.Survey(c.Context, o)
			if err != nil {
				return cli.Exit(err.Error(), exitFailure)
			}
			if scopeErr != nil {
				r.ScopesError = scopeErr.Error()
			}
			sr := statusReport{Report: r, Records: recordStatuses(c.String("registration-dir"))}
			if format == "json" {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(sr)
			}
			return writeStatus(stdout, sr)
		},
	}
}

// statusReport is what `mountpod status` prints: the live mounts and the
// mount records (package mountrecord) the recovery works from.
type statusReport struct {
	livemount.Report
	Records []recordStatus `json:"records"`
}

// recordStatus is one mount record, and whether a recovery of its mount is
// under way.
type recordStatus struct {
	Target      string `json:"target"`
	Plugin      string `json:"plugin,omitempty"`
	Source      string `json:"source,omitempty"`
	Recoverable bool   `json:"recoverable"`
	// Why it is not recoverable, or why the record was refused.
	Why        string `json:"why,omitempty"`
	Recovering bool   `json:"recovering"`
}

func recordStatuses(regDir string) []recordStatus {
	dir := filepath.Join(regDir, mountrecord.Dir)
	out := []recordStatus{}
	es, err := mountrecord.List(dir)
	if err != nil {
		return append(out, recordStatus{Target: dir, Why: err.Error()})
	}
	for _, e := range es {
		if e.Err != nil {
			out = append(out, recordStatus{Target: e.Path, Why: "refused: " + e.Err.Error()})
			continue
		}
		rec := e.Record
		out = append(out, recordStatus{
			Target: rec.Target, Plugin: rec.Plugin, Source: rec.Source,
			Recoverable: rec.NotRecoverable == "", Why: rec.NotRecoverable,
			Recovering: recovery.Unfinished(dir, rec.Target),
		})
	}
	return out
}

func writeStatus(w io.Writer, sr statusReport) error {
	r := sr.Report
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tFSTYPE\tSOURCE\tDAEMONS\tSCOPE\tSCOPED\tHEALTHY")
	for _, m := range r.Mounts {
		health := "yes"
		if !m.Healthy {
			health = "no: " + m.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%v\t%s\n", m.Target, m.FSType, m.Source, m.Daemons, orDash(m.Scope), m.Scoped, health)
	}
	for _, s := range r.Orphans {
		fmt.Fprintf(tw, "(no mount)\t-\t-\t%v\t%s\t-\t-\n", s.Processes, s.Name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.ScopesError != "" {
		if _, err := fmt.Fprintf(w, "scopes unavailable, so no mount shows as scoped: %s\n", r.ScopesError); err != nil {
			return err
		}
	}
	for _, rec := range sr.Records {
		state := "recoverable"
		switch {
		case !rec.Recoverable:
			state = "not recoverable: " + rec.Why
		case rec.Recovering:
			state = "recoverable, recovery under way"
		}
		if _, err := fmt.Fprintf(w, "record %s: %s %s (%s)\n", rec.Target, rec.Plugin, rec.Source, state); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
