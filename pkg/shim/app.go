package shim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/pkg/cliexit"
	"github.com/mountcontainers/mountcontainers/pkg/cri"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/pkg/version"
)

// DefaultTimeout bounds a utility run by the shim.
const DefaultTimeout = 2 * time.Minute

// Environment variables of the global settings.
const (
	EnvRegistrationDir = "PLUGIN_CONTAINERS_DIR"
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
	// Verbose logs each decision to stderr.
	Verbose bool
	// ExecMode is how commands reach a live mount container: "auto" (the
	// exec socket when it answers for the registered pod, else CRI
	// ExecSync), "cri" or "socket"; see package exec.
	ExecMode string
}

// Main runs the shim with args (args[0] is the name it was invoked as) and
// returns its exit code. Invoked under a tool's name, it runs that tool for
// the plugin recorded at install time.
func Main(ctx context.Context, args []string, stdio IO) int {
	if len(args) > 0 {
		if base := filepath.Base(args[0]); !strings.HasPrefix(base, BinaryName) && base != "" {
			return multiCall(ctx, base, args[1:], stdio)
		}
	}
	app := newApp(stdio)
	err := app.RunContext(ctx, args)
	return cliexit.Code(stdio.Stderr, BinaryName, err, ExitShimFailed)
}

func newApp(stdio IO) *cli.App {
	cfg := &Config{}
	return &cli.App{
		Name:    BinaryName,
		Usage:   "Run a volume plugin's utilities in its registered mount pod, or on the host.",
		Version: version.Version,
		Writer:  stdio.Stdout, ErrWriter: stdio.Stderr,
		// Exit codes are data: the shim returns them, urfave/cli must not
		// exit on its own or turn them into 1.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit(err.Error(), ExitShimFailed)
		},
		Flags:  globalFlags(cfg),
		Before: func(*cli.Context) error { return cfg.check() },
		Commands: []*cli.Command{
			runCommand(cfg, stdio),
			statusCommand(cfg, stdio),
			watchCommand(cfg, stdio),
			installCommand(cfg),
			uninstallCommand(),
		},
	}
}

func globalFlags(cfg *Config) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name: "runtime-endpoint", Usage: "CRI runtime endpoint (unix socket); empty probes containerd, CRI-O and cri-dockerd.",
			EnvVars: []string{cri.EnvEndpoint}, Destination: &cfg.RuntimeEndpoint,
		},
		&cli.StringFlag{
			Name: "registration-dir", Usage: "Directory of the plugin-container registrations.",
			EnvVars: []string{EnvRegistrationDir}, Value: registration.DefaultDir, Destination: &cfg.RegistrationDir,
		},
		&cli.DurationFlag{
			Name: "timeout", Usage: "Longest a utility may run; it is then stopped and the shim exits 124.",
			EnvVars: []string{EnvTimeout}, Value: DefaultTimeout, Destination: &cfg.Timeout,
		},
		&cli.StringFlag{
			Name: "host-mode", Usage: "How host commands run: os (directly) or nsenter (through --host-root/proc/1, for a shim in a container).",
			EnvVars: []string{EnvHostMode}, Value: "os", Destination: &cfg.HostMode,
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
			EnvVars: []string{EnvExecMode}, Value: string(mcexec.ModeAuto), Destination: &cfg.ExecMode,
		},
	}
}

func (cfg *Config) check() error {
	switch cfg.HostMode {
	case "os":
	case "nsenter":
		if cfg.HostRoot == "" {
			return cli.Exit("--host-mode nsenter needs --host-root", ExitShimFailed)
		}
	default:
		return cli.Exit(fmt.Sprintf("--host-mode %q: want os or nsenter", cfg.HostMode), ExitShimFailed)
	}
	if cfg.Timeout <= 0 {
		return cli.Exit(fmt.Sprintf("--timeout %s: must be positive", cfg.Timeout), ExitShimFailed)
	}
	if _, err := mcexec.ParseExecMode(cfg.ExecMode); err != nil {
		return cli.Exit("--"+err.Error(), ExitShimFailed)
	}
	return nil
}

// resolver builds the resolver for cfg; the caller closes it.
func (cfg *Config) resolver(stderr io.Writer) *mcexec.Resolver {
	var host utilexec.Interface = newSelfSkippingExec()
	if cfg.HostMode == "nsenter" {
		host = mcexec.NewNsenter(cfg.HostRoot)
	}
	level := slog.LevelWarn
	if cfg.Verbose {
		level = slog.LevelDebug
	}
	mode, _ := mcexec.ParseExecMode(cfg.ExecMode) // checked by check
	return mcexec.NewResolver(mcexec.Options{
		ExecMode: mode,
		Dir:      cfg.RegistrationDir,
		Endpoint: cfg.RuntimeEndpoint,
		Host:     host,
		Timeout:  cfg.Timeout,
		Logger:   slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	})
}
