package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
)

func runApp(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"mountpod-rollout"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// setUnreachableKubeconfig points KUBECONFIG at an API server nobody
// serves.
func setUnreachableKubeconfig(t *testing.T) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
}

// TestUsageErrors: what is wrong before any API call exits 2 with a message
// saying what; no cluster is needed.
func TestUsageErrors(t *testing.T) {
	setUnreachableKubeconfig(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no daemonset", nil, "takes one argument: the DaemonSet's name"},
		{"flags after the name", []string{"ds", "--dry-run"}, "flags go before it"},
		{"unknown flag", []string{"--bogus", "ds"}, "flag provided but not defined"},
		{"bad output", []string{"-o", "yaml", "ds"}, "yaml"},
		{"max-unavailable 0", []string{"--max-unavailable", "0", "ds"}, "--max-unavailable must be at least 1"},
		{"bad strategy", []string{"--strategy", "rolling", "ds"}, `--strategy "rolling": want drain or in-place`},
		{"bad unscoped", []string{"--strategy", "in-place", "--unscoped", "kill", "ds"}, `--unscoped "kill": want drain or refuse`},
		{"unscoped with drain", []string{"--unscoped", "refuse", "ds"}, "--unscoped applies to --strategy in-place only"},
		{"missing kubeconfig", []string{"--kubeconfig", filepath.Join(t.TempDir(), "none"), "ds"}, "kubeconfig"},
		{"unknown context", []string{"--context", "nope", "ds"}, "kubeconfig"},
		{"bad log format", []string{"--log-format", "yaml", "ds"}, `--log-format: log format "yaml": want text or json`},
		{"bad log level", []string{"--log-level", "loud", "ds"}, `--log-level: log level "loud"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runApp(tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("mountpod-rollout %q = %d\nstdout: %s\nstderr: %s\nwant %d and stderr containing %q", tc.args, code, stdout, stderr, exitUsage, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	if code, stdout, _ := runApp("--version"); code != 0 || !strings.Contains(stdout, "mountpod-rollout version") {
		t.Errorf("--version = %d, %q", code, stdout)
	}
}

// TestExitCodes: a refusal (nothing touched) exits 3, a failure 1; the API
// server here is unreachable.
func TestExitCodes(t *testing.T) {
	setUnreachableKubeconfig(t)
	if code, stdout, _ := runApp("--help"); code != 0 ||
		!strings.Contains(stdout, fmt.Sprintf("%d the rollout failed", exitFailure)) || !strings.Contains(stdout, fmt.Sprintf("%d refused to start", exitRefused)) {
		t.Errorf("--help = %d, %s; want 0 and the exit codes listed", code, stdout)
	}
	if code, _, stderr := runApp("-n", "", "ds"); code != exitRefused || !strings.Contains(stderr, "namespace and name are required") {
		t.Errorf("empty namespace = %d, %s; want %d (refused)", code, stderr, exitRefused)
	}
	if code, _, stderr := runApp("ds"); code != exitFailure || !strings.Contains(stderr, "get daemonset "+rollout.DefaultNamespace+"/ds") {
		t.Errorf("unreachable API server = %d, %s; want %d", code, stderr, exitFailure)
	}
}

// TestFlagsToOptions: the flags of the in-place strategy reach the
// rollout's options; their defaults are drain.
func TestFlagsToOptions(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		strategy rollout.Strategy
		unscoped rollout.UnscopedPolicy
	}{
		{[]string{"ds"}, rollout.StrategyDrain, rollout.UnscopedDrain},
		{[]string{"--strategy", "in-place", "ds"}, rollout.StrategyInPlace, rollout.UnscopedDrain},
		{[]string{"--strategy", "in-place", "--unscoped", "refuse", "ds"}, rollout.StrategyInPlace, rollout.UnscopedRefuse},
	} {
		var got rollout.Options
		app := &cli.App{Flags: flags(), Action: func(c *cli.Context) error {
			if err := checkArgs(c); err != nil {
				return err
			}
			got = optionsFrom(c)
			return nil
		}}
		if err := app.Run(append([]string{"mountpod-rollout"}, tc.args...)); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got.Strategy != tc.strategy || got.Unscoped != tc.unscoped || got.Name != "ds" {
			t.Errorf("%q: strategy %q, unscoped %q, name %q", tc.args, got.Strategy, got.Unscoped, got.Name)
		}
	}
}

// TestShortHelp: the usage line is one short line; the details and the
// exit codes are the description.
func TestShortHelp(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	if u := app.Usage; len(u) > 100 || strings.Contains(u, "\n") {
		t.Errorf("usage of %d bytes, want one line of at most 100: %q", len(u), u)
	}
	if !strings.Contains(app.Description, "--strategy in-place") || !strings.Contains(app.Description, "Exit codes:") {
		t.Errorf("description %q, want the details and the exit codes", app.Description)
	}
}
