package shim

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/shared/cliexit"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/internal/shared/version"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// DefaultTimeout bounds a utility run by the shim.
const DefaultTimeout = 2 * time.Minute

// Environment variables of the global settings.
const (
	// EnvRuntimeEndpoint is the variable of package cri (and crictl),
	// shared with them: the one variable without the shim's prefix.
	EnvRuntimeEndpoint = "CONTAINER_RUNTIME_ENDPOINT"
	EnvRegistrationDir = "KUBELET_EXEC_SHIM_REGISTRATION_DIR"
	EnvHostMode        = "KUBELET_EXEC_SHIM_HOST_MODE"
	EnvHostRoot        = "KUBELET_EXEC_SHIM_HOST_ROOT"
	EnvTimeout         = "KUBELET_EXEC_SHIM_TIMEOUT"
	EnvVerbose         = "KUBELET_EXEC_SHIM_VERBOSE"
	EnvExecMode        = "KUBELET_EXEC_SHIM_EXEC_MODE"
)

// IO is the shim's standard streams.
type IO struct {
	Stdin  *os.File
	Stdout io.Writer
	Stderr io.Writer
}

// Config is the global settings.
type Config struct {
	// RegistrationDir holds the registrations.
	RegistrationDir string
	// RuntimeEndpoint is the CRI endpoint; empty probes the usual ones.
	RuntimeEndpoint string
	// Timeout bounds each utility.
	Timeout time.Duration
	// HostMode is "os" (run host commands directly) or "nsenter" (enter
	// the host's mount namespace through HostRoot/proc/1).
	HostMode string
	// HostRoot is where the host's root is mounted in nsenter mode.
	HostRoot string
	// Verbose logs each decision to stderr: log level debug.
	Verbose bool
	// LogLevel and LogFormat are the log's level (empty: warn, or debug
	// when Verbose) and format (empty: text); see [Config.Logger].
	LogLevel, LogFormat string
	// ExecMode is how commands reach a live mount container: "auto" (the
	// exec socket when it answers for the registered pod, else CRI
	// ExecSync), "cri" or "socket"; see package exec.
	ExecMode string
}

// Host modes: how commands run on the host.
const (
	HostModeOS      = "os"
	HostModeNsenter = "nsenter"
)

// ExecModes are the values --exec-mode accepts; the first is the default,
// also for an empty value.
var ExecModes = []string{string(boundary.ModeAuto), string(boundary.ModeCRI), string(boundary.ModeSocket)}

// Backend is the part of the shim that needs the container runtime. The
// kubelet-exec-shim binary does not link the runtime's client (gRPC and the
// CRI API): its start-up would cost more than the host fallback itself. Its
// backend runs a command on the host when the plugin has no registration and
// hands everything else over to kubelet-exec-shim-cri ([HelperName]), whose
// backend resolves through the runtime (package shim/crihelper).
type Backend interface {
	// Run runs argv for plugin and returns the shim's exit code.
	Run(ctx context.Context, cfg *Config, plugin string, argv []string, stdio IO) int
	// Status prints the state of every registration, or of plugin, in
	// output format "text" (a table) or "json".
	Status(ctx context.Context, cfg *Config, plugin, output string, stdio IO) error
}

// Main runs kubelet-exec-shim with args (args[0] is the name it was invoked
// as) and returns its exit code. Invoked under a tool's name, it runs that
// tool for the plugin recorded at install time. When the runtime is needed
// it replaces the process with [HelperName], passing args on, so stdio must
// be the process's own standard streams.
// The old names of its variables are read and warned of here (package
// oldnames), not again by the helper it is replaced with.
func Main(ctx context.Context, args []string, stdio IO) int {
	oldnames.Env(stdio.Stderr, BinaryName, envRenames)
	return MainWith(ctx, args, stdio, &launcher{args: args})
}

// envRenames are the variables renamed to the shim's prefix, still read
// after the new names.
var envRenames = []oldnames.Rename{
	{Old: "PLUGIN_CONTAINERS_DIR", New: EnvRegistrationDir},
}

// MainWith is [Main] with the given backend.
func MainWith(ctx context.Context, args []string, stdio IO, b Backend) int {
	if tool, ok := multiCallTool(args); ok {
		return multiCall(ctx, tool, args[1:], stdio, b)
	}
	var unknown string
	app := newApp(stdio, b, &unknown)
	err := app.RunContext(ctx, args)
	if err == nil && unknown != "" {
		// Left to itself urfave/cli exits 3 for an unknown command, a
		// code a caller reads as the utility's: it is a usage error.
		err = cli.Exit(fmt.Sprintf("unknown command %q (see --help)", unknown), ExitShimFailed)
	}
	return cliexit.Code(stdio.Stderr, BinaryName, err, ExitShimFailed)
}

// multiCallTool returns the tool name the shim was invoked as (the base
// name of args[0]), or false when it runs as itself: under a name starting
// with [BinaryName] (the shim, its helper) or with no args[0].
func multiCallTool(args []string) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	base := filepath.Base(args[0])
	if strings.HasPrefix(base, BinaryName) {
		return "", false
	}
	return base, true
}

// newApp returns the shim's application; an unknown command (or help
// topic) is recorded in unknown.
func newApp(stdio IO, b Backend, unknown *string) *cli.App {
	cfg := &Config{}
	return &cli.App{
		Name:  BinaryName,
		Usage: "Run a volume plugin's utilities in its registered mount pod, or on the host.",
		Description: fmt.Sprintf("Exit codes: the utility's own; %d it did not end within its timeout; %d the shim failed (bad flags, no answer from the mount pod); %d the utility cannot be run; %d it was not found; 128+N it was killed by signal N.",
			ExitTimeout, ExitShimFailed, ExitCannotRun, ExitNotFound),
		Version: version.Version,
		Writer:  stdio.Stdout, ErrWriter: stdio.Stderr,
		// Exit codes are data: the shim returns them, urfave/cli must not
		// exit on its own or turn them into 1.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit(err.Error(), ExitShimFailed)
		},
		CommandNotFound: func(_ *cli.Context, name string) { *unknown = name },
		Flags:           globalFlags(cfg),
		Before:          func(*cli.Context) error { return cfg.check() },
		Commands: []*cli.Command{
			runCommand(cfg, stdio, b),
			statusCommand(cfg, stdio, b),
			watchCommand(cfg, stdio),
			installCommand(cfg),
			uninstallCommand(),
		},
	}
}

func globalFlags(cfg *Config) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{
			Name: "runtime-endpoint", Usage: "CRI runtime endpoint (unix socket); empty probes containerd, CRI-O and cri-dockerd.",
			EnvVars: []string{EnvRuntimeEndpoint}, Destination: &cfg.RuntimeEndpoint,
		},
		&cli.StringFlag{
			Name: "registration-dir", Usage: "Directory of the plugin-container registrations.",
			EnvVars: oldnames.Vars(EnvRegistrationDir, envRenames), Value: registration.DefaultDir, Destination: &cfg.RegistrationDir,
		},
		&cli.DurationFlag{
			Name: "timeout", Usage: "Longest a utility may run; it is then stopped and the shim exits 124.",
			EnvVars: []string{EnvTimeout}, Value: DefaultTimeout, Destination: &cfg.Timeout,
		},
		&cli.StringFlag{
			Name: "host-mode", Usage: "How host commands run: os (directly) or nsenter (through --host-root/proc/1, for a shim in a container).",
			EnvVars: []string{EnvHostMode}, Value: HostModeOS, Destination: &cfg.HostMode,
		},
		&cli.StringFlag{
			Name: "host-root", Usage: "Where the host's root is mounted, in nsenter mode.",
			EnvVars: []string{EnvHostRoot}, Value: "/host", Destination: &cfg.HostRoot,
		},
		&cli.BoolFlag{
			Name: "verbose", Usage: "Log where each command runs, and why, to stderr.",
			EnvVars: []string{EnvVerbose}, Destination: &cfg.Verbose,
		},
		&cli.StringFlag{
			Name: "exec-mode", Usage: "How commands reach a live mount container: auto (its exec socket when that answers for the registered pod, else CRI ExecSync), cri (always ExecSync) or socket (the exec socket or an error).",
			EnvVars: []string{EnvExecMode}, Value: ExecModes[0], Destination: &cfg.ExecMode,
		},
	}, logFlags(cfg)...)
}

func (cfg *Config) check() error {
	switch cfg.HostMode {
	case HostModeOS:
	case HostModeNsenter:
		if cfg.HostRoot == "" {
			return cli.Exit("--host-mode nsenter needs --host-root", ExitShimFailed)
		}
	default:
		return cli.Exit(fmt.Sprintf("--host-mode %q: want os or nsenter", cfg.HostMode), ExitShimFailed)
	}
	if cfg.Timeout <= 0 {
		return cli.Exit(fmt.Sprintf("--timeout %s: must be positive", cfg.Timeout), ExitShimFailed)
	}
	mode, err := boundary.ParseExecMode(cfg.ExecMode) // empty (an empty variable) is the default
	if err != nil {
		n := len(ExecModes)
		return cli.Exit(fmt.Sprintf("--exec-mode %q: want %s or %s", cfg.ExecMode, strings.Join(ExecModes[:n-1], ", "), ExecModes[n-1]), ExitShimFailed)
	}
	cfg.ExecMode = string(mode)
	return cfg.checkLog()
}
