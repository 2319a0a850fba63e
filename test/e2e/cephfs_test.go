//go:build e2e

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// CephFS for a workload on real parts: the Ceph server pod of TestCephRBD,
// the cephfs mount pod of deploy/cephfs, and workloads whose flexVolume
// names mountcontainers.io/cephfs with the user's key in a secretRef. The
// same proofs as GlusterFS's: a workload writes and reads, a second client
// sees the data, on both exec paths (asserted from the driver's log); the
// ceph-fuse daemon runs in its scope and lives on when the mount pod is
// deleted; a killed ceph-fuse comes back inside the running workload; and
// the key is never in an argv, a record or a file left behind.

const (
	cephfsPlugin = "kubernetes.io/cephfs"
	cephfsDriver = "mountcontainers.io/cephfs"
	cephfsSelect = "app.kubernetes.io/instance=cephfs-mountpod"
	// cephfsSecret holds the client's key as "key", the way the kubelet
	// hands a flexVolume's secretRef to its driver.
	cephfsSecret = "ceph-client-key"
	cephfsWrong  = "ceph-wrong-key"
)

type cephfsEnv struct {
	bed     *framework.Bed
	srv     *cephServer
	ns      string // the workloads'
	driver  string // the installed driver
	secrets string // the secrets directory (a tmpfs), as the node sees it
	lastErr string // of the last failed read of a stream
}

func TestCephFS(t *testing.T) {
	bed := framework.Current(t)
	c := setupCephFS(t, bed)
	t.Run("WorkloadAndSecondClient", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { c.testWorkload(t, mode) })
		}
	})
	t.Run("WrongKeyFails", c.testWrongKey)
	t.Run("ScopedDaemonOutlivesMountPod", c.testOutlivesMountPod)
	t.Run("KilledDaemonComesBack", c.testRecovery)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	csiDriver := filepath.Join(root, "deploy/csi/cephfs/csidriver.yaml")
	bed.ApplyFile(t, csiDriver)
	t.Cleanup(func() { bed.Kubectl(t, "delete", "--ignore-not-found", "-f", csiDriver) })
	bin := buildCmd(t, "csi-driver")
	t.Run("CSIStaticVolume", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { c.testCSIVolume(t, bin, mode) })
		}
	})
	t.Run("CSISanity", func(t *testing.T) { c.testCSISanity(t, bin) })
	t.Run("CSIProvisioning", func(t *testing.T) {
		provisioner := csiProvisioner(t, root)
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { c.testCSIProvisioning(t, bin, provisioner, mode) })
		}
	})
	// Last: deleting the deployed driver deletes its CSIDriver object.
	t.Run("CSIDeployed", func(t *testing.T) {
		csiImages(t, root)
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { c.csiDeployment().testCSIDeployed(t, mode) })
		}
	})
}

func setupCephFS(t *testing.T, bed *framework.Bed) *cephfsEnv {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &cephfsEnv{bed: bed, srv: startCephServer(t, bed)}
	c.ns = bed.CreateNamespace(t, "cephfs")
	for name, key := range map[string]string{cephfsSecret: c.srv.key, cephfsWrong: c.srv.otherKey} {
		// The kubelet hands a flexVolume only a Secret whose type is the
		// driver's name.
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns}, Type: cephfsDriver, StringData: map[string]string{"key": key}}
		if _, err := bed.Client.CoreV1().Secrets(c.ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	c.secrets = bedSecretsDir(t, bed)

	overlay := cephfsOverlay(t, bed, root, c.secrets)
	start := time.Now()
	applyMountpodNamespace(t, bed, root)
	bed.ApplyKustomize(t, overlay)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if r := bed.RunKubectl(ctx, "", "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-k", overlay); r.Err != nil {
			t.Logf("delete cephfs mount pod: %v", r.Err)
		}
		_ = os.RemoveAll(filepath.Join(bed.Env.VolumePluginDir, "mountcontainers.io~cephfs"))
	})
	mp := bed.WaitPodsBySelector(t, mountpodNS, cephfsSelect, 1, true, 2*time.Minute)[0]
	c.waitRegistered(t, mp.UID)
	// Before the mount pod goes: every scope of the test's mounts (those
	// unmounted, and those whose mount failed) removed by its survey.
	t.Cleanup(func() {
		parent := cmp.Or(bed.Env.Vars["BED_SCOPE_PARENT"], "mountcontainers-bed")
		var left []string
		if err := framework.Poll(context.Background(), "the cephfs scopes removed", 250*time.Millisecond, time.Minute,
			func(context.Context) (bool, string, error) {
				left = slices.DeleteFunc(scopeDirs(t, parent), func(d string) bool {
					// cgroupfs: .../kubernetes.io~cephfs/mount-*; systemd:
					// ...-kubernetes.io-cephfs.slice/mount-*.scope.
					return !strings.Contains(d, "/kubernetes.io~cephfs/") && !strings.Contains(d, "-kubernetes.io-cephfs.slice/")
				})
				return len(left) == 0, fmt.Sprint(left), nil
			}); err != nil {
			t.Error(err)
		}
	})
	c.driver = filepath.Join(bed.Env.VolumePluginDir, "mountcontainers.io~cephfs", "cephfs")
	if err := framework.Poll(context.Background(), "driver "+c.driver, 200*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			_, err := os.Stat(c.driver)
			return err == nil, fmt.Sprint(err), nil
		}); err != nil {
		t.Fatal(err)
	}
	t.Logf("cephfs mount pod from deploy/cephfs ready, registered, its driver installed in %s", time.Since(start).Round(time.Millisecond))
	s, err := flexvolume.LoadSettings(c.driver, func(string) string { return "" })
	if err != nil || s.Filesystem != cephfs.FSType || s.Plugin != cephfsPlugin || s.SecretsDir != c.secrets {
		t.Fatalf("the installed driver's settings: %+v, %v; want cephfs, %s, secrets in %s", s, err, cephfsPlugin, c.secrets)
	}
	return c
}

// bedSecretsDir mounts the bed's secrets directory and returns it: on a
// node, /run/mountcontainers/secrets on the tmpfs /run; on the bed, a
// tmpfs of its own (on a systemd node, in the node's mount namespace),
// unmounted at the test's end.
func bedSecretsDir(t *testing.T, bed *framework.Bed) string {
	t.Helper()
	dir := filepath.Join(bed.Env.BedDir, "run-secrets")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	nodeRun(t, bed.Env, "mount", "-t", "tmpfs", "-o", "size=1m,mode=0700,nosuid,nodev,noexec", "mcbed-secrets", dir)
	t.Cleanup(func() {
		if out, err := nodeTry(bed.Env, "umount", dir); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
		_ = os.Remove(dir)
	})
	return dir
}

// cephfsOverlay writes an overlay of the real deploy/cephfs that points it
// at the bed's paths (as test/demo/manifests.sh does for deploy/glusterfs)
// and runs the locally built image.
func cephfsOverlay(t *testing.T, bed *framework.Bed, root, secrets string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cephfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, filepath.Join(root, "deploy/cephfs"))
	if err != nil {
		t.Fatal(err)
	}
	img := bed.Env.MountpodImage
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
images:
  - name: localhost/mountcontainers/mountpod
    newName: %[2]s
    newTag: %[3]s
patches:
  - target: {kind: DaemonSet, name: cephfs-mountpod}
    patch: |-
      - {op: replace, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
      - {op: test, path: /spec/template/spec/volumes/0/name, value: kubelet-dir}
      - {op: replace, path: /spec/template/spec/volumes/0/hostPath/path, value: %[4]s}
      - {op: test, path: /spec/template/spec/containers/0/volumeMounts/0/name, value: kubelet-dir}
      - {op: replace, path: /spec/template/spec/containers/0/volumeMounts/0/mountPath, value: %[4]s}
      - {op: test, path: /spec/template/spec/containers/0/env/5/name, value: MOUNTPOD_REGISTRATION_DIR}
      - {op: replace, path: /spec/template/spec/containers/0/env/5/value, value: %[5]s}
      - {op: test, path: /spec/template/spec/volumes/3/name, value: lib-modules}
      - {op: replace, path: /spec/template/spec/volumes/3/hostPath/path, value: %[6]s/lib-modules}
      - {op: test, path: /spec/template/spec/containers/0/env/8/name, value: MOUNTPOD_SCOPE_PARENT}
      - {op: replace, path: /spec/template/spec/containers/0/env/8/value, value: %[7]s}
      - {op: test, path: /spec/template/spec/volumes/5/name, value: systemd-run}
      - {op: replace, path: /spec/template/spec/volumes/5/hostPath/path, value: %[13]s}
      - {op: test, path: /spec/template/spec/volumes/6/name, value: flexvolume-dir}
      - {op: replace, path: /spec/template/spec/volumes/6/hostPath/path, value: %[8]s}
      - {op: test, path: /spec/template/spec/containers/0/volumeMounts/6/name, value: flexvolume-dir}
      - {op: replace, path: /spec/template/spec/containers/0/volumeMounts/6/mountPath, value: %[8]s}
      - {op: test, path: /spec/template/spec/containers/0/env/9/name, value: MOUNTPOD_INSTALL_FLEXVOLUME_DIR}
      - {op: replace, path: /spec/template/spec/containers/0/env/9/value, value: %[8]s}
      - {op: test, path: /spec/template/spec/containers/0/env/11/name, value: MOUNTPOD_HOST_RUNTIME_ENDPOINT}
      - {op: replace, path: /spec/template/spec/containers/0/env/11/value, value: %[9]q}
      # The monitors: deploy/cephfs ships a placeholder the mount pod
      # refuses until an administrator names them.
      - {op: test, path: /spec/template/spec/containers/0/env/12/name, value: MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS}
      - {op: replace, path: /spec/template/spec/containers/0/env/12/value, value: %[12]q}
      - {op: test, path: /spec/template/spec/volumes/7/name, value: secrets}
      - {op: replace, path: /spec/template/spec/volumes/7/hostPath/path, value: %[10]s}
      - {op: test, path: /spec/template/spec/containers/0/volumeMounts/7/name, value: secrets}
      - {op: replace, path: /spec/template/spec/containers/0/volumeMounts/7/mountPath, value: %[10]s}
      - {op: test, path: /spec/template/spec/containers/0/env/13/name, value: MOUNTPOD_FLEXVOLUME_SECRETS_DIR}
      - {op: replace, path: /spec/template/spec/containers/0/env/13/value, value: %[10]s}
      - {op: test, path: /spec/template/spec/volumes/8/name, value: ceph-log}
      - {op: replace, path: /spec/template/spec/volumes/8/hostPath/path, value: %[6]s/logs/ceph-client}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_PORT, value: %[11]q}}
`, base, img[:strings.LastIndex(img, ":")], img[strings.LastIndex(img, ":")+1:], bed.Env.KubeletRoot, bed.Env.RegistrationDir,
		bed.Env.BedDir, cmp.Or(bed.Env.Vars["BED_SCOPE_PARENT"], "mountcontainers-bed"), bed.Env.VolumePluginDir, bed.Env.CRIEndpoint,
		secrets, bed.Env.Vars["API_PORT"], bed.Env.NodeIP, systemdRunDir(bed.Env))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitRegistered waits until the cephfs registration names the pod uid.
func (c *cephfsEnv) waitRegistered(t *testing.T, uid types.UID) {
	t.Helper()
	if err := framework.Poll(context.Background(), "the cephfs registration", 200*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			reg, ok, err := registration.Read(c.bed.Env.RegistrationDir, cephfsPlugin)
			return ok && err == nil && reg.PodUID == string(uid), fmt.Sprintf("%+v %v %v", reg, ok, err), nil
		}); err != nil {
		t.Fatal(err)
	}
}

func (c *cephfsEnv) mountPod(t *testing.T) corev1.Pod {
	t.Helper()
	return c.bed.WaitPodsBySelector(t, mountpodNS, cephfsSelect, 1, true, 2*time.Minute)[0]
}

// workload starts a pod whose volume "data" is the CephFS directory path
// (root when empty) with the key of secret, running script, and returns it
// once Running (Ready when ready).
func (c *cephfsEnv) workload(t *testing.T, name, path, secret, script string, ready bool) *corev1.Pod {
	t.Helper()
	opts := fmt.Sprintf("{monitors: %q, user: %s, fs: cephfs", c.bed.Env.NodeIP+":6789", cephClientID)
	if path != "" {
		opts += ", path: " + path
	}
	opts += "}"
	c.bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: %[3]s
      imagePullPolicy: Never
      command: ["sh", "-c", %[4]q]
      volumeMounts:
        - {name: data, mountPath: /data}
  volumes:
    - name: data
      flexVolume:
        driver: %[5]s
        secretRef: {name: %[6]s}
        options: %[7]s
`, name, c.ns, c.bed.Env.BaseImage, script, cephfsDriver, secret, opts))
	if !ready {
		return nil
	}
	return c.bed.WaitPod(t, c.ns, name, false, 2*time.Minute)
}

// deletePod deletes p, if it is still there, and waits until it is gone.
func (c *cephfsEnv) deletePod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	err := c.bed.Client.CoreV1().Pods(c.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	c.bed.WaitPodGone(t, c.ns, p.Name, p.UID, 2*time.Minute)
}

func (c *cephfsEnv) volumeDir(p *corev1.Pod) string {
	return filepath.Join(c.bed.Env.KubeletRoot, "pods", string(p.UID), "volumes", "mountcontainers.io~cephfs", "data")
}

// cephFuseProcesses returns the PIDs of ceph-fuse processes serving dir.
func cephFuseProcesses(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for pid, args := range processes(t) {
		if filepath.Base(args[0]) == "ceph-fuse" && slices.Contains(args, dir) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// processes returns the argv of every process of the host.
func processes(t *testing.T) map[int][]string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	out := map[int][]string{}
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out[pid] = strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	}
	return out
}

// assertKeyNowhere fails when the key is in any process's argv, in a mount
// record or in a file of the registration directory.
func (c *cephfsEnv) assertKeyNowhere(t *testing.T) {
	t.Helper()
	for pid, args := range processes(t) {
		if strings.Contains(strings.Join(args, " "), c.srv.key) {
			t.Errorf("process %d has the key in its argv: %q", pid, args[0])
		}
	}
	_ = filepath.WalkDir(c.bed.Env.RegistrationDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(c.srv.key)) {
			t.Errorf("%s holds the key", p)
		}
		return nil
	})
}

// secretFiles lists the secrets directory.
func (c *cephfsEnv) secretFiles(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(nodePath(c.secrets))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// testWorkload: a workload writes and reads its CephFS volume through the
// driver in exec mode mode; a second workload, a client of its own,
// mounts a subdirectory (path) and reads what the first wrote.
func (c *cephfsEnv) testWorkload(t *testing.T, mode mcexec.ExecMode) {
	bed := c.bed
	mp := c.mountPod(t)
	mountCtr := bed.RunningContainerID(t, mp.UID, "mount", 30*time.Second)
	log := setDriverMode(t, c.driver, mode)

	sub := "/e2e-" + string(mode)
	start := time.Now()
	w := c.workload(t, "cephfs-writer-"+string(mode), "", cephfsSecret, "sleep infinity", true)
	t.Cleanup(func() { c.deletePod(t, w) }) // a failure below leaves nothing to the next test
	t.Logf("workload with a CephFS flexVolume Running in %s", time.Since(start).Round(time.Millisecond))
	content := "written through the cephfs mount pod at " + time.Now().Format(time.RFC3339Nano)
	out := bed.MustExec(t, c.ns, w.Name, "main", "sh", "-c", `mkdir -p /data"$2" && printf '%s' "$1" > /data"$2"/hello.txt && sync && cat /data"$2"/hello.txt`, "sh", content, sub)
	if out != content {
		t.Fatalf("read back %q, want %q", out, content)
	}

	dir := c.volumeDir(w)
	if fs := hostMount(t, dir); fs != "fuse.ceph-fuse" {
		t.Fatalf("host mount table: %s is %q, want fuse.ceph-fuse", dir, fs)
	}
	pids := cephFuseProcesses(t, dir)
	if len(pids) != 1 {
		t.Fatalf("%d ceph-fuse processes serve %s, want 1", len(pids), dir)
	}
	if cg := procCgroups(t, pids[0]); strings.Contains(cg["memory"], mountCtr) ||
		(!c.bed.Env.SystemdNode() && !strings.Contains(cg["memory"], "/kubernetes.io~cephfs/mount-")) {
		t.Fatalf("ceph-fuse (pid %d) is not in its scope outside the mount pod's container %s: %v", pids[0], mountCtr, cg)
	}
	assertScopeUnit(t, c.bed.Env, cephfsPlugin, dir, pids[0])
	keyFile := volume.SecretFile(c.secrets, dir)
	if fi, err := os.Stat(nodePath(keyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file %s: %v, %v; want mode 0600", keyFile, fi, err)
	}
	c.assertKeyNowhere(t)
	t.Logf("ceph-fuse pid %d in its scope, key file %s (0600, on the tmpfs)", pids[0], filepath.Base(keyFile))

	// The second client: its own ceph-fuse, the subdirectory as its root.
	r := c.workload(t, "cephfs-reader-"+string(mode), sub, cephfsSecret, "sleep infinity", true)
	t.Cleanup(func() { c.deletePod(t, r) })
	if got := bed.MustExec(t, c.ns, r.Name, "main", "cat", "/data/hello.txt"); got != content {
		t.Fatalf("the second client reads %q, want %q", got, content)
	}
	if rp := cephFuseProcesses(t, c.volumeDir(r)); len(rp) != 1 || rp[0] == pids[0] {
		t.Fatalf("the second client's ceph-fuse: %v (the first's is %d); want one of its own", rp, pids[0])
	}

	start = time.Now()
	c.deletePod(t, w)
	c.deletePod(t, r)
	for _, d := range []string{dir, c.volumeDir(r)} {
		if err := framework.Poll(context.Background(), "unmount of "+d, 200*time.Millisecond, time.Minute,
			func(context.Context) (bool, string, error) {
				fs, n := hostMount(t, d), len(cephFuseProcesses(t, d))
				return fs == "" && n == 0, fmt.Sprintf("mount %q, %d ceph-fuse", fs, n), nil
			}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("both workloads deleted, their volumes unmounted in %s", time.Since(start).Round(time.Millisecond))
	if left := c.secretFiles(t); len(left) != 0 {
		t.Errorf("key files left after unmount: %v", left)
	}
	checkDriverLog(t, log, dir, mountCtr, viaOf(t, mode))
}

// testWrongKey: a volume whose Secret holds another key fails to mount
// with ceph-fuse's reason in the pod's events, and leaves nothing behind.
func (c *cephfsEnv) testWrongKey(t *testing.T) {
	setDriverMode(t, c.driver, mcexec.ModeCRI)
	c.workload(t, "cephfs-wrong-key", "", cephfsWrong, "sleep infinity", false)
	var msg string
	err := framework.Poll(context.Background(), "a FailedMount event", 500*time.Millisecond, 3*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			evs, err := c.bed.Client.CoreV1().Events(c.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=cephfs-wrong-key,reason=FailedMount"})
			if err != nil {
				return false, "", err
			}
			for _, ev := range evs.Items {
				// ceph-fuse's own reason (the monitors refused the key), from
				// a mount(8) run in the mount pod through CRI ExecSync.
				if strings.Contains(ev.Message, "failed to fetch mon config") && strings.Contains(ev.Message, "via "+string(mcexec.ViaExecSync)) {
					msg = ev.Message
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d events", len(evs.Items)), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FailedMount: %s", msg)
	if strings.Contains(msg, c.srv.otherKey) {
		t.Errorf("the event quotes the key")
	}
	p, err := c.bed.Client.CoreV1().Pods(c.ns).Get(context.Background(), "cephfs-wrong-key", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase == corev1.PodRunning {
		t.Errorf("a pod with a wrong key is Running")
	}
	dir := c.volumeDir(p)
	c.deletePod(t, p)
	// A retry of the kubelet's may be under way: it fails too, and cleans up.
	if err := framework.Poll(context.Background(), "nothing left of the wrong key's mounts", 250*time.Millisecond, 90*time.Second,
		func(context.Context) (bool, string, error) {
			_, kerr := os.Lstat(nodePath(volume.SecretFile(c.secrets, dir)))
			mnt, procs, keyGone := hostMount(t, dir), cephFuseProcesses(t, dir), errors.Is(kerr, fs.ErrNotExist)
			return mnt == "" && len(procs) == 0 && keyGone, fmt.Sprintf("mount %q, ceph-fuse %v, key file gone %t (%v)", mnt, procs, keyGone, kerr), nil
		}); err != nil {
		t.Error(err)
	}
}

// cephfsStreamScript appends a numbered line to /data/$NAME every 100 ms,
// opening the file for each line (so a mount that comes back is used at
// once), and counts failed writes in /tmp/errors.
const cephfsStreamScript = `i=0; : > /tmp/errors
while :; do
  if echo "$i $(date +%s%N)" >> /data/"$HOSTNAME"; then i=$((i+1)); else echo x >> /tmp/errors; fi
  sleep 0.1
done`

// lines returns how many lines the stream writer p has written, read
// through its own mount.
func (c *cephfsEnv) lines(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	out, stderr, err := c.bed.Exec(context.Background(), 20*time.Second, c.ns, p.Name, "main", "sh", "-c", `wc -l < /data/"$HOSTNAME"`)
	if err != nil {
		c.lastErr = fmt.Sprintf("%v: %s", err, strings.TrimSpace(stderr))
		return -1
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

func (c *cephfsEnv) waitLines(t *testing.T, p *corev1.Pod, n int, within time.Duration) {
	t.Helper()
	if err := framework.Poll(context.Background(), fmt.Sprintf("%d lines from %s", n, p.Name), 200*time.Millisecond, within,
		func(context.Context) (bool, string, error) {
			got := c.lines(t, p)
			return got >= n, fmt.Sprintf("%d lines (%s)", got, c.lastErr), nil
		}); err != nil {
		t.Fatal(err)
	}
}

// testOutlivesMountPod: the mount pod is deleted under a writing
// workload; its ceph-fuse lives on in its scope, the writes go on, and the
// new mount pod adopts the mount.
func (c *cephfsEnv) testOutlivesMountPod(t *testing.T) {
	bed := c.bed
	log := setDriverMode(t, c.driver, mcexec.ModeSocket)
	w := c.workload(t, "cephfs-stream", "", cephfsSecret, cephfsStreamScript, true)
	t.Cleanup(func() { c.deletePod(t, w) })
	dir := c.volumeDir(w)
	waitMountedVia(t, log, dir, mcexec.ViaSocket)
	c.waitLines(t, w, 20, time.Minute)
	pids := cephFuseProcesses(t, dir)
	if len(pids) != 1 {
		t.Fatalf("%d ceph-fuse serve %s", len(pids), dir)
	}
	daemon := pids[0]
	parent := cmp.Or(bed.Env.Vars["BED_SCOPE_PARENT"], "mountcontainers-bed")
	mp := c.mountPod(t)
	for hier, path := range procCgroups(t, daemon) {
		// On a systemd node, its unit says where it is (assertScopeUnit).
		if inPodCgroup(path, string(mp.UID)) || strings.Contains(path, "kubepods") || (hier != "" && !bed.Env.SystemdNode() && !strings.HasPrefix(path, "/"+parent+"/")) {
			t.Errorf("ceph-fuse %d is in %s:%s, not in a scope under /%s", daemon, hier, path, parent)
		}
	}
	assertScopeUnit(t, bed.Env, cephfsPlugin, dir, daemon)

	before := c.lines(t, w)
	start := time.Now()
	if err := bed.Client.CoreV1().Pods(mp.Namespace).Delete(context.Background(), mp.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bed.WaitPodGone(t, mp.Namespace, mp.Name, mp.UID, 2*time.Minute)
	gone := time.Since(start)
	if !processAlive(daemon) {
		t.Fatalf("ceph-fuse (pid %d) died with the mount pod", daemon)
	}
	c.waitLines(t, w, before+20, time.Minute)
	t.Logf("mount pod deleted (gone in %s); ceph-fuse %d alive; the workload wrote %d lines meanwhile", gone.Round(time.Millisecond), daemon, c.lines(t, w)-before)

	np := c.mountPod(t)
	c.waitRegistered(t, np.UID)
	status := bed.MustExec(t, np.Namespace, np.Name, "mount", "mountpod", "status", "-o", "json")
	var r livemount.Report
	if err := json.Unmarshal([]byte(status), &r); err != nil {
		t.Fatalf("mountpod status: %v\n%s", err, status)
	}
	i := slices.IndexFunc(r.Mounts, func(m livemount.Mount) bool { return m.Target == dir })
	// The mount pod names the daemon as the node sees it.
	if i < 0 || !r.Mounts[i].Scoped || !r.Mounts[i].Healthy || !slices.Contains(r.Mounts[i].Daemons, nodePID(t, daemon)) {
		t.Errorf("the new mount pod %s reports %+v; want %s scoped, healthy, daemon %d (%d on the node)", np.Name, r.Mounts, dir, daemon, nodePID(t, daemon))
	}
	if errs := bed.MustExec(t, c.ns, w.Name, "main", "cat", "/tmp/errors"); errs != "" {
		t.Errorf("the workload saw %d failed writes while the mount pod was replaced", strings.Count(errs, "x"))
	}
}

// testRecovery: ceph-fuse is killed under a writing workload; the mount
// pod makes the mount again and puts it back into the workload's
// container, which writes on without a restart.
func (c *cephfsEnv) testRecovery(t *testing.T) {
	bed := c.bed
	log := setDriverMode(t, c.driver, mcexec.ModeCRI)
	w := c.workload(t, "cephfs-recover", "", cephfsSecret, cephfsStreamScript, true)
	t.Cleanup(func() { c.deletePod(t, w) })
	t.Cleanup(func() {
		if t.Failed() {
			mp := c.mountPod(t)
			t.Logf("mount pod %s:\n%s", mp.Name, bed.Kubectl(t, "-n", mp.Namespace, "logs", mp.Name))
		}
	})
	dir := c.volumeDir(w)
	waitMountedVia(t, log, dir, mcexec.ViaExecSync)
	c.waitLines(t, w, 20, time.Minute)
	if es, err := mountrecord.List(filepath.Join(bed.Env.RegistrationDir, mountrecord.Dir)); err != nil || !hasRecord(es, dir) {
		t.Fatalf("no mount record of %s: %+v, %v", dir, es, err)
	}
	pids := cephFuseProcesses(t, dir)
	if len(pids) != 1 {
		t.Fatalf("%d ceph-fuse serve %s", len(pids), dir)
	}
	before := c.lines(t, w)
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The mount dies with its daemon ...
	if err := framework.Poll(context.Background(), "the dead mount", 50*time.Millisecond, 10*time.Second,
		func(context.Context) (bool, string, error) {
			_, err := os.Stat(dir)
			return errors.Is(err, syscall.ENOTCONN) || !processAlive(pids[0]), fmt.Sprint(err), nil
		}); err != nil {
		t.Fatal(err)
	}
	// ... and comes back, in the workload's container: the mount pod makes
	// it again at once (its Event says how long it took) ...
	waitPodEvents(t, bed, c.ns, w.Name, recovery.ReasonRecovered, 1, "came back")
	recovered := time.Since(killed)
	// ... and the workload writes again once the MDS has let go of what
	// the dead client held: the stream's file, whose capabilities the
	// killed ceph-fuse's session keeps until the file system's
	// session_timeout (60 s by default, 30 s on the bed) marks it stale. Until then the new
	// client waits for them, as any other client would.
	c.waitLines(t, w, before+20, 3*time.Minute)
	back := time.Since(killed)
	now := cephFuseProcesses(t, dir)
	if len(now) != 1 || now[0] == pids[0] {
		t.Fatalf("ceph-fuse serving %s: %v (killed %d); want one new", dir, now, pids[0])
	}
	if cg := procCgroups(t, now[0]); !c.bed.Env.SystemdNode() && !strings.Contains(cg["memory"], "/kubernetes.io~cephfs/mount-") {
		t.Errorf("the new ceph-fuse %d is not in its scope: %v", now[0], cg)
	}
	assertScopeUnit(t, c.bed.Env, cephfsPlugin, dir, now[0])
	if data := containerMount(t, bed, c.ns, w.Name, "main", "/data"); data.fstype != "fuse.ceph-fuse" || data.ro {
		t.Errorf("the workload's /data after the recovery: %+v", data)
	}
	p, err := bed.Client.CoreV1().Pods(c.ns).Get(context.Background(), w.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.UID != w.UID || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the workload was restarted: uid %s (was %s), restarts %d", p.UID, w.UID, p.Status.ContainerStatuses[0].RestartCount)
	}
	c.assertKeyNowhere(t)
	t.Logf("ceph-fuse %d killed; the mount came back with ceph-fuse %d (Event after %s) and the workload wrote again %s later", pids[0], now[0],
		recovered.Round(time.Millisecond), back.Round(time.Millisecond))
}

// waitMountedVia waits until the driver's log (setDriverMode) has a
// successful mount of dir whose reply says it ran in the mount pod through
// via, and fails if a mount of dir was placed any other way.
func waitMountedVia(t *testing.T, path, dir string, via mcexec.Via) {
	t.Helper()
	var data []byte
	err := framework.Poll(context.Background(), "the mount of "+dir+" via "+string(via)+" in the driver's log", 100*time.Millisecond, 30*time.Second,
		func(context.Context) (bool, string, error) {
			var err error
			if data, err = os.ReadFile(path); err != nil {
				return false, err.Error(), nil
			}
			lines := strings.Split(string(data), "\n")
			for _, line := range lines[:len(lines)-1] {
				var r driverRecord
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					return false, "", fmt.Errorf("driver log line %q: %w", line, err)
				}
				if r.Msg == "flexvolume call" && r.Call == "mount" && r.Dir == dir && r.Status == flexvolume.StatusSuccess {
					if !strings.Contains(r.Message, "via "+string(via)) {
						return false, "", fmt.Errorf("the mount of %s did not run via %s: %s", dir, via, r.Message)
					}
					return true, "", nil
				}
			}
			return false, "no mount of it yet", nil
		})
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
}
