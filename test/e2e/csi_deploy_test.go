//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
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

// csiDeployment is what testCSIDeployed needs to know of a file system.
type csiDeployment struct {
	bed *framework.Bed
	// helm installs charts/mountcontainers in place of deploy/csi/FS and
	// the plugin's mount pod (helmInstall).
	helm bool
	// fs names deploy/csi/FS, the overlay test/demo/manifests.sh writes
	// (csi-FS) and the driver (FS.mountcontainers.io).
	fs string
	// mountpodDS and mountpodSelect are the file system's mount pod's
	// DaemonSet and its pods' selector, in mountpodNS.
	mountpodDS, mountpodSelect string
	// manifestsEnv is test/demo/manifests.sh's environment for the bed.
	manifestsEnv []string
	// params sets the StorageClass parameters of deploy/csi/FS's example
	// (its servers and names) to the bed's.
	params func(ns string, params map[string]any)
	// setup, when set, runs in the workloads' namespace before the claims
	// (CephFS: the secrets the StorageClass names).
	setup func(t *testing.T, ns string)
	// read returns a file of the volume pv as the storage holds it (or,
	// where the storage has no files to read, as pod in ns, which mounts
	// pv at /data, reads it), an error when it cannot (not there yet).
	read func(t *testing.T, ns, pod string, pv *corev1.PersistentVolume, name string) (string, error)
	// gone reports whether the storage of pv is gone after its claim was
	// deleted, and what is left when not.
	gone func(t *testing.T, pv *corev1.PersistentVolume) (bool, string)
}

func (c *csiDeployment) driver() string { return c.fs + ".mountcontainers.io" }

// helmInstall installs charts/mountcontainers with c's plugin alone, as an
// administrator does with helm (test/tools/tool.sh helm, built from its
// module), in place of the plugin's mount pod that deploy/FS applied: the
// chart's objects are the overlays' (deploy/charts_test.go), so the bed's
// changes to them are test/demo/manifests.sh's, made by the post-renderer
// test/demo/helm-post-render.sh. helm waits for every workload of the
// release to be ready. The release is uninstalled at the end, and the
// mount pod that deploy/FS applied is applied again.
func (c *csiDeployment) helmInstall(t *testing.T, root, out string) {
	t.Helper()
	bed := c.bed
	h := strings.TrimSpace(run(t, 10*time.Minute, filepath.Join(root, "test/tools/tool.sh"), "helm"))
	helm := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, h, append([]string{"--kubeconfig", bed.Env.Kubeconfig}, args...)...)
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
		o, err := cmd.CombinedOutput()
		if err != nil {
			err = fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, o)
		}
		return string(o), err
	}
	const release = "mountcontainers"
	// The plugin's mount pod and its policy are the release's now: the
	// overlay's go first (helm refuses objects it does not own).
	if c.fs != "glusterfs" {
		t.Fatalf("helmInstall: test/demo/manifests.sh writes the post-renderer for glusterfs only, not %s", c.fs)
	}
	// Its objects are those of the overlay running (the same
	// test/demo/manifests.sh environment).
	mountpod := filepath.Join(out, "mountpod")
	bed.DeleteKustomize(t, mountpod, 3*time.Minute)
	t.Cleanup(func() { bed.ApplyKustomize(t, mountpod) })
	// So is the CSIDriver object (TestCSI applies it for its subtests
	// before this one; deploy/csi's removal removes it too).
	bed.Kubectl(t, "delete", "--ignore-not-found", "csidriver", c.driver())
	set := []string{"--set", "plugins.cephfs.enabled=false"}
	if o, err := helm(6*time.Minute, append([]string{"install", release, filepath.Join(root, "charts/mountcontainers"),
		"--namespace", mountpodNS, "--wait", "--timeout", "5m",
		"--post-renderer", filepath.Join(root, "test/demo/helm-post-render.sh"),
		"--post-renderer-args", filepath.Join(out, "helm-"+c.fs), "--post-renderer-args", bed.Env.Kubectl}, set...)...); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("%s", o)
	}
	t.Cleanup(func() {
		if o, err := helm(4*time.Minute, "uninstall", release, "--namespace", mountpodNS, "--wait", "--timeout", "3m"); err != nil {
			t.Error(err)
		} else {
			t.Logf("%s", strings.TrimSpace(o))
		}
		// Nothing of the release is left: no object carries its label.
		for _, kind := range []string{"daemonsets,deployments,serviceaccounts,roles,rolebindings", "clusterroles,clusterrolebindings,csidrivers,validatingadmissionpolicies,validatingadmissionpolicybindings"} {
			args := []string{"get", kind, "-l", "app.kubernetes.io/managed-by=Helm", "-o", "name"}
			if strings.HasPrefix(kind, "daemonsets") {
				args = append(args, "-n", mountpodNS)
			}
			if left := strings.TrimSpace(bed.Kubectl(t, args...)); left != "" {
				t.Errorf("helm uninstall left %s", left)
			}
		}
		// The policy's objects carry no managed-by label (as deploy/policy's).
		vap := c.fs + "-mountcontainers-flexvolume-pv-only"
		if left := strings.TrimSpace(bed.Kubectl(t, "get", "validatingadmissionpolicies,validatingadmissionpolicybindings", vap, "--ignore-not-found", "-o", "name")); left != "" {
			t.Errorf("helm uninstall left %s", left)
		}
	})
	// The release's objects are the chart's: managed by Helm, its
	// mount pod the one that serves the plugin.
	status, err := helm(time.Minute, "status", release, "--namespace", mountpodNS)
	if err != nil || !strings.Contains(status, "STATUS: deployed") {
		t.Fatalf("helm status: %v\n%s", err, status)
	}
	for _, obj := range []string{"ds/" + c.mountpodDS, "ds/csi-" + c.fs + "-node", "deployment/csi-" + c.fs + "-controller"} {
		if got := bed.Kubectl(t, "-n", mountpodNS, "get", obj, "-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by} {.metadata.annotations.meta\.helm\.sh/release-name}`); got != "Helm "+release {
			t.Errorf("%s: managed-by and release %q, want Helm's, release %s", obj, got, release)
		}
	}
	if got := bed.Kubectl(t, "get", "csidriver", c.driver(), "-o", `jsonpath={.metadata.annotations.meta\.helm\.sh/release-name}`); got != release {
		t.Errorf("CSIDriver %s: release %q, want %s", c.driver(), got, release)
	}
}

// testCSIDeployed applies deploy/csi/FS as an administrator does
// (test/demo/manifests.sh's overlay points it at the bed's paths and
// images, its driver's commands placed in mode), with the StorageClass of
// deploy/csi/FS/storageclass-example.yaml naming the bed's servers: the
// node plugin registers with the kubelet, the controller and the upstream
// external-provisioner provision a claim, and a workload streams
// checksummed lines into it while first the node plugin's DaemonSet and
// then the mount pod's are restarted (kubectl rollout restart; the mount
// pod's set to RollingUpdate, as docs/upgrade.md allows where every live
// mount is scoped): no line lost, no container restarted, the workload's
// pod the same. A claim made after both restarts is staged through the new
// pods, via mode. When the claims are deleted, nothing of them is left on
// the node or the storage.
func (c *csiDeployment) testCSIDeployed(t *testing.T, mode mcexec.ExecMode) {
	bed := c.bed
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "test/demo/manifests.sh"), out)
	cmd.Env = append(append(os.Environ(), c.manifestsEnv...), "BED_DIR="+bed.Env.BedDir, "CSI_EXEC_MODE="+string(mode))
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("manifests.sh: %v\n%s", err, o)
	}
	nodeDS, controller := "csi-"+c.fs+"-node", "csi-"+c.fs+"-controller"
	start := time.Now()
	what := "deploy/csi/" + c.fs + " applied"
	if c.helm {
		c.helmInstall(t, root, out)
		what = "charts/mountcontainers installed by helm"
	} else {
		overlay := filepath.Join(out, "csi-"+c.fs)
		bed.ApplyKustomize(t, overlay)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if r := bed.RunKubectl(ctx, "", "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-k", overlay); r.Err != nil {
				t.Logf("delete %s: %v", overlay, r.Err)
			}
		})
	}
	node := bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance="+nodeDS, 1, true, 3*time.Minute)[0]
	bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance="+controller, 1, true, 3*time.Minute)
	waitCSINode(t, bed, c.driver())
	t.Logf("%s: node plugin %s registered, controller ready, %s after it began", what, node.Name, time.Since(start).Round(time.Millisecond))

	ns := bed.CreateNamespace(t, "csi-deployed")
	if c.setup != nil {
		c.setup(t, ns)
	}
	// The example StorageClass, its servers the bed's.
	data, err := os.ReadFile(filepath.Join(root, "deploy/csi", c.fs, "storageclass-example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sc map[string]any
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		t.Fatal(err)
	}
	scName := c.fs + "-csi-" + string(mode)
	sc["metadata"].(map[string]any)["name"] = scName
	c.params(ns, sc["parameters"].(map[string]any))
	data, err = yaml.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	bed.Apply(t, string(data))
	t.Cleanup(func() { bed.Kubectl(t, "delete", "--ignore-not-found", "storageclass", scName) })

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
	bed.Apply(t, writerDeployment(ns, bed.Env.BaseImage, `      - name: data
        persistentVolumeClaim: {claimName: stream}
      - name: scratch
        emptyDir: {}
`))
	w := bed.WaitPodsBySelector(t, ns, "app=writer", 1, true, 3*time.Minute)[0]
	stream := func(t *testing.T) (int, map[string]int) {
		t.Helper()
		out, err := c.read(t, ns, w.Name, pv, "stream")
		if err != nil {
			return 0, nil // no stream yet
		}
		return verifyStream(t, []byte(out))
	}
	waitLines := func(t *testing.T, n int) {
		t.Helper()
		if err := framework.Poll(ctx, fmt.Sprintf("%d lines in the stored stream", n), 250*time.Millisecond, 2*time.Minute,
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
		t.Logf("rollout restart of %s done and 20 more lines stored %s after it began", ds, time.Since(start).Round(time.Millisecond))
	}
	oldMP := bed.WaitPodsBySelector(t, mountpodNS, c.mountpodSelect, 1, true, time.Minute)[0]
	restart(nodeDS)
	bed.Kubectl(t, "-n", mountpodNS, "patch", "ds", c.mountpodDS, "--type=merge",
		"-p", `{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}}}}`)
	t.Cleanup(func() {
		bed.Kubectl(t, "-n", mountpodNS, "patch", "ds", c.mountpodDS, "--type=json",
			"-p", `[{"op":"replace","path":"/spec/updateStrategy","value":{"type":"OnDelete"}}]`)
	})
	restart(c.mountpodDS)
	if mp := bed.WaitPodsBySelector(t, mountpodNS, c.mountpodSelect, 1, true, time.Minute)[0]; mp.UID == oldMP.UID {
		t.Fatalf("the mount pod %s was not replaced", mp.Name)
	}
	newNode := bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance="+nodeDS, 1, true, time.Minute)[0]
	if newNode.UID == node.UID {
		t.Fatalf("the node plugin's pod %s was not replaced", node.Name)
	}
	waitCSINode(t, bed, c.driver())

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
	t.Logf("stored stream: %d lines verified, none lost, through both restarts", n)

	// A claim after the restarts: staged by the new node plugin through
	// the new mount pod.
	pv2 := claim("after")
	bed.Apply(t, claimPod("after", ns, bed.Env.BaseImage, "after", 0))
	after := bed.WaitPod(t, ns, "after", true, 3*time.Minute)
	bed.MustExec(t, ns, "after", "main", "sh", "-c", "echo after > /data/after && sync")
	if got, err := c.read(t, ns, "after", pv2, "after"); err != nil || strings.TrimSpace(got) != "after" {
		t.Errorf("the claim made after the restarts holds %q (%v) on the storage, want %q", got, err, "after")
	}
	if n := recordsVia(t, "node plugin "+newNode.Name, []byte(bed.Kubectl(t, "-n", mountpodNS, "logs", newNode.Name)), "staged", viaOf(t, mode)); n != 1 {
		t.Fatalf("the new node plugin's log shows %d staging mounts; want 1 (the claim made after the restarts), via %s", n, viaOf(t, mode))
	}

	// Deleted: nothing of either claim is left.
	bed.Kubectl(t, "-n", ns, "delete", "deployment", "writer", "--wait")
	bed.WaitPodGone(t, ns, w.Name, w.UID, 2*time.Minute)
	deleteClaim(t, bed, ns, "stream", pv.Name)
	deleteClaim(t, bed, ns, "after", pv2.Name, after)
	for _, p := range []*corev1.PersistentVolume{pv, pv2} {
		if ok, left := c.gone(t, p); !ok {
			t.Errorf("the storage of %s is left after its claim was deleted: %s", p.Name, left)
		}
	}
	if left := csiMounts(t, bed.Env.KubeletRoot, c.driver()); len(left) != 0 {
		t.Errorf("mounts left on the node: %v", left)
	}
}

// csiDeployment returns the GlusterFS CSI driver's deployment on g's
// server and mount pod.
func (g *glusterEnv) csiDeployment() *csiDeployment {
	bed := g.bed
	brickDir := func(pv *corev1.PersistentVolume) string {
		return g.brick + "/" + pv.Spec.CSI.VolumeAttributes["subdir"]
	}
	return &csiDeployment{
		bed: bed, fs: "glusterfs", mountpodDS: "glusterfs-mountpod", mountpodSelect: mountpodSelect,
		manifestsEnv: []string{"GLUSTER_NAMESPACE=" + g.ns},
		params: func(_ string, p map[string]any) {
			p["server"], p["volume"] = bed.Env.NodeName, glusterVolume
		},
		// On the brick: what the storage really holds.
		read: func(t *testing.T, _, _ string, pv *corev1.PersistentVolume, name string) (string, error) {
			out, _, err := bed.Exec(context.Background(), 30*time.Second, g.ns, "glusterfs-server", "server", "cat", brickDir(pv)+"/"+name)
			return out, err
		},
		gone: func(t *testing.T, pv *corev1.PersistentVolume) (bool, string) {
			_, _, err := bed.Exec(context.Background(), 20*time.Second, g.ns, "glusterfs-server", "server", "test", "-e", brickDir(pv))
			return err != nil, "the directory " + brickDir(pv) + " on the brick"
		},
	}
}

// csiDeployment returns the CephFS CSI driver's deployment on c's Ceph
// server and mount pod: claims are subvolumes of group csi-deployed,
// provisioned as client.csi-provisioner (mon 'allow r' mgr 'allow rw', the
// StorageClass example's user), staged with the client's key.
func (c *cephfsEnv) csiDeployment() *csiDeployment {
	bed := c.bed
	const group = "csi-deployed"
	return &csiDeployment{
		bed: bed, fs: "cephfs", mountpodDS: "cephfs-mountpod", mountpodSelect: cephfsSelect,
		manifestsEnv: []string{"CEPH_MONITORS=" + bed.Env.NodeIP, "CSI_SECRETS_DIR=" + c.secrets},
		// The provisioner's user as deploy/csi/cephfs/storageclass-example.yaml
		// makes it: the least the volumes module needs.
		setup: func(t *testing.T, ns string) {
			key := strings.TrimSpace(bed.MustExec(t, c.srv.ns, "ceph-server", "server", "sh", "-c",
				"ceph auth get-or-create client.csi-provisioner mon 'allow r' mgr 'allow rw' >/dev/null && ceph auth get-key client.csi-provisioner"))
			for name, data := range map[string]map[string]string{
				"ceph-provisioner": {"user": "csi-provisioner", "key": key},
				"ceph-node":        {"key": c.srv.key},
			} {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
				if _, err := bed.Client.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		},
		params: func(ns string, p map[string]any) {
			p["monitors"], p["subvolumeGroup"], p["user"] = bed.Env.NodeIP+":6789", group, cephClientID
			p["csi.storage.k8s.io/provisioner-secret-namespace"], p["csi.storage.k8s.io/node-stage-secret-namespace"] = ns, ns
		},
		// CephFS's objects are no files to read on the server: read
		// through the pod's mount.
		read: func(t *testing.T, ns, pod string, _ *corev1.PersistentVolume, name string) (string, error) {
			out, _, err := bed.Exec(context.Background(), 30*time.Second, ns, pod, "main", "cat", "/data/"+name)
			return out, err
		},
		gone: func(t *testing.T, pv *corev1.PersistentVolume) (bool, string) {
			h := pv.Spec.CSI.VolumeHandle
			sub := h[strings.LastIndex(h, "/")+1:]
			left := c.subvolumes(t, group)
			return !slices.Contains(left, sub), fmt.Sprintf("subvolume %s in group %s (%v)", sub, group, left)
		},
	}
}
