//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestRealRuntime runs pkg/exec's TestRealRuntime against the bed's
// containerd, in the container of a pod the kubelet runs (a kubelet kills
// the sandboxes it did not create), and fails if it skipped or did not
// run: what the unit tests check against the fake runtime is checked
// against a real one in every CI run.
func TestRealRuntime(t *testing.T) {
	bed := framework.Current(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ns := bed.CreateNamespace(t, "realruntime")
	// Restart policy Never: the test stops the container at the end.
	bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: target
  namespace: %s
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: %s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
`, ns, bed.Env.BaseImage))
	pod := bed.WaitPod(t, ns, "target", true, 2*time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^TestRealRuntime$", "-v", "./pkg/exec/")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"MC_TEST_CRI_ENDPOINT="+bed.Env.CRIEndpoint,
		"MC_TEST_POD_NAMESPACE="+ns, "MC_TEST_POD_NAME="+pod.Name, "MC_TEST_POD_UID="+string(pod.UID),
		"MC_TEST_CONTAINER=main")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("go test -run TestRealRuntime ./pkg/exec/ (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("pkg/exec's TestRealRuntime failed: %v", err)
	}
	switch s := string(out); {
	case strings.Contains(s, "--- SKIP"):
		t.Fatal("pkg/exec's TestRealRuntime skipped (a part) against the bed's runtime")
	case !strings.Contains(s, "--- PASS: TestRealRuntime "):
		t.Fatal("pkg/exec's TestRealRuntime did not run")
	}
}
