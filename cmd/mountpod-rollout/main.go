// Command mountpod-rollout upgrades the mount pods of an OnDelete DaemonSet
// node by node without breaking live mounts: taint the node, evict the pods
// using the plugin's volumes, wait for their mounts to go, replace the mount
// pod, wait until it is Ready, remove the taint. See docs/upgrade.md and
// package rollout.
//
// It is a binary of its own, not a subcommand of mountpod, because it needs
// client-go and kubectl's drain package: they would grow the daemon that runs
// on every node from about 5 MB to about 48 MB.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mountcontainers/mountcontainers/internal/cliexit"
	"github.com/mountcontainers/mountcontainers/internal/rollout"
	"github.com/mountcontainers/mountcontainers/internal/version"
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cliexit.Code(stderr, "mountpod-rollout", newApp(stdout, stderr).RunContext(ctx, args), exitUsage)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:      "mountpod-rollout",
		Usage:     "Upgrade the mount pods of an OnDelete DaemonSet node by node: taint the node, evict the pods using the plugin's volumes, wait for their mounts to go, replace the mount pod, wait until it is Ready, remove the taint (docs/upgrade.md).",
		ArgsUsage: "[flags] DAEMONSET",
		Version:   version.Version,
		Writer:    stdout,
		ErrWriter: stderr,
		// run, not the library, turns errors into exit codes.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit("mountpod-rollout: "+err.Error(), exitUsage)
		},
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kubeconfig", EnvVars: []string{"KUBECONFIG"}, Usage: "Kubeconfig file (in-cluster configuration if empty and running in a pod)."},
			&cli.StringFlag{Name: "context", Usage: "Kubeconfig context to use."},
			&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Value: "kube-system", Usage: "Namespace of the DaemonSet."},
			&cli.IntFlag{Name: "max-unavailable", Value: 1, Usage: "How many nodes to upgrade at once."},
			&cli.BoolFlag{Name: "dry-run", Usage: "Print the plan (nodes, pods to evict) and change nothing."},
			&cli.BoolFlag{Name: "resume", Usage: "Continue a failed or interrupted rollout (its nodes first)."},
			&cli.BoolFlag{Name: "all-pods", Usage: "Evict every pod of the node that is not a DaemonSet's or a mirror pod."},
			&cli.StringFlag{Name: "pod-selector", Aliases: []string{"l"}, Usage: "Also evict the pods matching this label selector."},
			&cli.StringSliceFlag{Name: "plugin", Usage: "Volume plugin the mount pod serves (default: the DaemonSet's MOUNTPOD_PLUGINS)."},
			&cli.StringSliceFlag{Name: "driver", Usage: "flexVolume or CSI driver whose volumes the mount pod serves, such as mountcontainers.io/glusterfs; repeatable."},
			&cli.StringSliceFlag{Name: "mount-fstype", Usage: "Also wait for the mounts of this file-system type to go, such as fuse.glusterfs; repeatable."},
			&cli.StringSliceFlag{Name: "mount-pattern", Usage: "Also wait for the mounts whose mount point matches this regular expression; repeatable."},
			&cli.StringSliceFlag{Name: "mounts-command", Usage: "Command run in the mount pod that prints its mountinfo (default: cat /proc/self/mountinfo); repeat for each word."},
			&cli.StringFlag{Name: "container", Usage: "The mount pod's container (default: the first)."},
			&cli.BoolFlag{Name: "force", Usage: "Also evict selected pods that no controller owns (they will not come back)."},
			&cli.IntFlag{Name: "grace-period", Value: -1, Usage: "Termination grace period of evicted pods in seconds; -1 keeps each pod's own."},
			&cli.DurationFlag{Name: "drain-timeout", Value: 5 * time.Minute, Usage: "Bound of a node's evictions; a PodDisruptionBudget that forbids one makes it expire."},
			&cli.DurationFlag{Name: "unmount-timeout", Value: 3 * time.Minute, Usage: "Bound of the wait for the plugin's mounts to go."},
			&cli.DurationFlag{Name: "ready-timeout", Value: 5 * time.Minute, Usage: "Bound of the old mount pod's deletion and of its replacement's readiness."},
			&cli.DurationFlag{Name: "evict-retry-delay", Value: 5 * time.Second, Usage: "Pause before asking again for an eviction a PodDisruptionBudget refused."},
			&cli.DurationFlag{Name: "poll-interval", Value: 2 * time.Second, Usage: "How often waits look again."},
			&cli.DurationFlag{Name: "lock-lease", Value: time.Minute, Usage: "Lifetime of the rollout lock without renewal."},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "Progress format: text, or json (one object per line)."},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				msg := "mountpod-rollout takes one argument: the DaemonSet's name"
				if c.NArg() > 1 && strings.HasPrefix(c.Args().Get(1), "-") {
					msg += " (flags go before it: mountpod-rollout [flags] DAEMONSET)"
				}
				return cli.Exit(msg, exitUsage)
			}
			rep, err := rollout.NewReporter(stdout, c.String("output"))
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = c.String("kubeconfig")
			cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
				&clientcmd.ConfigOverrides{CurrentContext: c.String("context")}).ClientConfig()
			if err != nil {
				return cli.Exit(fmt.Sprintf("mountpod-rollout: kubeconfig: %v", err), exitUsage)
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return cli.Exit(fmt.Sprintf("mountpod-rollout: %v", err), exitUsage)
			}
			grace := c.Int("grace-period")
			r := &rollout.Rollout{
				Client:   client,
				Mounts:   &rollout.PodExecMounts{Config: cfg, Client: client, Command: c.StringSlice("mounts-command")},
				Progress: rep,
				Logger:   newLogger(stderr),
				Options: rollout.Options{
					Namespace:       c.String("namespace"),
					Name:            c.Args().First(),
					MaxUnavailable:  c.Int("max-unavailable"),
					DryRun:          c.Bool("dry-run"),
					Resume:          c.Bool("resume"),
					AllPods:         c.Bool("all-pods"),
					PodSelector:     c.String("pod-selector"),
					Plugins:         c.StringSlice("plugin"),
					Drivers:         c.StringSlice("driver"),
					MountFSTypes:    c.StringSlice("mount-fstype"),
					MountPatterns:   c.StringSlice("mount-pattern"),
					Container:       c.String("container"),
					Force:           c.Bool("force"),
					GracePeriod:     &grace,
					DrainTimeout:    c.Duration("drain-timeout"),
					UnmountTimeout:  c.Duration("unmount-timeout"),
					ReadyTimeout:    c.Duration("ready-timeout"),
					PollInterval:    c.Duration("poll-interval"),
					EvictRetryDelay: c.Duration("evict-retry-delay"),
					LockLease:       c.Duration("lock-lease"),
				},
			}
			if c.Int("max-unavailable") < 1 {
				return cli.Exit("--max-unavailable must be at least 1", exitUsage)
			}
			_, err = r.Run(c.Context)
			if err == nil {
				return nil
			}
			code := exitFailure
			var re *rollout.Error
			if errors.As(err, &re) && re.Kind == rollout.Refused {
				code = exitRefused
			}
			return cli.Exit("mountpod-rollout: "+err.Error(), code)
		},
	}
}

// newLogger logs text records to w.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}
