//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestRolloutGlusterfs upgrades the glusterfs mount pod of deploy/glusterfs
// with mountpod-rollout while a workload streams checksummed lines into a
// GlusterFS volume mounted through that mount pod: the workload is evicted,
// the mount pod replaced, the taint removed, the workload runs again, and
// every line written before, during and after the rollout verifies.
func TestRolloutGlusterfs(t *testing.T) {
	bed := framework.Current(t)
	g := setupGlusterfs(t, bed)
	bin := buildRollout(t)
	sa := rolloutServiceAccount(t, bed, mountpodNS, "-"+g.ns)
	const ds = "glusterfs-mountpod"
	t.Cleanup(func() { bed.RemoveTaints(t, rollout.TaintKey, "") })
	newTag := tagMountpodImage(t, bed, "rollout-"+g.ns)

	bed.Apply(t, writerDeployment(g.ns, bed.Env.BaseImage, fmt.Sprintf(`      - name: data
        flexVolume:
          driver: %s
          options: {server: %q, volume: %s}
      - name: scratch
        emptyDir: {}
`, glusterDriver, bed.Env.NodeName, glusterVolume)))
	// Before the mount pod and the server go (cleanups run last first):
	// the workload, so that its volume is unmounted while they still serve.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if r := bed.RunKubectl(ctx, "", "-n", g.ns, "delete", "deployment", "writer", "--wait", "--timeout=90s"); r.Err != nil {
			t.Logf("delete writer: %v", r.Err)
		}
		_ = framework.Poll(ctx, "writer pods gone", 250*time.Millisecond, 90*time.Second,
			func(ctx context.Context) (bool, string, error) {
				pods, err := bed.Client.CoreV1().Pods(g.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writer"})
				if err != nil {
					return false, err.Error(), nil
				}
				return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
			})
	})
	oldW := bed.WaitPodsBySelector(t, g.ns, "app=writer", 1, true, 2*time.Minute)[0]
	stream := func(t *testing.T) (int, map[string]int) {
		t.Helper()
		// Read on the brick: what the storage really holds.
		out := bed.MustExec(t, g.ns, "glusterfs-server", "server", "cat", g.brick+"/stream")
		return verifyStream(t, []byte(out))
	}
	waitLines := func(t *testing.T, n int) {
		t.Helper()
		err := framework.Poll(context.Background(), fmt.Sprintf("%d lines on the brick", n), 250*time.Millisecond, 2*time.Minute,
			func(context.Context) (bool, string, error) {
				got, _ := stream(t)
				return got >= n, fmt.Sprintf("%d lines", got), nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitLines(t, 20)
	oldMP := g.mountPod(t)

	bed.Kubectl(t, "-n", mountpodNS, "set", "image", "ds/"+ds, "mount="+newTag)
	before, _ := stream(t)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// No --driver: the rollout infers the Flexvolume driver the DaemonSet
	// installs, and must drain its workload before the mount pod goes.
	cmd := exec.CommandContext(ctx, bin, "-n", mountpodNS, "--poll-interval", "500ms",
		"--drain-timeout", "2m", "--unmount-timeout", "2m", "--ready-timeout", "2m",
		"--delete-emptydir-data", // the writer's error log is scratch space
		ds)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+sa.Path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("mountpod-rollout finished in %s: %v\nstdout:\n%s\nstderr:\n%s", time.Since(start).Round(time.Millisecond), err, stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("mountpod-rollout: %v", err)
	}

	// The node is open again, the mount pod replaced by the new image's,
	// registered, and the workload back on its volume.
	if taints := bed.Taints(t, rollout.TaintKey, ""); len(taints) > 0 {
		t.Errorf("the node is still tainted: %v", taints)
	}
	mp := g.mountPod(t)
	if mp.UID == oldMP.UID || mp.Spec.Containers[0].Image != newTag {
		t.Errorf("mount pod %s (image %s) after the rollout, was %s", mp.Name, mp.Spec.Containers[0].Image, oldMP.Name)
	}
	reg, ok, err := registration.Read(bed.Env.RegistrationDir, "kubernetes.io/glusterfs")
	if err != nil || !ok || reg.PodUID != string(mp.UID) {
		t.Errorf("registration %+v (%v, %v) does not name the new mount pod %s", reg, ok, err, mp.UID)
	}
	w := bed.WaitPodsBySelector(t, g.ns, "app=writer", 1, true, 2*time.Minute)[0]
	if w.UID == oldW.UID {
		t.Fatal("the workload was not evicted")
	}
	waitLines(t, before+20)
	n, writers := stream(t)
	if writers[oldW.Name] == 0 || writers[w.Name] == 0 {
		t.Errorf("writers %v: want lines of both %s and %s", writers, oldW.Name, w.Name)
	}
	t.Logf("brick stream: %d lines verified (%d before the rollout), writers %v", n, before, writers)
	// The old pod's mount went through the old mount pod, the new one
	// through the new mount pod: no FUSE mount of the workload is left
	// without its daemon.
	if fs := hostMount(t, g.volumeDir(&oldW)); fs != "" {
		t.Errorf("the evicted workload's volume is still mounted (%s)", fs)
	}
	if fs := hostMount(t, g.volumeDir(&w)); fs != "fuse.glusterfs" {
		t.Errorf("the new workload's volume is mounted as %q, want fuse.glusterfs", fs)
	}
}

// buildRollout builds mountpod-rollout for the test.
func buildRollout(t *testing.T) string {
	t.Helper()
	return buildCmd(t, "mountpod-rollout")
}

// tagMountpodImage gives the mount-pod image a new tag in the containerd of
// every node of the bed, for an upgrade, and removes it when the test ends.
func tagMountpodImage(t *testing.T, bed *framework.Bed, tag string) string {
	t.Helper()
	newTag := strings.TrimSuffix(bed.Env.MountpodImage, ":dev") + ":" + tag
	for _, node := range bed.Env.Nodes {
		ctr := exec.Command("ctr", "-a", node.CRISocket, "-n", "k8s.io", "images", "tag", "--force", bed.Env.MountpodImage, newTag)
		if out, err := ctr.CombinedOutput(); err != nil {
			t.Fatalf("ctr images tag (node %s): %v\n%s", node.Name, err, out)
		}
		t.Cleanup(func() {
			_ = exec.Command("ctr", "-a", node.CRISocket, "-n", "k8s.io", "images", "rm", newTag).Run()
		})
	}
	return newTag
}
