package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
)

// TestOldSpellings: the old spellings of --dry-run and -l still work, as
// what they meant, and warn once each; the current ones do not warn.
func TestOldSpellings(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		dryRun      bool
		podSelector string
		warns       []string
	}{
		{[]string{"--dry-run", "ds"}, true, "", []string{"--dry-run without a value is deprecated: use --dry-run=client"}},
		{[]string{"-dry-run", "--dry-run=true", "ds"}, true, "", []string{"--dry-run without a value is deprecated"}},
		{[]string{"--dry-run=false", "ds"}, false, "", []string{"--dry-run=false is deprecated: use --dry-run=none"}},
		{[]string{"-l", "app=x", "ds"}, false, "app=x", []string{"-l is deprecated: use --pod-selector"}},
		{[]string{"-l=app=y", "--dry-run", "ds"}, true, "app=y", []string{"-l is deprecated", "--dry-run without a value"}},
		{[]string{"--l", "app=w", "ds"}, false, "app=w", []string{"-l is deprecated"}},
		// A value that looks like a flag is a value; the name ends the flags.
		{[]string{"--pod-selector", "-l", "--context", "--dry-run", "ds", "--dry-run"}, false, "-l", nil},
		{[]string{"--dry-run=client", "--pod-selector", "app=z", "ds"}, true, "app=z", nil},
		{[]string{"--dry-run=none", "ds"}, false, "", nil},
	} {
		var stderr strings.Builder
		args := currentSpellings(append([]string{"mountpod-rollout"}, tc.args...), flags(), &stderr)
		for _, w := range tc.warns {
			if strings.Count(stderr.String(), w) != 1 {
				t.Errorf("%q: stderr %q, want %q once", tc.args, stderr.String(), w)
			}
		}
		if tc.warns == nil && stderr.Len() != 0 {
			t.Errorf("%q: warned %q, want nothing", tc.args, stderr.String())
		}
		if tc.args[0] == "--pod-selector" {
			if !slices.Equal(args[1:], tc.args) {
				t.Errorf("%q: rewritten as %q, want as it was", tc.args, args[1:])
			}
			continue
		}
		var got rollout.Options
		app := &cli.App{Flags: flags(), ExitErrHandler: func(*cli.Context, error) {}, Action: func(c *cli.Context) error {
			if err := checkArgs(c); err != nil {
				return err
			}
			got = optionsFrom(c)
			return nil
		}}
		if err := app.Run(args); err != nil {
			t.Fatalf("%q (as %q): %v", tc.args, args, err)
		}
		if got.DryRun != tc.dryRun || got.PodSelector != tc.podSelector || got.Name != "ds" {
			t.Errorf("%q: dry run %v, pod selector %q, name %q; want %v, %q, ds", tc.args, got.DryRun, got.PodSelector, got.Name, tc.dryRun, tc.podSelector)
		}
	}
}

// TestDryRunAndSelectorValues: --dry-run=server and unknown values, and a
// selector that does not parse, are usage errors naming them.
func TestDryRunAndSelectorValues(t *testing.T) {
	setUnreachableKubeconfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dry-run=server", "ds"}, "--dry-run=server is not supported"},
		{[]string{"--dry-run=maybe", "ds"}, `--dry-run "maybe": want client or none`},
		{[]string{"--selector", "a=(", "ds"}, `--selector "a=("`},
	} {
		code, _, stderr := runApp(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q = %d, %s; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	var got rollout.Options
	app := &cli.App{Flags: flags(), ExitErrHandler: func(*cli.Context, error) {}, Action: func(c *cli.Context) error {
		got = optionsFrom(c)
		return checkArgs(c)
	}}
	if err := app.Run([]string{"mountpod-rollout", "--selector", "zone in (a,b)", "ds"}); err != nil || got.NodeSelector != "zone in (a,b)" {
		t.Errorf("--selector: %v, node selector %q", err, got.NodeSelector)
	}
}
