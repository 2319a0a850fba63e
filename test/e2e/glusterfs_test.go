//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	"github.com/mountcontainers/mountcontainers/internal/shared/atomicfile"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// The GlusterFS user story, end to end on real parts: a GlusterFS server in
// its own pod, the glusterfs mount pod from deploy/glusterfs (through an
// overlay that points it at the bed's paths), the Flexvolume driver it
// installs, and a real kubelet mounting a workload's flexVolume on a node
// that has no mount.glusterfs.

const (
	glusterPlugin   = "kubernetes.io/glusterfs"
	glusterDriver   = "mountcontainers.io/glusterfs"
	glusterVolume   = "gv0"
	mountpodSelect  = "app.kubernetes.io/instance=glusterfs-mountpod"
	mountpodNS      = rollout.DefaultNamespace
	execSyncBound   = 10 * time.Second // a hanging exec would take the driver's 1 min timeout
	driverCallBound = 15 * time.Second
)

type glusterEnv struct {
	bed     *framework.Bed
	ns      string
	root    string
	out     string // generated manifests
	driver  string // installed driver executable
	brick   string // brick directory in the server pod
	mountNS string
}

func TestGlusterfs(t *testing.T) {
	bed := framework.Current(t)
	g := setupGlusterfs(t, bed)
	t.Run("WorkloadMountsThroughMountPod", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { g.testWorkload(t, mode) })
		}
	})
	t.Run("ExecSyncMountReturnsPromptly", g.testExecSync)
	t.Run("HelperIsTheTranslationOfTheImagesScript", g.testHelperScript)
	t.Run("DriverCalledAsTheKubeletCallsIt", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { g.testDriverCalls(t, mode) })
		}
	})
	t.Run("DriverCallsAtOnceShareAnExecThroughCRI", g.testDriverBatch)
	t.Run("BadOptionsNameTheField", g.testBadOptions)
	t.Run("ServersOutsideTheAllowListRefused", g.testAllowedServers)
	t.Run("YieldAndTakeBackAreEvents", g.testYieldEvents)
	t.Run("SharedMountsOnePerVolumeAndNode", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { g.testSharedMounts(t, mode) })
		}
	})
	// What a mount pod's end does to a live mount, with scopes and without
	// (the negative control), is TestScopes'.
}

// setupGlusterfs starts a GlusterFS server with the volumes named (default
// glusterVolume alone) and the glusterfs mount pod.
func setupGlusterfs(t *testing.T, bed *framework.Bed, volumes ...string) *glusterEnv {
	t.Helper()
	return setupGlusterfsWith(t, bed, glusterSetup{volumes: volumes})
}

// glusterSetup is what setupGlusterfsWith deploys besides the defaults.
type glusterSetup struct {
	volumes []string
	// perPodMounts deploys the mount pod with
	// MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS=false: a mount and a FUSE daemon
	// per pod, recorded naming the pod, whatever restarts the mount pod
	// (it writes the driver's settings at each start). For the tests
	// that prove what is a pod's own: its record, the recovery's Events
	// on it, its daemon apart from another tenant's.
	perPodMounts bool
}

// setupGlusterfsWith is setupGlusterfs with o.
func setupGlusterfsWith(t *testing.T, bed *framework.Bed, o glusterSetup) *glusterEnv {
	t.Helper()
	volumes := o.volumes
	assertHostHasNoGluster(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	g := &glusterEnv{bed: bed, root: root, out: t.TempDir(), brick: "/bricks/" + glusterVolume, mountNS: mountpodNS}
	g.ns = bed.CreateNamespace(t, "gluster")

	// The server image (cached by its inputs) into the bed's containerd.
	run(t, 10*time.Minute, filepath.Join(root, "test/bed/images.sh"), "build", "glusterfs-server",
		filepath.Join(root, "test/images/glusterfs-server/Dockerfile"), filepath.Join(root, "test/images/glusterfs-server"))
	run(t, 2*time.Minute, filepath.Join(root, "test/bed/images.sh"), "import", "glusterfs-server")

	cmd := exec.Command(filepath.Join(root, "test/demo/manifests.sh"), g.out)
	cmd.Env = append(os.Environ(), "GLUSTER_NAMESPACE="+g.ns, "BED_DIR="+bed.Env.BedDir)
	if len(volumes) > 0 {
		cmd.Env = append(cmd.Env, "GLUSTER_VOLUMES="+strings.Join(volumes, ","))
	}
	if o.perPodMounts {
		cmd.Env = append(cmd.Env, "GLUSTER_SHARED_MOUNTS=false")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("manifests.sh: %v\n%s", err, out)
	}

	start := time.Now()
	bed.ApplyFile(t, filepath.Join(g.out, "glusterfs-server.yaml"))
	bed.WaitPod(t, g.ns, "glusterfs-server", true, 2*time.Minute)
	t.Logf("GlusterFS server ready in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	applyMountpodNamespace(t, bed, root)
	bed.ApplyKustomize(t, filepath.Join(g.out, "mountpod"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if r := bed.RunKubectl(ctx, "", "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-k", filepath.Join(g.out, "mountpod")); r.Err != nil {
			t.Logf("delete mount pod: %v", r.Err)
		}
		_ = os.RemoveAll(filepath.Join(bed.Env.VolumePluginDir, "mountcontainers.io~glusterfs"))
	})
	bed.WaitPodsBySelector(t, g.mountNS, mountpodSelect, len(bed.Env.Nodes), true, 2*time.Minute)
	t.Logf("glusterfs mount pod(s) from deploy/glusterfs ready in %s", time.Since(start).Round(time.Millisecond))

	g.driver = filepath.Join(bed.Env.VolumePluginDir, "mountcontainers.io~glusterfs", "glusterfs")
	if err := framework.Poll(context.Background(), "driver "+g.driver, 200*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			_, err := os.Stat(g.driver)
			return err == nil, fmt.Sprint(err), nil
		}); err != nil {
		t.Fatal(err)
	}
	assertNoDotfiles(t, filepath.Dir(g.driver))
	return g
}

// applyMountpodNamespace applies deploy/namespace, the mount pods'
// namespace, as an administrator does before the overlays. No test deletes
// it (deleting it deletes every plugin's mount pods); it goes with the bed.
func applyMountpodNamespace(t *testing.T, bed *framework.Bed, root string) {
	t.Helper()
	bed.ApplyKustomize(t, filepath.Join(root, "deploy/namespace"))
}

// assertHostHasNoGluster fails when the host has any GlusterFS client: the
// proof that the node mounts without one would be meaningless.
func assertHostHasNoGluster(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"mount.glusterfs", "glusterfs", "glusterfsd", "gluster"} {
		if p, err := exec.LookPath(tool); err == nil {
			t.Fatalf("the host has %s (%s): remove the gluster packages, the test proves the node needs none", tool, p)
		}
	}
	for _, p := range []string{"/sbin/mount.glusterfs", "/usr/sbin/mount.glusterfs", "/usr/sbin/glusterfs"} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("the host has %s", p)
		}
	}
}

func assertNoDotfiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("install left %s in %s", e.Name(), dir)
		}
	}
}

func run(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mountPod waits for the glusterfs mount pod to be ready and returns it.
func (g *glusterEnv) mountPod(t *testing.T) corev1.Pod {
	t.Helper()
	return g.bed.WaitPodsBySelector(t, g.mountNS, mountpodSelect, 1, true, 2*time.Minute)[0]
}

// workload runs a pod with a GlusterFS flexVolume at /data.
func (g *glusterEnv) workload(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	g.bed.Apply(t, fmt.Sprintf(`apiVersion: v1
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
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /data}
  volumes:
    - name: data
      flexVolume:
        driver: %[4]s
        options:
          server: %[5]q
          volume: %[6]s
          mountOptions: log-level=WARNING
`, name, g.ns, g.bed.Env.BaseImage, glusterDriver, g.bed.Env.NodeName, glusterVolume))
	return g.bed.WaitPod(t, g.ns, name, false, 2*time.Minute)
}

// sleeper is a container of a [glusterEnv.startPod] pod: it sleeps, with
// the volume "data" at mountPath (subPath of it when set), or without it
// when mountPath is "".
type sleeper struct{ name, sleep, mountPath, subPath string }

// startPod starts a pod of sleepers with the GlusterFS flexVolume "data" of
// this node's server (restartPolicy Never when once), waits until it runs,
// and deletes it, waiting until it is gone, when the test ends.
func (g *glusterEnv) startPod(t *testing.T, name string, once bool, containers ...sleeper) *corev1.Pod {
	t.Helper()
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{
				Driver: glusterDriver, Options: map[string]string{"server": g.bed.Env.NodeName, "volume": glusterVolume},
			}}}},
		},
	}
	if once {
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	for _, c := range containers {
		ctr := corev1.Container{Name: c.name, Image: g.bed.Env.BaseImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", c.sleep}}
		if c.mountPath != "" {
			ctr.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: c.mountPath, SubPath: c.subPath}}
		}
		pod.Spec.Containers = append(pod.Spec.Containers, ctr)
	}
	if _, err := g.bed.Client.CoreV1().Pods(g.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", g.ns, name, err)
	}
	p := g.bed.WaitPod(t, g.ns, name, true, 2*time.Minute)
	t.Cleanup(func() {
		_ = g.bed.Client.CoreV1().Pods(g.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		g.bed.WaitPodGone(t, g.ns, name, p.UID, 2*time.Minute)
	})
	return p
}

// volumeDir is where the kubelet mounts a pod's flexVolume "data".
func (g *glusterEnv) volumeDir(p *corev1.Pod) string {
	return filepath.Join(g.bed.Env.KubeletRoot, "pods", string(p.UID), "volumes", "mountcontainers.io~glusterfs", "data")
}

// hostMount returns the file system type of the mount at dir in the node's
// mount table (this machine's, or a systemd node's), or "" when there is
// none.
func hostMount(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(framework.NodeProcOf() + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	fstype := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[4] != dir {
			continue
		}
		for i, x := range f {
			if x == "-" && i+1 < len(f) {
				fstype = f[i+1]
			}
		}
	}
	return fstype
}

// fuseProcesses returns the PIDs of glusterfs client processes serving dir.
func fuseProcesses(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	for pid, args := range processes(t) {
		if filepath.Base(args[0]) == "glusterfs" && args[len(args)-1] == dir {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// testWorkload runs a workload whose GlusterFS flexVolume the kubelet
// mounts through the driver, with the driver set to exec mode mode and
// otherwise as the mount pod set it up (shared mounts, by default), and
// checks from the driver's log that its mount ran in the mount pod through
// that mode's path, and its unmount on the node; the pod's directory is a
// bind of the node's mount of the volume, whose daemon runs in its scope,
// and the pod's deletion removes both.
func (g *glusterEnv) testWorkload(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	mp := g.mountPod(t)
	mountCtr := bed.RunningContainerID(t, mp.UID, "mount", 30*time.Second)
	log := g.setDriverMode(t, mode)

	start := time.Now()
	p := g.workload(t, "writer-"+string(mode))
	t.Logf("workload with a GlusterFS flexVolume Running in %s", time.Since(start).Round(time.Millisecond))

	content := "written through the mount pod at " + time.Now().Format(time.RFC3339Nano)
	out := bed.MustExec(t, g.ns, p.Name, "main", "sh", "-c", `printf '%s' "$1" > /data/hello.txt && cat /data/hello.txt`, "sh", content)
	if out != content {
		t.Fatalf("read back %q, want %q", out, content)
	}
	if got := bed.MustExec(t, g.ns, "glusterfs-server", "server", "cat", g.brick+"/hello.txt"); got != content {
		t.Fatalf("brick has %q, want %q", got, content)
	}

	dir := g.volumeDir(p)
	if fs := hostMount(t, dir); fs != "fuse.glusterfs" {
		t.Fatalf("host mount table: %s is %q, want fuse.glusterfs", dir, fs)
	}
	// The driver's default: the pod's directory binds the node's mount of
	// the volume (for the pods of its namespace), which one daemon serves.
	served := servedAt(t, dir)
	if served == dir {
		t.Fatalf("%s is a mount of its own, want a bind of the node's mount of the volume (the driver's default, shared mounts)", dir)
	}
	pids := fuseProcesses(t, served)
	if len(pids) != 1 {
		t.Fatalf("%d glusterfs processes serve %s, want 1", len(pids), served)
	}
	// The daemon runs in its mount's scope, outside the mount pod's
	// container (TestScopes shows what that is for), and the mount pod,
	// with hostPID, sees it.
	if cg := procCgroups(t, pids[0]); strings.Contains(cg["memory"], mountCtr) ||
		(!bed.Env.SystemdNode() && !strings.Contains(cg["memory"], "/kubernetes.io~glusterfs/mount-")) {
		t.Fatalf("the FUSE daemon (pid %d) is not in its scope outside the mount pod's container %s: %v", pids[0], mountCtr, cg)
	}
	assertScopeUnit(t, bed.Env, "kubernetes.io/glusterfs", served, pids[0])
	ps := bed.MustExec(t, g.mountNS, mp.Name, "mount", "sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
	if !strings.Contains(ps, served) {
		t.Fatalf("the mount pod does not see the FUSE daemon of %s:\n%s", served, ps)
	}
	t.Logf("FUSE daemon pid %d started through mount pod %s (container %.12s) runs in its scope; the host has no mount.glusterfs", pids[0], mp.Name, mountCtr)

	start = time.Now()
	if err := bed.Client.CoreV1().Pods(g.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bed.WaitPodGone(t, g.ns, p.Name, p.UID, 2*time.Minute)
	if err := framework.Poll(context.Background(), "unmount of "+dir+" and "+served, 200*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			fs, nfs, n := hostMount(t, dir), hostMount(t, served), len(fuseProcesses(t, served))
			return fs == "" && nfs == "" && n == 0, fmt.Sprintf("mount %q, node's mount %q, %d FUSE processes", fs, nfs, n), nil
		}); err != nil {
		t.Fatal(err)
	}
	t.Logf("workload deleted and its volume unmounted in %s", time.Since(start).Round(time.Millisecond))
	if got := bed.MustExec(t, g.ns, "glusterfs-server", "server", "cat", g.brick+"/hello.txt"); got != content {
		t.Fatalf("after unmount the brick has %q", got)
	}
	checkDriverLog(t, log, dir, mountCtr, viaOf(t, mode))
}

// testExecSync proves that the CRI ExecSync of a glusterfs mount returns
// as soon as the mount is made: the glusterfs client daemonizes and closes
// the exec's stdout and stderr (containerd waits for them to close), so no
// fix is needed; the bound catches a regression, which would otherwise
// last until the exec's timeout. The resolver is forced to ExecSync and the
// test checks it was used: through the exec socket a daemon holding the
// pipes costs only the service's 200 ms output grace, so the regression
// would go unseen.
func (g *glusterEnv) testExecSync(t *testing.T) {
	bed := g.bed
	mp := g.mountPod(t)
	mountCtr := bed.RunningContainerID(t, mp.UID, "mount", 30*time.Second)
	r := mcexec.NewResolver(mcexec.Options{Dir: bed.Env.RegistrationDir, Endpoint: bed.Env.CRIEndpoint, ExecMode: mcexec.ModeCRI})
	defer r.Close()
	e, err := r.For(glusterPlugin)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Resolve(context.Background())
	if err != nil || d.ContainerID != mountCtr || d.Registration.PodName != mp.Name || d.Via != mcexec.ViaExecSync {
		t.Fatalf("decision %v (%v), want mount pod %s via %s", d, err, mp.Name, mcexec.ViaExecSync)
	}
	x := &pathCheck{Exec: e}

	dir := filepath.Join(bed.Env.KubeletRoot, "mc-e2e-glusterfs", "execsync")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("umount", "-l", dir).Run()
		_ = os.RemoveAll(filepath.Dir(dir))
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	out, err := x.CommandContext(ctx, "mount", "-t", "glusterfs", bed.Env.NodeName+":/"+glusterVolume, dir).CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("mount through ExecSync: %v: %s", err, out)
	}
	t.Logf("ExecSync(mount -t glusterfs) returned in %s (bound %s, exec timeout 1m)", took.Round(time.Millisecond), execSyncBound)
	if took > execSyncBound {
		t.Fatalf("ExecSync of the mount took %s > %s: the FUSE daemon holds the exec's pipes", took, execSyncBound)
	}
	if fs := hostMount(t, dir); fs != "fuse.glusterfs" {
		t.Fatalf("after ExecSync mount, host sees %q at %s", fs, dir)
	}
	start = time.Now()
	if out, err := x.CommandContext(ctx, "umount", dir).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}
	t.Logf("ExecSync(umount) returned in %s", time.Since(start).Round(time.Millisecond))
	x.verify(t, mountCtr, mcexec.ViaExecSync)
}

// testHelperScript: the mount pod's mount.glusterfs is the scope helper,
// and the distribution's script behind it is the one the helper's
// translation is held against (package clientargs' table test): a new
// glusterfs-client in the image needs that test run against its script.
func (g *glusterEnv) testHelperScript(t *testing.T) {
	mp := g.mountPod(t)
	data, err := os.ReadFile(filepath.Join(g.root, "internal/shared/fs/glusterfs/clientargs/testdata/mount.glusterfs"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	out := g.bed.MustExec(t, mp.Namespace, mp.Name, "mount", "sh", "-c", "readlink /sbin/mount.glusterfs; sha256sum /sbin/mount.glusterfs.distrib")
	lines := strings.Fields(out)
	if len(lines) < 2 || lines[0] != "/usr/local/bin/mount-scope" || lines[1] != want {
		t.Fatalf("in mount pod %s: %q; want /sbin/mount.glusterfs -> /usr/local/bin/mount-scope and the script's SHA-256 %s (clientargs/testdata): a changed script needs the translation checked against it", mp.Name, out, want)
	}
}

// testDriverCalls runs the installed driver as the kubelet invokes it (its
// own environment, no bed settings), set to exec mode mode, and checks
// from its replies and its log that mount ran in the mount pod through that
// mode's path and the unmount on the node (umount2, no exec).
func (g *glusterEnv) testDriverCalls(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	mp := g.mountPod(t)
	mountCtr := bed.RunningContainerID(t, mp.UID, "mount", 30*time.Second)
	via := viaOf(t, mode)
	log := g.setDriverMode(t, mode)
	opts, _ := json.Marshal(map[string]string{
		"server": bed.Env.NodeName, "volume": glusterVolume,
		"kubernetes.io/fsType": "", "kubernetes.io/readwrite": "rw", "kubernetes.io/pod.uid": "e2e",
	})
	target := filepath.Join(bed.Env.KubeletRoot, "mc-e2e-glusterfs", "driver-"+string(mode))
	t.Cleanup(func() {
		_ = exec.Command("umount", "-l", target).Run()
		_ = os.RemoveAll(filepath.Dir(target))
	})
	for _, call := range [][]string{{"init"}, {"mount", target, string(opts)}, {"unmount", target}, {"unmount", target}} {
		start := time.Now()
		s := g.callDriver(t, call...)
		took := time.Since(start)
		t.Logf("driver %s: %s in %s: %s", call[0], s.Status, took.Round(time.Millisecond), s.Message)
		if s.Status != flexvolume.StatusSuccess {
			t.Fatalf("driver %s: %+v", call[0], s)
		}
		if took > driverCallBound {
			t.Fatalf("driver %s took %s > %s", call[0], took, driverCallBound)
		}
		if call[0] == "mount" && (!strings.Contains(s.Message, mp.Name) || !strings.Contains(s.Message, "via "+string(via))) {
			t.Fatalf("driver mount did not run in the mount pod %s via %s: %s", mp.Name, via, s.Message)
		}
		if call[0] == "unmount" && !strings.Contains(s.Message, "on the node (umount2)") && !strings.Contains(s.Message, "is not mounted") {
			t.Fatalf("driver unmount was not umount2 on the node: %s", s.Message)
		}
	}
	checkDriverLog(t, log, target, mountCtr, via)
}

// testDriverBatch: through CRI, the installed driver's calls that wait for
// the mount container at once share one ExecSync of the batch program its
// registration advertises (`mountpod exec-batch`). The test holds the
// container's batch slots itself (flock(2) on the lock files of the batch
// directory, as batches in flight hold them) while twelve mount calls run
// as the kubelet runs them, a process each; once their twelve requests
// wait in the directory it lets go of one slot only, so that one call
// leads and its batch takes them all, however the machine schedules the
// callers (with four free slots, leaders that start together split the
// requests between them). Each call gets its own mount (on the node, at
// its target) and a reply naming the CRI path; the driver's log has one
// batch of twelve.
func (g *glusterEnv) testDriverBatch(t *testing.T) {
	const calls = 12
	bed := g.bed
	mp := g.mountPod(t)
	ctr := bed.RunningContainerID(t, mp.UID, "mount", 30*time.Second)
	log := g.setDriverMode(t, mcexec.ModeCRI)
	reg, ok, err := registration.Read(bed.Env.RegistrationDir, glusterPlugin)
	if err != nil || !ok || reg.ExecBatch == "" {
		t.Fatalf("the registration advertises no batch program: %+v, %t, %v", reg, ok, err)
	}
	dir := filepath.Join(mcexec.DefaultBatchDir, ctr)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for slot := range 4 {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("lead-%d", slot)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	release := func() {
		for _, f := range held {
			f.Close()
		}
		held = nil
	}
	t.Cleanup(release)
	releaseOne := func() {
		held[0].Close()
		held = held[1:]
	}

	opts, _ := json.Marshal(map[string]string{
		"server": bed.Env.NodeName, "volume": glusterVolume,
		"kubernetes.io/fsType": "", "kubernetes.io/readwrite": "rw", "kubernetes.io/pod.uid": "e2e",
	})
	base := filepath.Join(bed.Env.KubeletRoot, "mc-e2e-glusterfs", "batch")
	targets := make([]string, calls)
	for i := range targets {
		targets[i] = filepath.Join(base, fmt.Sprintf("v%02d", i))
	}
	t.Cleanup(func() {
		for _, d := range targets {
			_ = exec.Command("umount", "-l", d).Run()
		}
		_ = os.RemoveAll(base)
	})
	replies := make([]flexvolume.Status, calls)
	var wg sync.WaitGroup
	for i, d := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = g.driverReply(g.driver, "mount", d, string(opts))
		}()
	}
	waiting := func() int {
		ents, _ := os.ReadDir(dir)
		n := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".req") {
				n++
			}
		}
		return n
	}
	if err := framework.Poll(context.Background(), "the driver calls' requests in "+dir, 50*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			n := waiting()
			return n == calls, fmt.Sprintf("%d waiting", n), nil
		}); err != nil {
		release()
		wg.Wait()
		t.Fatal(err)
	}
	start := time.Now()
	releaseOne()
	wg.Wait()
	release()
	t.Logf("%d mounts done %s after a batch slot was let go", calls, time.Since(start).Round(time.Millisecond))
	for i, s := range replies {
		if s.Status != flexvolume.StatusSuccess || !strings.Contains(s.Message, "via "+string(mcexec.ViaExecSync)) || !strings.Contains(s.Message, targets[i]) {
			t.Errorf("mount %d: %+v, want a Success at %s via %s", i, s, targets[i], mcexec.ViaExecSync)
		}
		if fs := hostMount(t, targets[i]); fs != "fuse.glusterfs" {
			t.Errorf("host mount table: %s is %q, want fuse.glusterfs", targets[i], fs)
		}
	}
	if sizes := execBatches(t, log); len(sizes) != 1 || sizes[0] != calls {
		data, _ := os.ReadFile(log)
		t.Errorf("batches logged by the driver: %v, want one of %d\n%s", sizes, calls, data)
	}
	for i, d := range targets {
		if s := g.driverReply(g.driver, "unmount", d); s.Status != flexvolume.StatusSuccess {
			t.Errorf("unmount %d: %+v", i, s)
		}
	}
	if n := waiting(); n != 0 {
		t.Errorf("%d requests left in %s", n, dir)
	}
}

// execBatches returns the number of commands of each batch the driver's
// log records ("exec batch", pkg/exec), in order.
func execBatches(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Msg      string
			Commands int
			Err      string
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "exec batch" {
			sizes = append(sizes, r.Commands)
			if r.Err != "" {
				t.Errorf("a batch of %d commands failed: %s", r.Commands, r.Err)
			}
		}
	}
	return sizes
}

// driverReply calls the driver at path as the kubelet does; a reply that
// is not JSON is a Failure saying so (callable from any goroutine).
func (g *glusterEnv) driverReply(path string, args ...string) flexvolume.Status {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"} // the kubelet's environment has no bed settings
	out, _ := cmd.CombinedOutput()
	var s flexvolume.Status
	if err := json.Unmarshal(bytes.TrimSpace(out), &s); err != nil {
		return flexvolume.Status{Status: flexvolume.StatusFailure, Message: fmt.Sprintf("driver %v: reply %q is not one JSON object: %v", args, out, err)}
	}
	return s
}

// setDriverMode rewrites the installed driver's settings (as the mount pod
// wrote them) with exec mode mode and a log file, restores them at the end
// of the test, and returns the log file's path.
func (g *glusterEnv) setDriverMode(t *testing.T, mode mcexec.ExecMode) string {
	t.Helper()
	return setDriverMode(t, g.driver, mode)
}

// setDriverMode rewrites the settings of the driver installed at driver.
func setDriverMode(t *testing.T, driver string, mode mcexec.ExecMode) string {
	t.Helper()
	return setDriverSettings(t, driver, mode, func(*flexvolume.Settings) {})
}

// setDriverSettings is setDriverMode, with change applied to the settings
// too.
func setDriverSettings(t *testing.T, driver string, mode mcexec.ExecMode, change func(*flexvolume.Settings)) string {
	t.Helper()
	path := driver + flexvolume.SettingsSuffix
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s flexvolume.Settings
	if err := json.Unmarshal(orig, &s); err != nil {
		t.Fatalf("driver settings %s: %v", path, err)
	}
	s.ExecMode = string(mode)
	s.LogFile = filepath.Join(nodeTempDir(t), filepath.Base(driver)+"-flexvolume.log")
	change(&s)
	writeDriverSettings(t, path, s)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(s.LogFile)
			t.Logf("driver log %s:\n%s", s.LogFile, log)
		}
		if err := writeFile(path, orig); err != nil {
			t.Errorf("restore %s: %v", path, err)
		}
	})
	return s.LogFile
}

// writeDriverSettings writes s to the driver's settings file path, as the
// mount pod does (a file renamed into place).
func writeDriverSettings(t *testing.T, path string, s flexvolume.Settings) {
	t.Helper()
	data, _ := json.MarshalIndent(s, "", "  ")
	if err := writeFile(path, append(data, '\n')); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to path atomically, 0644.
func writeFile(path string, data []byte) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// driverRecord is a record of the driver's JSON log.
type driverRecord struct {
	Msg      string
	Call     string
	Dir      string
	Status   string
	Message  string
	Err      string
	Decision struct{ Where, Via, Reason string }
}

// driverCall is one "flexvolume call" line of the driver's log.
type driverCall struct {
	driverRecord
	Time   time.Time
	TookMs float64
	took   time.Duration
}

// driverCalls returns the driver's logged calls of kind call.
func driverCalls(t *testing.T, path, call string) []driverCall {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []driverCall
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c driverCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("driver log line %q: %v", line, err)
		}
		if c.Msg == "flexvolume call" && c.Call == call {
			c.took = time.Duration(c.TookMs * float64(time.Millisecond))
			out = append(out, c)
		}
	}
	return out
}

// checkDriverLog checks the driver's log: a successful mount (its reply
// naming via) and unmount of dir (umount2 on the node, no exec), and every
// placement decision in the mount container id through via. The kubelet may see the unmount before the
// driver has logged it: the log is read until both calls are there.
func checkDriverLog(t *testing.T, path, dir, id string, via mcexec.Via) {
	t.Helper()
	var records []driverRecord
	var data []byte
	err := framework.Poll(context.Background(), "mount and unmount of "+dir+" in the driver's log", 100*time.Millisecond, 30*time.Second,
		func(context.Context) (bool, string, error) {
			var err error
			if data, err = os.ReadFile(path); err != nil {
				return false, err.Error(), nil
			}
			records = records[:0]
			var mounted, unmounted bool
			lines := strings.Split(string(data), "\n")
			for _, line := range lines[:len(lines)-1] { // complete lines only
				var r driverRecord
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					return false, "", fmt.Errorf("driver log line %q: %w", line, err)
				}
				records = append(records, r)
				if r.Msg == "flexvolume call" && r.Dir == dir && r.Status == flexvolume.StatusSuccess {
					mounted = mounted || r.Call == "mount" && strings.Contains(r.Message, "via "+string(via))
					unmounted = unmounted || r.Call == "unmount" && strings.Contains(r.Message, "on the node (umount2)")
				}
			}
			return mounted && unmounted, fmt.Sprintf("mount via %s logged %t, unmount on the node %t", via, mounted, unmounted), nil
		})
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	decisions := 0
	for _, r := range records {
		switch r.Msg {
		case "exec decision":
			decisions++
			if r.Decision.Where != "container "+id || r.Decision.Via != string(via) {
				t.Errorf("the driver placed a command in %s via %q (%s); want container %s via %s", r.Decision.Where, r.Decision.Via, r.Decision.Reason, id, via)
			}
		case "exec decision failed":
			t.Errorf("the driver could not place a command: %s", r.Err)
		}
	}
	if decisions < 1 {
		t.Errorf("no placement decision in the driver's log, want at least the mount's:\n%s", data)
	}
	t.Logf("driver log: mount of %s (%d decisions, all in container %.12s via %s) and its unmount on the node", dir, decisions, id, via)
}

func (g *glusterEnv) callDriver(t *testing.T, args ...string) flexvolume.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.driver, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"} // the kubelet's environment has no bed settings
	out, _ := cmd.CombinedOutput()
	var s flexvolume.Status
	if err := json.Unmarshal(bytes.TrimSpace(out), &s); err != nil {
		t.Fatalf("driver %v: reply %q is not one JSON object: %v", args, out, err)
	}
	return s
}

// testAllowedServers calls the installed driver as the kubelet does with
// servers the settings the mount pod wrote do not allow: the bed's overlay
// lists the node's host name (which resolves to loopback, and which the
// workloads above mount), not the loopback addresses themselves.
func (g *glusterEnv) testAllowedServers(t *testing.T) {
	dir := filepath.Join(g.bed.Env.KubeletRoot, "e2e-allowed-servers")
	t.Cleanup(func() { os.Remove(dir) })
	for _, tc := range []struct{ server, want string }{
		{"127.0.0.1", `invalid option "server": address 127.0.0.1 is a loopback address`},
		{"169.254.169.254", `invalid option "server": address 169.254.169.254 is a link-local address`},
		{"0.0.0.0", `invalid option "server": address 0.0.0.0 is an unspecified`},
		{"::ffff:127.0.0.1", `invalid option "server": "::ffff:127.0.0.1": IPv4-mapped IPv6 addresses are not supported`},
		{"localhost", `invalid option "server": localhost resolves to an address that is not allowed`},
	} {
		opts, err := json.Marshal(map[string]string{"server": tc.server, "volume": glusterVolume})
		if err != nil {
			t.Fatal(err)
		}
		s := g.callDriver(t, "mount", dir, string(opts))
		if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, tc.want) {
			t.Errorf("mount from %s: %+v, want a Failure with %q", tc.server, s, tc.want)
		} else {
			t.Logf("%s: %s", tc.server, s.Message)
		}
	}
	s := g.callDriver(t, "mount", dir, `{"server":"x","volume":"v","mountOptions":"log-level=TRACE"}`)
	if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, `log-level="TRACE"`) {
		t.Errorf("log-level=TRACE: %+v, want a Failure", s)
	}
}

func (g *glusterEnv) testBadOptions(t *testing.T) {
	bed := g.bed
	bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: bad-options
  namespace: %[1]s
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: %[2]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /data}
  volumes:
    - name: data
      flexVolume:
        driver: %[3]s
        options: {server: "gluster;reboot", volume: gv0}
`, g.ns, bed.Env.BaseImage, glusterDriver))
	err := framework.Poll(context.Background(), "FailedMount event naming the bad field", 500*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			evs, err := bed.Client.CoreV1().Events(g.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad-options"})
			if err != nil {
				return false, err.Error(), nil
			}
			var last string
			for _, ev := range evs.Items {
				last = ev.Reason + ": " + ev.Message
				if ev.Reason == "FailedMount" && strings.Contains(ev.Message, `invalid option \"server\"`) ||
					ev.Reason == "FailedMount" && strings.Contains(ev.Message, `invalid option "server"`) {
					t.Logf("event: %s", ev.Message)
					return true, "", nil
				}
			}
			return false, last, nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// testYieldEvents: another pod's registration for the plugin makes the
// mount pod yield, and its removal makes it register again; each is a
// Kubernetes Event on the mount pod (its ServiceAccount may create Events).
func (g *glusterEnv) testYieldEvents(t *testing.T) {
	bed := g.bed
	mp := g.mountPod(t)
	const plugin = glusterPlugin
	other := registration.Registration{PodNamespace: g.ns, PodName: "mountpod-usurper", PodUID: "00000000-0000-4000-8000-0000000000e3", ContainerName: "mount"}
	if err := registration.Write(bed.Env.RegistrationDir, plugin, other); err != nil {
		t.Fatal(err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			_, _ = registration.RemoveIfOwned(bed.Env.RegistrationDir, plugin, other.PodUID)
		}
	})
	waitPodEvents(t, bed, mp.Namespace, mp.Name, registrar.ReasonYielded, 1, plugin, "yields")
	if _, err := registration.RemoveIfOwned(bed.Env.RegistrationDir, plugin, other.PodUID); err != nil {
		t.Fatal(err)
	}
	removed = true
	waitPodEvents(t, bed, mp.Namespace, mp.Name, registrar.ReasonTakenBack, 1, plugin)
	if err := framework.Poll(context.Background(), "the mount pod registered again", 250*time.Millisecond, 30*time.Second,
		func(context.Context) (bool, string, error) {
			r, ok, err := registration.Read(bed.Env.RegistrationDir, plugin)
			return ok && err == nil && r.PodUID == string(mp.UID), fmt.Sprintf("%+v %t %v", r, ok, err), nil
		}); err != nil {
		t.Fatal(err)
	}
}
