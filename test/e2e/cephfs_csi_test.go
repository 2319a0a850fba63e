//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// cephfsDriverArgs are the CephFS CSI driver's arguments on the bed, its
// controller on: the file system, the monitors allowed and the secrets
// directory.
func (c *cephfsEnv) cephfsDriverArgs() []string {
	return []string{"--filesystem", "cephfs", "--allowed-servers", c.bed.Env.NodeIP, "--secrets-dir", c.secrets}
}

// testCSISanity runs csi-sanity against the CephFS driver, its controller
// on (volumes are subvolumes of the bed's CephFS, made with client.admin's
// key, mounted with the client's), through each exec path.
func (c *cephfsEnv) testCSISanity(t *testing.T, bin string) {
	bed := c.bed
	child := sanityChild{
		Params:            map[string]string{"monitors": bed.Env.NodeIP + ":6789", "fs": "cephfs", "user": cephClientID, "subvolumeGroup": "csi-sanity"},
		ControllerSecrets: map[string]string{"key": c.srv.adminKey},
		NodeSecrets:       map[string]string{"key": c.srv.key},
	}
	runCSISanity(t, bed, "cephfs-", child, func(t *testing.T, logPath, dir string, mode mcexec.ExecMode) string {
		sock := filepath.Join(dir, "csi.sock")
		startDriverProcess(t, bin, logPath, sock, append(c.cephfsDriverArgs(), "--node-id", bed.Env.NodeName,
			"--kubelet-dir", bed.Env.KubeletRoot, "--endpoint", sock, "--register=false", "--controller",
			"--work-dir", filepath.Join(dir, "controller"), "--registration-dir", bed.Env.RegistrationDir,
			"--runtime-endpoint", bed.Env.CRIEndpoint, "--exec-mode", string(mode), "--log-format", "json", "--log-level", "debug")...)
		return sock
	})
	if left := c.subvolumes(t, "csi-sanity"); len(left) != 0 {
		t.Errorf("subvolumes left in group csi-sanity after csi-sanity: %v", left)
	}
	if left := c.secretFiles(t); len(left) != 0 {
		t.Errorf("key files left in %s: %v", c.secrets, left)
	}
}

// subvolumes lists the subvolumes of group in the bed's CephFS, asking the
// Ceph server (none when the group does not exist).
func (c *cephfsEnv) subvolumes(t *testing.T, group string) []string {
	t.Helper()
	out, stderr, err := c.bed.Exec(context.Background(), 30*time.Second, c.srv.ns, "ceph-server", "server",
		"ceph", "fs", "subvolume", "ls", "cephfs", "--group_name", group, "--format", "json")
	if err != nil {
		if strings.Contains(stderr, "ENOENT") {
			return nil
		}
		t.Fatalf("ceph fs subvolume ls cephfs --group_name %s: %v %s", group, err, stderr)
	}
	var list []struct{ Name string }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ceph fs subvolume ls cephfs --group_name %s printed %q: %v", group, out, err)
	}
	var names []string
	for _, sv := range list {
		names = append(names, sv.Name)
	}
	return names
}

// testCSIProvisioning runs the real external-provisioner and the CephFS
// driver's controller on the node: a claim of a StorageClass naming the
// bed's CephFS is bound to a new subvolume of it (its quota the claim's
// size), made by the ceph tool in the mount pod with client.admin's key
// from the provisioner secret; two pods share it read-write through a
// mount made as the client with the node-stage secret; deleting the claim
// removes the subvolume, and no key is left in a file, an argv or a log.
func (c *cephfsEnv) testCSIProvisioning(t *testing.T, bin, provisioner string, mode mcexec.ExecMode) {
	bed := c.bed
	ctx := context.Background()
	name := "cephfs-provisioning-" + string(mode)
	logPath := startProvisioner(t, bed, bin, provisioner, name, mode, csiCephDriver, c.cephfsDriverArgs()...)

	const group = "csi-e2e"
	adminSecret := "ceph-admin-" + string(mode)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: adminSecret, Namespace: c.ns}, StringData: map[string]string{"key": c.srv.adminKey}}
	if _, err := bed.Client.CoreV1().Secrets(c.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc, claim := c.ns+"-"+string(mode), "data-"+string(mode)
	bed.Apply(t, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %[1]s
provisioner: %[2]s
parameters:
  monitors: %[3]q
  fs: cephfs
  subvolumeGroup: %[4]s
  user: %[5]s
  csi.storage.k8s.io/provisioner-secret-name: %[6]s
  csi.storage.k8s.io/provisioner-secret-namespace: %[7]s
  csi.storage.k8s.io/node-stage-secret-name: %[8]s
  csi.storage.k8s.io/node-stage-secret-namespace: %[7]s
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[9]s
  namespace: %[7]s
spec:
  accessModes: [ReadWriteMany]
  storageClassName: %[1]s
  resources: {requests: {storage: 1Gi}}
`, sc, csiCephDriver, bed.Env.NodeIP+":6789", group, cephClientID, adminSecret, c.ns, cephfsSecret, claim))
	t.Cleanup(func() { bed.Kubectl(t, "delete", "--ignore-not-found", "storageclass", sc) })
	pv := waitClaimBound(t, bed, c.ns, claim)
	pvName := pv.Name
	handle, attrs := pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.VolumeAttributes
	subvolume := handle[strings.LastIndex(handle, "/")+1:]
	if want := bed.Env.NodeIP + ":6789/cephfs/" + group + "/" + subvolume; handle != want || !strings.HasPrefix(attrs["path"], "/volumes/"+group+"/"+subvolume+"/") {
		t.Fatalf("the provisioned volume %s: handle %q, attributes %v; want %q and a path of that subvolume", pvName, handle, attrs, want)
	}
	info := bed.MustExec(t, c.srv.ns, "ceph-server", "server", "ceph", "fs", "subvolume", "info", "cephfs", subvolume, "--group_name", group, "--format", "json")
	if quota, err := cephfs.ParseQuota([]byte(info)); err != nil || quota != 1<<30 {
		t.Fatalf("subvolume %s/%s: quota %d (%v); want 1Gi: %s", group, subvolume, quota, err, info)
	}

	// Two pods share it read-write, the second as another user.
	for i, pod := range []string{"writer-" + string(mode), "reader-" + string(mode)} {
		bed.Apply(t, claimPod(pod, c.ns, bed.Env.BaseImage, claim, 1000+i))
	}
	writer := bed.WaitPod(t, c.ns, "writer-"+string(mode), true, 3*time.Minute)
	reader := bed.WaitPod(t, c.ns, "reader-"+string(mode), true, 3*time.Minute)
	content := "provisioned on CephFS through " + string(mode)
	bed.MustExec(t, c.ns, writer.Name, "main", "sh", "-c", `printf '%s' "$1" > /data/hello && sync`, "sh", content)
	if got := bed.MustExec(t, c.ns, reader.Name, "main", "sh", "-c", `cat /data/hello && echo more > /data/from-reader`); got != content {
		t.Fatalf("the second pod reads %q, want %q", got, content)
	}
	if n := stagedVia(t, logPath, viaOf(t, mode)); n != 1 {
		t.Fatalf("the driver's log %s shows %d staging mounts for two pods on one node; want 1, via %s", logPath, n, viaOf(t, mode))
	}

	if n := ranVia(t, logPath, viaOf(t, mode)); n < 4 {
		t.Fatalf("the driver's log %s records %d runs of the ceph tool; want at least 4 (info, subvolumegroup create, create, getpath), each via %s", logPath, n, viaOf(t, mode))
	}

	// Deleted: the claim's volume and its subvolume go.
	deleteClaim(t, bed, c.ns, claim, pvName, writer, reader)
	if left := c.subvolumes(t, group); len(left) != 0 {
		t.Errorf("subvolumes left in group %s after the claim was deleted: %v", group, left)
	}
	if left := csiMounts(t, bed.Env.KubeletRoot, csiCephDriver); len(left) != 0 {
		t.Errorf("mounts left on the node: %v", left)
	}
	if left := c.secretFiles(t); len(left) != 0 {
		t.Errorf("key files left in %s: %v", c.secrets, left)
	}
	for _, log := range []string{logPath, filepath.Join(bed.Env.LogDir, "csi-provisioner-"+name+".log")} {
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), c.srv.adminKey) || strings.Contains(string(data), c.srv.key) {
			t.Errorf("%s holds a key", log)
		}
	}
}

// conformanceVars makes the provisioner secret (client.admin's key) beside
// the node-stage secret (the client's) in the test's namespace, and returns
// test/conformance/cephfs's variables.
func (c *cephfsEnv) conformanceVars(t *testing.T) map[string]string {
	t.Helper()
	const adminSecret = "ceph-admin-conformance"
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: adminSecret, Namespace: c.ns}, StringData: map[string]string{"key": c.srv.adminKey}}
	if _, err := c.bed.Client.CoreV1().Secrets(c.ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"CEPH_MONITORS": c.bed.Env.NodeIP + ":6789", "CEPH_USER": cephClientID,
		"SECRETS_NAMESPACE": c.ns, "PROVISIONER_SECRET": adminSecret, "NODE_STAGE_SECRET": cephfsSecret,
	}
}
