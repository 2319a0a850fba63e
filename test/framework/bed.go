package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Bed is a running test bed.
type Bed struct {
	Env    *Env
	Config *rest.Config
	Client kubernetes.Interface
}

// Connect returns a Bed for the env file at path.
func Connect(path string) (*Bed, error) {
	env, err := LoadEnv(path)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", env.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create clientset: %w", err)
	}
	return &Bed{Env: env, Config: cfg, Client: cs}, nil
}

// Healthy reports whether the bed's API server answers /readyz.
func (b *Bed) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("api server /readyz: %w", err)
	}
	if strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("api server /readyz: %q", body)
	}
	if _, err := b.Env.NodeInit(); err != nil {
		return fmt.Errorf("the systemd node: %w", err)
	}
	return nil
}

// KubectlResult is the outcome of one kubectl run.
type KubectlResult struct {
	Stdout, Stderr string
	Err            error
}

// RunKubectl runs the bed's kubectl with its admin kubeconfig, feeding stdin
// (may be empty), and returns what it printed. It never fails the test.
func (b *Bed) RunKubectl(ctx context.Context, stdin string, args ...string) KubectlResult {
	cmd := exec.CommandContext(ctx, b.Env.Kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+b.Env.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return KubectlResult{Stdout: out.String(), Stderr: errb.String(), Err: err}
}

// Kubectl runs kubectl (bounded to 2 minutes) and fails the test if it fails.
// It returns kubectl's standard output.
func (b *Bed) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := b.RunKubectl(ctx, "", args...)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r.Stdout
}

// Apply applies a YAML manifest given as text (kubectl apply -f -).
func (b *Bed) Apply(t testing.TB, manifest string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if r := b.RunKubectl(ctx, manifest, "apply", "-f", "-"); r.Err != nil {
		t.Fatalf("apply manifest: %v\n%s", r.Err, manifest)
	}
}

// ApplyFile applies a manifest file or directory (kubectl apply -f).
func (b *Bed) ApplyFile(t testing.TB, path string) {
	t.Helper()
	b.Kubectl(t, "apply", "-f", path)
}

// ApplyKustomize applies a kustomization directory (kubectl apply -k).
func (b *Bed) ApplyKustomize(t testing.TB, dir string) {
	t.Helper()
	b.Kubectl(t, "apply", "-k", dir)
}

// DeleteManifest deletes what a manifest describes and waits for it to go
// (kubectl delete --wait, bounded to timeout). Missing objects are fine.
func (b *Bed) DeleteManifest(t testing.TB, manifest string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	r := b.RunKubectl(ctx, manifest, "delete", "--ignore-not-found", "--wait", "--timeout", timeout.String(), "-f", "-")
	if r.Err != nil {
		t.Fatalf("delete manifest: %v", r.Err)
	}
}

// DeleteKustomize deletes what a kustomization directory renders and waits
// for it to go, dependents first (kubectl delete -k --cascade=foreground
// --wait, bounded to timeout): a DaemonSet's pods are gone when it returns.
// Missing objects are fine.
func (b *Bed) DeleteKustomize(t testing.TB, dir string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	r := b.RunKubectl(ctx, "", "delete", "--ignore-not-found", "--cascade=foreground", "--wait", "--timeout", timeout.String(), "-k", dir)
	if r.Err != nil {
		t.Fatalf("delete -k %s: %v", dir, r.Err)
	}
}

// Exec runs a command in a pod's container with kubectl exec (bounded to
// timeout) and returns its standard output and error; err is non-nil when the
// command or kubectl failed.
func (b *Bed) Exec(ctx context.Context, timeout time.Duration, namespace, pod, container string, command ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"exec", "-n", namespace, pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	args = append(args, "--")
	args = append(args, command...)
	r := b.RunKubectl(ctx, "", args...)
	return r.Stdout, r.Stderr, r.Err
}

// MustExec is Exec that fails the test when the command fails.
func (b *Bed) MustExec(t testing.TB, namespace, pod, container string, command ...string) string {
	t.Helper()
	out, _, err := b.Exec(context.Background(), time.Minute, namespace, pod, container, command...)
	if err != nil {
		t.Fatalf("exec in %s/%s: %v", namespace, pod, err)
	}
	return out
}

// DumpOnFailure registers a cleanup that, if the test failed, logs the state
// of namespace's pods and events and the tail of the kubelet's log.
func (b *Bed) DumpOnFailure(t testing.TB, namespace string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, args := range [][]string{
			{"get", "pods", "-n", namespace, "-o", "wide"},
			{"get", "events", "-n", namespace, "--sort-by=.lastTimestamp"},
		} {
			r := b.RunKubectl(ctx, "", args...)
			t.Logf("kubectl %s:\n%s%s", strings.Join(args, " "), r.Stdout, r.Stderr)
		}
		t.Logf("kubelet log tail:\n%s", TailFile(b.Env.LogDir+"/kubelet.log", 30))
	})
}

// TailFile returns the last n lines of a file, or a note saying why not.
func TailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
