package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
)

// rolloutAction checks the arguments, connects to the API server and runs
// the rollout; its error is a cli.Exit value carrying the exit code.
func rolloutAction(c *cli.Context, stdout, stderr io.Writer) error {
	if err := checkArgs(c); err != nil {
		return err
	}
	rep, err := rollout.NewReporter(stdout, c.String("output"))
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	log, err := logging.FromFlags(c, stderr, exitUsage)
	if err != nil {
		return err
	}
	cfg, client, err := kubeClient(c.String("kubeconfig"), c.String("context"))
	if err != nil {
		return cli.Exit("mountpod-rollout: "+err.Error(), exitUsage)
	}
	exec := &rollout.PodExec{Config: cfg, Client: client,
		MountsCommand: c.StringSlice("mounts-command"), StatusCommand: c.StringSlice("status-command")}
	r := &rollout.Rollout{
		Client:   client,
		Mounts:   exec,
		Status:   exec,
		Progress: rep,
		Logger:   log,
		Options:  optionsFrom(c),
	}
	_, err = r.Run(c.Context)
	return exitFor(err)
}

// checkArgs wants the DaemonSet's name alone after the flags, a usable
// --max-unavailable, a known --strategy and --unscoped, the latter only
// with --strategy in-place.
func checkArgs(c *cli.Context) error {
	if c.NArg() != 1 {
		msg := "mountpod-rollout takes one argument: the DaemonSet's name"
		if c.NArg() > 1 && strings.HasPrefix(c.Args().Get(1), "-") {
			msg += " (flags go before it: mountpod-rollout [flags] DAEMONSET)"
		}
		return cli.Exit(msg, exitUsage)
	}
	if c.Int("max-unavailable") < 1 {
		return cli.Exit("--max-unavailable must be at least 1", exitUsage)
	}
	switch s := rollout.Strategy(c.String("strategy")); s {
	case rollout.StrategyDrain:
		if c.IsSet("unscoped") {
			return cli.Exit("--unscoped applies to --strategy in-place only", exitUsage)
		}
	case rollout.StrategyInPlace:
	default:
		return cli.Exit(fmt.Sprintf("--strategy %q: want %s or %s", s, rollout.StrategyDrain, rollout.StrategyInPlace), exitUsage)
	}
	switch d := c.String("dry-run"); d {
	case dryRunNone, dryRunClient:
	case "server":
		return cli.Exit("--dry-run=server is not supported: each step of a rollout waits for the one before to take effect; --dry-run=client prints the plan", exitUsage)
	default:
		return cli.Exit(fmt.Sprintf("--dry-run %q: want %s or %s", d, dryRunClient, dryRunNone), exitUsage)
	}
	if s := c.String("selector"); s != "" {
		if _, err := labels.Parse(s); err != nil {
			return cli.Exit(fmt.Sprintf("--selector %q: %v", s, err), exitUsage)
		}
	}
	switch u := rollout.UnscopedPolicy(c.String("unscoped")); u {
	case rollout.UnscopedDrain, rollout.UnscopedRefuse:
	default:
		return cli.Exit(fmt.Sprintf("--unscoped %q: want %s or %s", u, rollout.UnscopedDrain, rollout.UnscopedRefuse), exitUsage)
	}
	return nil
}

// kubeClient connects as kubectl would: with the kubeconfig file if set,
// otherwise the files of $KUBECONFIG (a list, merged) or ~/.kube/config,
// otherwise the in-cluster configuration; in kubeContext if set.
func kubeClient(kubeconfig, kubeContext string) (*rest.Config, kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rollout.SetClientDefaults(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, client, nil
}

// exitFor turns the rollout's error into the exit: exitRefused when it
// refused to start (nothing touched), exitFailure otherwise.
func exitFor(err error) error {
	if err == nil {
		return nil
	}
	code := exitFailure
	if rollout.IsRefused(err) {
		code = exitRefused
	}
	return cli.Exit("mountpod-rollout: "+err.Error(), code)
}
