// Package crihelper is the half of kubelet-exec-shim that talks to the
// container runtime, built as the kubelet-exec-shim-cri binary. The shim
// itself does not link the runtime's client, so that the host fallback, its
// common case, starts as fast as a small Go program; whenever a plugin has a
// registration (or for status, or in nsenter host mode) it replaces itself
// with this helper and the same arguments. The helper is the whole shim: the
// same commands, flags, exit codes and multi-call behaviour (see package
// shim), with a backend that decides through package exec's resolver.
package crihelper

import (
	"context"
	"encoding/json"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/shim"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// Main runs the helper with args, as [shim.Main] runs the shim.
func Main(ctx context.Context, args []string, stdio shim.IO) int {
	return shim.MainWith(ctx, args, stdio, Backend{})
}

// Backend resolves through the container runtime.
type Backend struct{}

var _ shim.Backend = Backend{}

// Run runs argv for plugin where the resolver decides: the registered
// container when it is running, else the host.
func (Backend) Run(ctx context.Context, cfg *shim.Config, plugin string, argv []string, stdio shim.IO) int {
	r := resolver(cfg, stdio.Stderr)
	defer r.Close()
	return shim.RunUtility(ctx, cfg, plugin, argv, stdio, func(ctx context.Context) (shim.Target, error) {
		e, err := r.For(plugin)
		if err != nil {
			return nil, err
		}
		d, err := e.Resolve(ctx)
		if err != nil {
			return nil, err
		}
		return target{e, d}, nil
	})
}

// Status prints every registration's state, or plugin's.
func (Backend) Status(ctx context.Context, cfg *shim.Config, plugin, output string, stdio shim.IO) error {
	sts, err := Statuses(ctx, cfg, plugin, stdio.Stderr)
	if err != nil {
		return cli.Exit(err.Error(), shim.ExitShimFailed)
	}
	if output == "json" {
		enc := json.NewEncoder(stdio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sts)
	}
	return printTable(stdio.Stdout, sts)
}

// target is a plugin's executor with the decision taken for it.
type target struct {
	*mcexec.Exec
	d mcexec.Decision
}

func (t target) OnHost() bool  { return t.d.OnHost() }
func (t target) Where() string { return t.d.Where() }

// resolver builds the resolver for cfg; the caller closes it.
func resolver(cfg *shim.Config, stderr io.Writer) *mcexec.Resolver {
	host := shim.NewHostExec()
	if cfg.HostMode == shim.HostModeNsenter {
		host = mcexec.NewNsenter(cfg.HostRoot)
	}
	mode, _ := mcexec.ParseExecMode(cfg.ExecMode) // checked by the shim's flags
	log := cfg.Logger(stderr)
	return mcexec.NewResolver(mcexec.Options{
		ExecMode: mode,
		Dir:      cfg.RegistrationDir,
		Endpoint: cfg.RuntimeEndpoint,
		Host:     host,
		Timeout:  cfg.Timeout,
		Logger:   log,
		// One debug record per command (with -v); never its arguments.
		Observer: mcexec.LogObserver(log),
	})
}
