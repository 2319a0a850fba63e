package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
)

// flags are the command's flags.
func flags() []cli.Flag {
	return append([]cli.Flag{
		// kubectl's connection flags with kubectl's meanings, so that the
		// command works as a kubectl plugin (docs/upgrade.md); only the
		// namespace's default differs: the mount pods' (deploy/namespace).
		&cli.StringFlag{Name: "kubeconfig", Usage: "Path to the kubeconfig file; without it $KUBECONFIG (a list of files, merged) or ~/.kube/config, else the in-cluster configuration when running in a pod."},
		&cli.StringFlag{Name: "context", Usage: "The name of the kubeconfig context to use (default: its current-context)."},
		&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Value: rollout.DefaultNamespace, Usage: "Namespace of the DaemonSet."},
		&cli.IntFlag{Name: "max-unavailable", Value: 1, Usage: "How many nodes to upgrade at once."},
		&cli.StringFlag{Name: "strategy", Value: string(rollout.StrategyDrain), Usage: "How a node's mount pod is replaced: drain (taint the node, evict the pods using the plugin's volumes, wait until their mounts are gone, replace the pod, remove the taint), or in-place (where every live mount is scoped, replace the pod under them, without taint or eviction, and check that they all survived)."},
		&cli.StringFlag{Name: "unscoped", Value: string(rollout.UnscopedDrain), Usage: "With --strategy in-place, what to do on a node with a live mount that is not scoped (it would die with the mount pod): drain that node, or refuse (the node fails untouched, naming the mounts)."},
		&cli.StringFlag{Name: "dry-run", Value: dryRunNone, Usage: `"client": print the plan (nodes, pods to evict) and change nothing, or "none", as kubectl's --dry-run; "server" is refused (each step of a rollout waits for the one before to take effect). A bare --dry-run, the old spelling, means client and warns.`},
		&cli.StringFlag{Name: "selector", Usage: "Upgrade only the nodes whose labels match this selector, as kubectl drain's --selector (default: every node of the DaemonSet). Not -l: -l is still --pod-selector's old short name, deprecated."},
		&cli.BoolFlag{Name: "resume", Usage: "Continue a failed or interrupted rollout (its nodes first)."},
		&cli.BoolFlag{Name: "all-pods", Usage: "Evict every pod of the node that is not a DaemonSet's or a mirror pod."},
		&cli.StringFlag{Name: "pod-selector", Aliases: []string{"l"}, Usage: "Also evict the pods matching this label selector. Its short name -l is deprecated and warns: kubectl drain's -l selects nodes (here --selector)."},
		&cli.StringSliceFlag{Name: "plugin", Usage: "Volume plugin the mount pod serves (default: the DaemonSet's MOUNTPOD_PLUGINS)."},
		&cli.StringSliceFlag{Name: "driver", Usage: "flexVolume or CSI driver whose volumes the mount pod serves, such as mountcontainers.io/glusterfs; repeatable. The flexVolume driver the DaemonSet installs (MOUNTPOD_INSTALL_FLEXVOLUME_DIR, MOUNTPOD_FLEXVOLUME_DRIVER) is always included."},
		&cli.StringSliceFlag{Name: "mount-fstype", Usage: "Also wait for the mounts of this file-system type to go, such as fuse.glusterfs; repeatable."},
		&cli.StringSliceFlag{Name: "mount-pattern", Usage: "Also wait for the mounts whose mount point matches this regular expression; repeatable."},
		&cli.StringSliceFlag{Name: "mounts-command", Usage: "Command run in the mount pod that prints its mountinfo (default: cat /proc/self/mountinfo); repeat for each word."},
		&cli.StringSliceFlag{Name: "status-command", Usage: "Command run in the mount pod that prints its live-mount report as JSON (default: /usr/local/bin/mountpod status -o json); repeat for each word."},
		&cli.StringFlag{Name: "container", Usage: "The mount pod's container (default: the first)."},
		&cli.BoolFlag{Name: "force", Usage: "Also evict selected pods that no controller owns (they will not come back)."},
		&cli.BoolFlag{Name: "delete-emptydir-data", Usage: "Also evict selected pods with emptyDir volumes, whose data is deleted with them; without it such a pod fails the node's drain (the node stays fenced until --resume)."},
		&cli.IntFlag{Name: "grace-period", Value: -1, Usage: "Termination grace period of evicted pods in seconds; -1 keeps each pod's own."},
		&cli.DurationFlag{Name: "drain-timeout", Value: 5 * time.Minute, Usage: "Bound of a node's evictions; a PodDisruptionBudget that forbids one makes it expire."},
		&cli.DurationFlag{Name: "unmount-timeout", Value: 3 * time.Minute, Usage: "Bound of the wait for the plugin's mounts to go, and of reading a mount pod's live mounts (in-place)."},
		&cli.DurationFlag{Name: "delete-timeout", Value: 5 * time.Minute, Usage: "Bound of the old mount pod's deletion (its containers' stop included)."},
		&cli.DurationFlag{Name: "ready-timeout", Value: 5 * time.Minute, Usage: "Bound of the replacement mount pod's readiness."},
		&cli.DurationFlag{Name: "evict-retry-delay", Value: 5 * time.Second, Usage: "Pause before asking again for an eviction a PodDisruptionBudget refused."},
		&cli.DurationFlag{Name: "poll-interval", Value: 2 * time.Second, Usage: "How often waits look again."},
		&cli.DurationFlag{Name: "lock-lease", Value: time.Minute, Usage: "Duration of the rollout lock, a Lease named after the DaemonSet in its namespace (whole seconds): another rollout takes it over once it has seen it unrenewed that long. It is renewed every sixth of it; after two thirds of it without a successful renewal this rollout stops acting."},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "Progress format: text, or json (one object per line)."},
	}, logging.Flags(envPrefix)...)
}

// optionsFrom returns the rollout's options for the flags and argument of c.
func optionsFrom(c *cli.Context) rollout.Options {
	grace := c.Int("grace-period")
	return rollout.Options{
		Namespace:          c.String("namespace"),
		Name:               c.Args().First(),
		MaxUnavailable:     c.Int("max-unavailable"),
		Strategy:           rollout.Strategy(c.String("strategy")),
		Unscoped:           rollout.UnscopedPolicy(c.String("unscoped")),
		DryRun:             c.String("dry-run") == dryRunClient,
		Resume:             c.Bool("resume"),
		AllPods:            c.Bool("all-pods"),
		PodSelector:        c.String("pod-selector"),
		NodeSelector:       c.String("selector"),
		Plugins:            c.StringSlice("plugin"),
		Drivers:            c.StringSlice("driver"),
		MountFSTypes:       c.StringSlice("mount-fstype"),
		MountPatterns:      c.StringSlice("mount-pattern"),
		Container:          c.String("container"),
		Force:              c.Bool("force"),
		DeleteEmptyDirData: c.Bool("delete-emptydir-data"),
		GracePeriod:        &grace,
		DrainTimeout:       c.Duration("drain-timeout"),
		UnmountTimeout:     c.Duration("unmount-timeout"),
		DeleteTimeout:      c.Duration("delete-timeout"),
		ReadyTimeout:       c.Duration("ready-timeout"),
		PollInterval:       c.Duration("poll-interval"),
		EvictRetryDelay:    c.Duration("evict-retry-delay"),
		LockLease:          c.Duration("lock-lease"),
	}
}
