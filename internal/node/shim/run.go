package shim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/node/execclient"
	"github.com/mountcontainers/mountcontainers/internal/shared/cliexit"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

func runCommand(cfg *Config, stdio IO, b Backend) *cli.Command {
	var plugin string
	return &cli.Command{
		Name:      "run",
		Usage:     "Run a utility for a plugin: in its mount pod when that is live, otherwise on the host.",
		ArgsUsage: "-- COMMAND [ARGS...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "plugin", Usage: "Volume plugin name, e.g. kubernetes.io/glusterfs.", Required: true, Destination: &plugin},
		},
		Action: func(c *cli.Context) error {
			argv := c.Args().Slice()
			if len(argv) == 0 {
				return cli.Exit("run: no command given (usage: run --plugin NAME -- COMMAND [ARGS...])", ExitShimFailed)
			}
			return exitWith(b.Run(c.Context, cfg, plugin, argv, stdio))
		},
	}
}

// exitWith turns a code into the error urfave/cli hands back to Main.
func exitWith(code int) error {
	if code == 0 {
		return nil
	}
	return cli.Exit("", code)
}

// A Target is where a utility runs: the host or a mount container.
type Target interface {
	// CommandContext returns the command, bound to ctx.
	CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd
	// OnHost reports whether the command runs on the host.
	OnHost() bool
	// Where names the target in diagnostics: "host" or "container ID".
	Where() string
}

// RunUtility runs argv for plugin on the target resolve returns, within
// cfg.Timeout, and returns the exit code: the utility's own, or one of the
// shim's after a diagnostic on stderr. resolve gets the bounded context.
func RunUtility(ctx context.Context, cfg *Config, plugin string, argv []string, stdio IO, resolve func(context.Context) (Target, error)) int {
	code, _ := runUtility(ctx, cfg, plugin, argv, stdio, resolve)
	return code
}

// runUtility is RunUtility that reports, instead of failing, a command
// through the exec socket that certainly did not start (notStarted): then
// it wrote nothing and read no standard input.
func runUtility(ctx context.Context, cfg *Config, plugin string, argv []string, stdio IO, resolve func(context.Context) (Target, error)) (code int, notStarted bool) {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stdio.Stderr, "%s: %s\n", BinaryName, fmt.Sprintf(format, args...))
		return code
	}
	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	t, err := resolve(tctx)
	if err != nil {
		if tctx.Err() != nil {
			return fail(interruptedOr(ctx, ExitTimeout), "%s: %v", argv[0], err), false
		}
		return fail(ExitShimFailed, "%v", err), false
	}
	cmd := t.CommandContext(tctx, argv[0], argv[1:]...)
	cmd.SetStdout(stdio.Stdout)
	cmd.SetStderr(stdio.Stderr)
	if stdio.Stdin != nil && (t.OnHost() || stdinHasData(stdio.Stdin)) {
		// Through the exec socket a pipe or a non-empty file is streamed
		// to the utility; through ExecSync it fails clearly instead of
		// losing its data. In a container a terminal or /dev/null is not
		// passed on.
		cmd.SetStdin(stdio.Stdin)
	}
	err = cmd.Run()
	if err == nil {
		return 0, false
	}
	if ctx.Err() != nil {
		return fail(interruptedOr(ctx, ExitShimFailed), "%s: interrupted", argv[0]), false
	}
	if tctx.Err() == context.DeadlineExceeded {
		return fail(ExitTimeout, "%s (plugin %s, %s): timed out after %s", argv[0], plugin, t.Where(), cfg.Timeout), false
	}
	if errors.Is(err, execclient.ErrNotStarted) {
		return 0, true
	}
	code = exitCodeOf(err)
	if isExitStatus(err) {
		return code, false // the utility's own code; its stderr said why
	}
	return fail(code, "%s (plugin %s, %s): %v", argv[0], plugin, t.Where(), err), false
}

// interruptedOr returns 130 when ctx was cancelled by a signal, else code.
func interruptedOr(ctx context.Context, code int) int {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return exitInterrupted
	}
	return code
}

// stdinHasData reports whether in may carry input: anything but a
// terminal, a character device such as /dev/null, or an empty regular file.
func stdinHasData(in *os.File) bool {
	fi, err := in.Stat()
	if err != nil {
		return false
	}
	switch {
	case fi.Mode()&os.ModeCharDevice != 0:
		return false
	case fi.Mode().IsRegular():
		return fi.Size() > 0
	}
	return true
}

// multiCall runs the shim invoked under a tool's name: `run --plugin P --
// TOOL args...` with P and the settings recorded at install time; the
// environment overrides the recorded settings.
func multiCall(ctx context.Context, tool string, args []string, stdio IO, b Backend) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "%s (as %s): find own executable: %v\n", BinaryName, tool, err)
		return ExitShimFailed
	}
	dir := filepath.Dir(exe)
	m, ok, err := readMapping(dir)
	if err == nil && !ok {
		err = fmt.Errorf("no %s in %s", MappingFile, dir)
	}
	if err != nil {
		fmt.Fprintf(stdio.Stderr, "%s (as %s): %v\n", BinaryName, tool, err)
		return ExitShimFailed
	}
	plugin, ok := m.Tools[tool]
	if !ok {
		fmt.Fprintf(stdio.Stderr, "%s: invoked as %q, which %s does not map to a plugin\n", BinaryName, tool, filepath.Join(dir, MappingFile))
		return ExitShimFailed
	}
	cfg := &Config{
		RegistrationDir: envOr(oldnames.Vars(EnvRegistrationDir, envRenames), m.RegistrationDir, registration.DefaultDir),
		RuntimeEndpoint: envOr([]string{EnvRuntimeEndpoint}, m.RuntimeEndpoint, ""),
		HostMode:        envOr([]string{EnvHostMode}, m.HostMode, HostModeOS),
		HostRoot:        envOr([]string{EnvHostRoot}, m.HostRoot, "/host"),
		Timeout:         DefaultTimeout,
		Verbose:         os.Getenv(EnvVerbose) != "",
		LogLevel:        os.Getenv(EnvLogLevel),
		LogFormat:       os.Getenv(EnvLogFormat),
		ExecMode:        envOr([]string{EnvExecMode}, "", ExecModes[0]),
	}
	if v := os.Getenv(EnvTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "%s (as %s): %s=%q: %v\n", BinaryName, tool, EnvTimeout, v, err)
			return ExitShimFailed
		}
		cfg.Timeout = d
	}
	if err := cfg.check(); err != nil {
		return cliexit.Code(stdio.Stderr, BinaryName, err, ExitShimFailed)
	}
	return b.Run(ctx, cfg, plugin, append([]string{tool}, args...), stdio)
}

func envOr(names []string, recorded, def string) string {
	for _, name := range names {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	if recorded != "" {
		return recorded
	}
	return def
}
