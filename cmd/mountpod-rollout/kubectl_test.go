package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestHelpName(t *testing.T) {
	for args0, want := range map[string]string{
		"mountpod-rollout":                        "mountpod-rollout",
		"/usr/local/bin/mountpod-rollout":         "mountpod-rollout",
		"/usr/local/bin/kubectl-mountpod_rollout": "kubectl mountpod-rollout",
		"kubectl-mountpod-rollout":                "kubectl mountpod rollout",
		"kubectl-":                                "mountpod-rollout",
	} {
		if got := helpName([]string{args0}); got != want {
			t.Errorf("helpName(%q) = %q, want %q", args0, got, want)
		}
	}
}

// TestKubectlPlugin: invoked as kubectl runs it, the command takes
// kubectl's --kubeconfig, --context and -n and names itself as kubectl
// users type it.
func TestKubectlPlugin(t *testing.T) {
	setUnreachableKubeconfig(t)
	bin := filepath.Join(t.TempDir(), "kubectl-mountpod_rollout")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{bin, "--kubeconfig", os.Getenv("KUBECONFIG"), "--context", "x", "-n", "y", "--help"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("--help = %d, stderr %s", code, errOut.String())
	}
	for _, want := range []string{"USAGE:\n   kubectl mountpod-rollout ", "--kubeconfig value", "--context value", "--namespace value, -n value"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}

	var ctxName, namespace string
	app := &cli.App{Flags: flags(), Action: func(c *cli.Context) error {
		ctxName, namespace = c.String("context"), c.String("namespace")
		return nil
	}}
	if err := app.Run([]string{bin, "--context", "x", "-n", "y", "ds"}); err != nil || ctxName != "x" || namespace != "y" {
		t.Errorf("--context x -n y: %v, context %q, namespace %q", err, ctxName, namespace)
	}
}

// TestKubeconfigAsKubectl: $KUBECONFIG is a list of files, merged, as
// kubectl reads it; --kubeconfig names one file; --context picks a context.
func TestKubeconfigAsKubectl(t *testing.T) {
	setUnreachableKubeconfig(t) // context x: https://127.0.0.1:1
	one := os.Getenv("KUBECONFIG")
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte(`apiVersion: v1
kind: Config
clusters: [{name: d, cluster: {server: "https://127.0.0.2:2"}}]
users: [{name: v, user: {token: "t"}}]
contexts: [{name: z, context: {cluster: d, user: v}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent")+":"+other+":"+one)
	for _, tc := range []struct{ kubeconfig, context, host string }{
		{"", "", "https://127.0.0.1:1"},  // current-context of the merged files
		{"", "z", "https://127.0.0.2:2"}, // a context of another file of the list
		{one, "", "https://127.0.0.1:1"},
	} {
		cfg, _, err := kubeClient(tc.kubeconfig, tc.context)
		if err != nil || cfg.Host != tc.host {
			t.Errorf("kubeClient(%q, %q): %v, host %v; want %s", tc.kubeconfig, tc.context, err, cfg, tc.host)
		}
	}
	if _, _, err := kubeClient(other, "x"); err == nil {
		t.Errorf("--kubeconfig %s --context x: no error, though that file has no context x", other)
	}
}
