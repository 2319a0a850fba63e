// Command mountpod is the daemon of a MountContainers mount pod: it
// registers the pod's container as the carrier of volume plugins' utilities
// and keeps the registrations in place while it runs. See package
// github.com/mountcontainers/mountcontainers/internal/pod/registrar.
//
// In the image it runs under tini ("tini -- mountpod serve"): tini is PID 1
// and reaps the orphans of utilities that daemonize, such as FUSE clients.
//
// A FUSE daemon started through the image's mount helpers runs in a cgroup
// of its own outside the container (cmd/mount-scope), so that it outlives
// the pod; see package
// github.com/mountcontainers/mountcontainers/internal/pod/scope and
// docs/scopes.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/shared/cliexit"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	mcversion "github.com/mountcontainers/mountcontainers/internal/shared/version"
)

// version is the build's version; see package version.
var version = mcversion.Version

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	go func() {
		// A second signal kills at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args, os.Stdout, os.Stderr))
}

// run runs the application and returns the exit code. The old names of
// its flags and variables still work, and warn (docs/naming.md).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	oldnames.Env(stderr, "mountpod", envRenames)
	args = oldnames.Flags(stderr, "mountpod", args, flagRenames)
	return cliexit.Code(stderr, "mountpod", newApp(stdout, stderr).RunContext(ctx, args), exitUsage)
}

// envRegistrationDir is --registration-dir's variable.
const envRegistrationDir = "MOUNTPOD_REGISTRATION_DIR"

// envRenames are the variables renamed to MOUNTPOD_ and the flag's name;
// flagRenames the flags renamed to say what they take.
var (
	envRenames = []oldnames.Rename{
		{Old: "POD_NAMESPACE", New: "MOUNTPOD_POD_NAMESPACE"},
		{Old: "POD_NAME", New: "MOUNTPOD_POD_NAME"},
		{Old: "POD_UID", New: "MOUNTPOD_POD_UID"},
		{Old: "CONTAINER_NAME", New: "MOUNTPOD_CONTAINER_NAME"},
		{Old: "PLUGIN_CONTAINERS_DIR", New: envRegistrationDir},
		{Old: logging.EnvFormat, New: "MOUNTPOD_" + logging.SuffixFormat},
		{Old: logging.EnvLevel, New: "MOUNTPOD_" + logging.SuffixLevel},
	}
	flagRenames = []oldnames.Rename{
		{Old: "plugin", New: "plugins"},
		{Old: "require-tool", New: "require-tools"},
		{Old: "install-flexvolume", New: "install-flexvolume-dir"},
		{Old: "install-shim", New: "install-shim-dir"},
	}
)

const (
	// exitFailure: the daemon failed, or check found the pod not ready.
	exitFailure = 1
	// exitUsage: bad flags or configuration.
	exitUsage = 2
)

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "mountpod",
		Usage:   "Register this container as the carrier of volume plugins' utilities (MountContainers).",
		Version: version,
		Description: fmt.Sprintf("Exit codes: 0 done; %d serve failed, check found the pod not ready, status could not survey the mounts, reattach failed, or uninstall found the node in use or could not remove a path; %d bad flags or configuration, or a batch exec-batch refused. "+
			"exec-batch exits 0 once it printed every command's result, whatever their exit codes.", exitFailure, exitUsage),
		Writer:    stdout,
		ErrWriter: stderr,
		Commands:  []*cli.Command{serveCommand(stderr), checkCommand(stdout), statusCommand(stdout), reattachCommand(), execBatchCommand(stdout), uninstallCommand()},
		// main, not the library, turns errors into exit codes.
		ExitErrHandler: func(*cli.Context, error) {},
	}
}
