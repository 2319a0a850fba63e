//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

const (
	csiGlusterNode       = "csi-glusterfs-node"
	csiGlusterController = "csi-glusterfs-controller"
	glusterMountpodDS    = "glusterfs-mountpod"
)

// csiImages builds the images deploy/csi runs (the driver from
// images/csi-driver, the external-provisioner from its module), each
// cached by its inputs, and imports them into the bed's containerd.
func csiImages(t *testing.T, root string) {
	t.Helper()
	images := filepath.Join(root, "test/bed/images.sh")
	run(t, 10*time.Minute, images, "build", "csi-driver", filepath.Join(root, "images/csi-driver/Dockerfile"), root)
	run(t, 20*time.Minute, images, "provisioner")
	run(t, 2*time.Minute, images, "import", "csi-driver", "csi-provisioner")
}

// testCSIDeployed applies deploy/csi/glusterfs as an administrator does
// (test/demo/manifests.sh's overlay points it at the bed's paths and
// images, its driver's commands placed in mode), with the StorageClass of
// deploy/csi/glusterfs/storageclass-example.yaml naming the bed's server
// and volume: the node plugin registers with the kubelet, the controller
// and the upstream external-provisioner provision a claim, and a workload
// streams checksummed lines into it while first the node plugin's
// DaemonSet and then the mount pod's are restarted (kubectl rollout
// restart; the mount pod's set to RollingUpdate, as docs/upgrade.md allows
// where every live mount is scoped): no line lost, no container
// restarted, the workload's pod the same. A claim made after both
// restarts is staged through the new pods, via mode. When the claims are
// deleted, nothing of them is left on the node or the brick.
func (g *glusterEnv) testCSIDeployed(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	ctx := context.Background()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(g.root, "test/demo/manifests.sh"), out)
	cmd.Env = append(os.Environ(), "GLUSTER_NAMESPACE="+g.ns, "BED_DIR="+bed.Env.BedDir, "CSI_EXEC_MODE="+string(mode))
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("manifests.sh: %v\n%s", err, o)
	}
	overlay := filepath.Join(out, "csi-glusterfs")
	start := time.Now()
	bed.ApplyKustomize(t, overlay)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if r := bed.RunKubectl(ctx, "", "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-k", overlay); r.Err != nil {
			t.Logf("delete %s: %v", overlay, r.Err)
		}
	})
	node := bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance="+csiGlusterNode, 1, true, 3*time.Minute)[0]
	bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance="+csiGlusterController, 1, true, 3*time.Minute)
	waitCSINode(t, bed, csiGlusterDriver)
	t.Logf("deploy/csi/glusterfs applied: node plugin %s registered, controller ready, %s after apply", node.Name, time.Since(start).Round(time.Millisecond))

	// The example StorageClass, its server and volume the bed's.
	data, err := os.ReadFile(filepath.Join(g.root, "deploy/csi/glusterfs/storageclass-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sc map[string]any
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		t.Fatal(err)
	}
	scName := "glusterfs-csi-" + string(mode)
	sc["metadata"].(map[string]any)["name"] = scName
	params := sc["parameters"].(map[string]any)
	params["server"], params["volume"] = bed.Env.NodeName, glusterVolume
	data, err = yaml.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	bed.Apply(t, string(data))
	t.Cleanup(func() { bed.Kubectl(t, "delete", "--ignore-not-found", "storageclass", scName) })

	ns := bed.CreateNamespace(t, "csi-deployed")
	claim := func(name string) *corev1.PersistentVolume {
		bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %s
  namespace: %s
spec:
  accessModes: [ReadWriteMany]
  storageClassName: %s
  resources: {requests: {storage: 1Gi}}
`, name, ns, scName))
		return waitClaimBound(t, bed, ns, name)
	}
	pv := claim("stream")
	brickDir := g.brick + "/" + pv.Spec.CSI.VolumeAttributes["subdir"]

	bed.Apply(t, writerDeployment(ns, bed.Env.BaseImage, `      - name: data
        persistentVolumeClaim: {claimName: stream}
      - name: scratch
        emptyDir: {}
`))
	w := bed.WaitPodsBySelector(t, ns, "app=writer", 1, true, 3*time.Minute)[0]
	stream := func(t *testing.T) (int, map[string]int) {
		t.Helper()
		// Read on the brick: what the storage really holds.
		out, _, err := bed.Exec(ctx, 30*time.Second, g.ns, "glusterfs-server", "server", "cat", brickDir+"/stream")
		if err != nil {
			return 0, nil // no stream yet
		}
		return verifyStream(t, []byte(out))
	}
	waitLines := func(t *testing.T, n int) {
		t.Helper()
		if err := framework.Poll(ctx, fmt.Sprintf("%d lines on the brick", n), 250*time.Millisecond, 2*time.Minute,
			func(context.Context) (bool, string, error) {
				got, _ := stream(t)
				return got >= n, fmt.Sprintf("%d lines", got), nil
			}); err != nil {
			t.Fatal(err)
		}
	}
	waitLines(t, 20)
	if n := recordsVia(t, "node plugin "+node.Name, []byte(bed.Kubectl(t, "-n", mountpodNS, "logs", node.Name)), "staged", viaOf(t, mode)); n != 1 {
		t.Fatalf("the node plugin's log shows %d staging mounts of the writer's claim; want 1, via %s", n, viaOf(t, mode))
	}

	// The node plugin's DaemonSet, then the mount pod's, restarted under
	// the writer.
	restart := func(ds string) {
		t.Helper()
		before, _ := stream(t)
		start := time.Now()
		bed.Kubectl(t, "-n", mountpodNS, "rollout", "restart", "ds/"+ds)
		bed.Kubectl(t, "-n", mountpodNS, "rollout", "status", "ds/"+ds, "--timeout=4m")
		waitLines(t, before+20)
		t.Logf("rollout restart of %s done and 20 more lines written %s after it began", ds, time.Since(start).Round(time.Millisecond))
	}
	oldMP := g.mountPod(t)
	restart(csiGlusterNode)
	bed.Kubectl(t, "-n", mountpodNS, "patch", "ds", glusterMountpodDS, "--type=merge",
		"-p", `{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}}}}`)
	t.Cleanup(func() {
		bed.Kubectl(t, "-n", mountpodNS, "patch", "ds", glusterMountpodDS, "--type=json",
			"-p", `[{"op":"replace","path":"/spec/updateStrategy","value":{"type":"OnDelete"}}]`)
	})
	restart(glusterMountpodDS)
	if mp := g.mountPod(t); mp.UID == oldMP.UID {
		t.Fatalf("the mount pod %s was not replaced", mp.Name)
	}
	newNode := bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance="+csiGlusterNode, 1, true, time.Minute)[0]
	if newNode.UID == node.UID {
		t.Fatalf("the node plugin's pod %s was not replaced", node.Name)
	}
	waitCSINode(t, bed, csiGlusterDriver)

	n, writers := stream(t)
	if len(writers) != 1 || writers[w.Name] != n {
		t.Errorf("the stream's %d lines were written by %v; want all by %s", n, writers, w.Name)
	}
	if got := bed.WaitPodsBySelector(t, ns, "app=writer", 1, true, time.Minute)[0]; got.UID != w.UID {
		t.Errorf("the writer's pod %s was replaced by %s", w.Name, got.Name)
	}
	if r := podRestarts(t, bed, ns, w.Name); r != 0 {
		t.Errorf("the writer's containers restarted %d times", r)
	}
	t.Logf("brick stream: %d lines verified, none lost, through both restarts", n)

	// A claim after the restarts: staged by the new node plugin through
	// the new mount pod.
	pv2 := claim("after")
	bed.Apply(t, claimPod("after", ns, bed.Env.BaseImage, "after", 0))
	after := bed.WaitPod(t, ns, "after", true, 3*time.Minute)
	bed.MustExec(t, ns, "after", "main", "sh", "-c", "echo after > /data/after && sync")
	if got := strings.TrimSpace(bed.MustExec(t, g.ns, "glusterfs-server", "server", "cat", g.brick+"/"+pv2.Spec.CSI.VolumeAttributes["subdir"]+"/after")); got != "after" {
		t.Errorf("the claim made after the restarts holds %q on the brick, want %q", got, "after")
	}
	if n := recordsVia(t, "node plugin "+newNode.Name, []byte(bed.Kubectl(t, "-n", mountpodNS, "logs", newNode.Name)), "staged", viaOf(t, mode)); n != 1 {
		t.Fatalf("the new node plugin's log shows %d staging mounts; want 1 (the claim made after the restarts), via %s", n, viaOf(t, mode))
	}

	// Deleted: nothing of either claim is left.
	bed.Kubectl(t, "-n", ns, "delete", "deployment", "writer", "--wait")
	bed.WaitPodGone(t, ns, w.Name, w.UID, 2*time.Minute)
	deleteClaim(t, bed, ns, "stream", pv.Name)
	deleteClaim(t, bed, ns, "after", pv2.Name, after)
	for _, dir := range []string{brickDir, g.brick + "/" + pv2.Spec.CSI.VolumeAttributes["subdir"]} {
		if _, _, err := bed.Exec(ctx, 20*time.Second, g.ns, "glusterfs-server", "server", "test", "-e", dir); err == nil {
			t.Errorf("the volume's directory %s is left on the brick after its claim was deleted", dir)
		}
	}
	if left := csiMounts(t, bed.Env.KubeletRoot, csiGlusterDriver); len(left) != 0 {
		t.Errorf("mounts left on the node: %v", left)
	}
}
