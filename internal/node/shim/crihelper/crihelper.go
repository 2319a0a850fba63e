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
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/pkg/cri"
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
	r, err := resolver(cfg, stdio.Stderr)
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", shim.BinaryName, err)
		return shim.ExitShimFailed
	}
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

// resolver builds the resolver for cfg; the caller closes it. It refuses
// a runtime socket or, in nsenter mode, a host root that root must not
// trust (see [shim.CheckRuntimeSocket] and [shim.CheckTrustedDir]), even
// where a command would not need it: the settings are wrong either way.
func resolver(cfg *shim.Config, stderr io.Writer) (*mcexec.Resolver, error) {
	endpoint, err := runtimeEndpoint(cfg.RuntimeEndpoint)
	if err != nil {
		return nil, err
	}
	host := shim.NewHostExec()
	if cfg.HostMode == shim.HostModeNsenter {
		if err := shim.CheckTrustedDir(cfg.HostRoot); err != nil {
			return nil, fmt.Errorf("host root: %w", err)
		}
		host = mcexec.NewNsenter(cfg.HostRoot)
	}
	mode, _ := mcexec.ParseExecMode(cfg.ExecMode) // checked by the shim's flags
	log := cfg.Logger(stderr)
	return mcexec.NewResolver(mcexec.Options{
		ExecMode: mode,
		Dir:      cfg.RegistrationDir,
		Endpoint: endpoint,
		Host:     host,
		Timeout:  cfg.Timeout,
		Logger:   log,
		// One debug record per command (with -v); never its arguments.
		Observer: mcexec.LogObserver(log),
	}), nil
}

// runtimeEndpoint resolves endpoint as package cri does (the flag, else
// CONTAINER_RUNTIME_ENDPOINT, else the first of the usual sockets that
// exists) and returns it once its socket passes [shim.CheckRuntimeSocket],
// its symbolic links resolved: the resolver dials the path checked. With no
// endpoint set and none of the usual sockets there it returns "", for the
// resolver to report when a command needs the runtime.
func runtimeEndpoint(endpoint string) (string, error) {
	ep, err := cri.ResolveEndpoint(endpoint)
	if errors.Is(err, cri.ErrNoEndpoint) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	path, err := cri.SocketPath(ep)
	if err != nil {
		return "", err
	}
	if path, err = shim.CheckRuntimeSocket(path); err != nil {
		return "", fmt.Errorf("runtime endpoint %s: %w", ep, err)
	}
	return "unix://" + path, nil
}
