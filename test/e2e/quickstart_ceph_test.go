//go:build e2e && e2e_quickstart

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// qsCeph is docs/quickstart.md's CephFS on the bed: the bed's Ceph and
// the reader's settings for it.
type qsCeph struct {
	env      *cephfsEnv
	settings map[string]string
}

// quickstartCeph starts the bed's Ceph, writes the two users' keys into
// files (as an administrator hands them over: the provisioner's is
// client.admin, the nodes' the client the server authorized on the file
// system), mounts the bed's secrets tmpfs, and appends the cephfs mount
// pod's bed paths (cephfsOverlay's patches, without the image pull policy
// and the monitors: the quickstart's own) to the post-renderer's
// kustomization at kustomization.
func quickstartCeph(t *testing.T, bed *framework.Bed, root, kustomization string) *qsCeph {
	t.Helper()
	c := &cephfsEnv{bed: bed, srv: startCephServer(t, bed)}
	c.secrets = bedSecretsDir(t, bed)
	keys := t.TempDir()
	q := &qsCeph{env: c, settings: map[string]string{
		"CEPH_MONITORS": bed.Env.NodeIP, "CEPH_FS": "cephfs",
		"CEPH_PROVISIONER_USER": "admin", "CEPH_PROVISIONER_KEY": filepath.Join(keys, "csi-provisioner.key"),
		"CEPH_NODE_USER": cephClientID, "CEPH_NODE_KEY": filepath.Join(keys, "csi-node.key"),
	}}
	for file, key := range map[string]string{q.settings["CEPH_PROVISIONER_KEY"]: c.srv.adminKey, q.settings["CEPH_NODE_KEY"]: c.srv.key} {
		if err := os.WriteFile(file, []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	overlay, err := os.ReadFile(filepath.Join(cephfsOverlay(t, bed, root, c.secrets), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, patches, ok := strings.Cut(string(overlay), "\npatches:\n")
	if !ok {
		t.Fatalf("cephfsOverlay wrote no patches:\n%s", overlay)
	}
	var keep []string
	for _, l := range strings.Split(patches, "\n") {
		if strings.Contains(l, "imagePullPolicy") || strings.Contains(l, "ALLOWED_SERVERS") || strings.Contains(l, "/env/12/value") || strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		keep = append(keep, l)
	}
	f, err := os.OpenFile(kustomization, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(keep, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	return q
}

// check checks section 5's result: its last command printed a line of the
// writer's; the claim is bound to a CephFS volume, a subvolume of the
// bed's file system in the group csi; the node plugin staged it through
// the cephfs mount pod's exec socket; the cephfs pods run the pushed
// images. It returns the volume's name.
func (q *qsCeph) check(t *testing.T, bed *framework.Bed, out, registry string) string {
	t.Helper()
	ctx := context.Background()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last == "" || strings.Contains(last, "quickstart") {
		t.Errorf("section 5's output ends in %q, not a line of the writer's", last)
	}
	pvc, err := bed.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "quickstart-cephfs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := bed.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != "cephfs.mountcontainers.io" {
		t.Fatalf("the claim's volume %s: %v, %+v; want one of cephfs.mountcontainers.io", pvc.Spec.VolumeName, err, pv)
	}
	handle := pv.Spec.CSI.VolumeHandle
	subvolume := handle[strings.LastIndex(handle, "/")+1:]
	if !slices.Contains(q.env.subvolumes(t, "csi"), subvolume) {
		t.Errorf("the volume's subvolume %s (handle %s) is not in the group csi of the bed's file system", subvolume, handle)
	}
	node := bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance=csi-cephfs-node", 1, true, time.Minute)[0]
	if n := recordsVia(t, "node plugin "+node.Name, []byte(bed.Kubectl(t, "-n", mountpodNS, "logs", node.Name)), "staged", mcexec.ViaSocket); n != 1 {
		t.Errorf("the cephfs node plugin's log shows %d staging mounts; want the claim's one, via %s", n, mcexec.ViaSocket)
	}
	for _, sel := range []string{"app.kubernetes.io/instance=cephfs-mountpod", "app.kubernetes.io/instance=csi-cephfs-node"} {
		pod := bed.WaitPodsBySelector(t, mountpodNS, sel, 1, true, time.Minute)[0]
		if c := pod.Spec.Containers[0]; !strings.HasPrefix(c.Image, registry+"/mountcontainers/") || !strings.Contains(c.Image, "@sha256:") {
			t.Errorf("pod %s runs %s; want an image of %s pinned by digest", pod.Name, c.Image, registry)
		}
	}
	// The key is on the node's tmpfs while the volume is mounted, and
	// nowhere in the node plugin's log.
	if bytes.Contains([]byte(bed.Kubectl(t, "-n", mountpodNS, "logs", node.Name)), []byte(q.env.srv.key)) {
		t.Error("the nodes' key is in the node plugin's log")
	}
	t.Logf("the CephFS claim is subvolume %s, staged through the exec socket", subvolume)
	return pv.Name
}

// checkRemoved checks the removal took the CephFS volume, its subvolume
// and the namespace of the keys.
func (q *qsCeph) checkRemoved(t *testing.T, bed *framework.Bed, pv string) {
	t.Helper()
	if _, err := bed.Client.CoreV1().PersistentVolumes().Get(context.Background(), pv, metav1.GetOptions{}); err == nil {
		t.Errorf("PersistentVolume %s left", pv)
	}
	if left := q.env.subvolumes(t, "csi"); len(left) != 0 {
		t.Errorf("subvolumes left in the group csi: %v", left)
	}
	if _, err := bed.Client.CoreV1().Namespaces().Get(context.Background(), "ceph-keys", metav1.GetOptions{}); err == nil {
		t.Error("namespace ceph-keys left (it may still be terminating)")
	}
}
