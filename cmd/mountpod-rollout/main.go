// Command mountpod-rollout upgrades the mount pods of an OnDelete DaemonSet
// node by node without breaking live mounts: taint the node, evict the pods
// using the plugin's volumes, wait for their mounts to go, replace the mount
// pod, wait until it is Ready, remove the taint; or, with --strategy
// in-place, replace the mount pod under its live mounts where every one is
// scoped, and check that they survived. See docs/upgrade.md and package
// rollout.
//
// It is a binary of its own, not a subcommand of mountpod, because it needs
// client-go and kubectl's drain package: they would grow the daemon that runs
// on every node from about 5 MB to about 48 MB.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/shared/cliexit"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/internal/shared/version"
)

const (
	// exitFailure: the rollout failed; the node it stopped at stays tainted.
	exitFailure = 1
	// exitUsage: bad flags or configuration.
	exitUsage = 2
	// exitRefused: the rollout refused to start and touched nothing.
	exitRefused = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// envPrefix begins the name of each of the command's variables
// (docs/naming.md), but KUBECONFIG, kubectl's.
const envPrefix = "MOUNTPOD_ROLLOUT_"

// envRenames are its variables' old names, still read and warned of.
var envRenames = []oldnames.Rename{
	{Old: logging.EnvFormat, New: envPrefix + logging.SuffixFormat},
	{Old: logging.EnvLevel, New: envPrefix + logging.SuffixLevel},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	oldnames.Env(stderr, "mountpod-rollout", envRenames)
	app := newApp(stdout, stderr)
	app.HelpName = helpName(args)
	args = currentSpellings(args, app.Flags, stderr)
	return cliexit.Code(stderr, "mountpod-rollout", app.RunContext(ctx, args), exitUsage)
}

// newApp returns the application; its one action is [rolloutAction].
func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "mountpod-rollout",
		Usage:     "Upgrade the mount pods of an OnDelete DaemonSet node by node.",
		ArgsUsage: "[flags] DAEMONSET",
		Version:   version.Version,
		Description: fmt.Sprintf("Upgrade the mount pods of an OnDelete DaemonSet node by node: taint the node, evict the pods using the plugin's volumes, wait for their mounts to go, replace the mount pod, wait until it is Ready, remove the taint; or, with --strategy in-place, replace the mount pod under its live mounts where they are all scoped (docs/upgrade.md). Exit codes: 0 every node done (or the plan printed, with --dry-run=client); %d the rollout failed (the node it stopped at stays tainted: --resume); %d bad flags or configuration; %d refused to start, nothing touched.",
			exitFailure, exitUsage, exitRefused),
		Writer:    stdout,
		ErrWriter: stderr,
		// run, not the library, turns errors into exit codes.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit("mountpod-rollout: "+err.Error(), exitUsage)
		},
		Flags: flags(),
		Action: func(c *cli.Context) error {
			return rolloutAction(c, stdout, stderr)
		},
	}
}

// helpName is how the usage names the command invoked as args[0]: as a
// kubectl plugin (docs/upgrade.md) "kubectl mountpod-rollout" for
// kubectl-mountpod_rollout and "kubectl mountpod rollout" for
// kubectl-mountpod-rollout, kubectl's mapping of file names to commands;
// otherwise mountpod-rollout.
func helpName(args []string) string {
	if len(args) == 0 {
		return "mountpod-rollout"
	}
	base := filepath.Base(args[0])
	if plugin, ok := strings.CutPrefix(base, "kubectl-"); ok && plugin != "" {
		return "kubectl " + strings.ReplaceAll(strings.ReplaceAll(plugin, "-", " "), "_", "-")
	}
	return "mountpod-rollout"
}
