//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestHostileTenant: whoever writes a volume controls its content, and the
// recovery acts on it as root. Here the tenant, through a client of their
// own, turns a subPath that a container has bound into a symbolic link to a
// node directory, then that container's FUSE daemon dies. The recovery must bring the volume back where
// it is the volume, and refuse the subPath: the node directory never shows
// in the container. And a FUSE daemon that a tenant drives past its
// memory limit is OOM-killed in its own scope, not a pod, and comes back.
// A container that swaps a directory of its mount's path for a symbolic
// link while the attach is about to start does not get the attach
// elsewhere, and a mount that takes a dead mount's device number is not
// taken for it (hostile_race_test.go). Once per exec path the driver's
// mount takes; and once, no exec path involved, that the API server keeps
// a volume's options from naming another pod (OptionsCannotNameAPod).
func TestHostileTenant(t *testing.T) {
	bed := framework.Current(t)
	// A mount and a daemon per pod: the tenant's and the victim's are
	// their own, and the Events name the pod; SubPathSymlinkTo runs with
	// the default shared mounts too. (With shared mounts, pods of two
	// namespaces never share a node's mount:
	// TestSharedMountsPerNamespace.)
	g := setupGlusterfsWith(t, bed, glusterSetup{perPodMounts: true})
	// No exec path: what the API server lets a volume's options say.
	t.Run("OptionsCannotNameAPod", func(t *testing.T) { g.testOptionsCannotNameAPod(t) })
	for _, mode := range []mcexec.ExecMode{mcexec.ModeSocket, mcexec.ModeCRI} {
		t.Run("SubPathSymlinkTo/"+string(mode), func(t *testing.T) { g.testSubPathSymlink(t, mode, false) })
		// The same with the driver's default: the victim's volume a bind
		// of the node's mount, whose recovery reattaches every bind.
		t.Run("SubPathSymlinkTo/shared-"+string(mode), func(t *testing.T) { g.testSubPathSymlink(t, mode, true) })
		t.Run("DaemonOverItsMemoryLimit/"+string(mode), func(t *testing.T) { g.testDaemonOOM(t, mode) })
		t.Run("AttachPathSwappedForSymlink/"+string(mode), func(t *testing.T) { g.testAttachPathSwapped(t, mode) })
		t.Run("DeadNumberTakenByAnotherMount/"+string(mode), func(t *testing.T) { g.testDeadNumberReused(t, mode) })
	}
}

// testOptionsCannotNameAPod: the Flexvolume driver takes the pod a mount
// is for (the pod its recovery Events go to) from the kubelet's
// kubernetes.io/pod.* options, and the kubelet lets a volume's own options
// override its keys. What keeps a pod author, or a PV's writer, from naming
// another pod (or the secret, or the read-only flag) there is the API
// server: it refuses options in the kubernetes.io and k8s.io namespaces, in
// a pod's inline flexVolume and in a PV's. Asked with a server-side dry
// run; the same pod and PV with options of their own only are accepted, so
// the refusal is the keys'.
func (g *glusterEnv) testOptionsCannotNameAPod(t *testing.T) {
	ctx := context.Background()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	own := map[string]string{"server": g.bed.Env.NodeName, "volume": glusterVolume}
	pod := func(opts map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "forger", Namespace: g.ns},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: g.bed.Env.BaseImage, Command: []string{"sleep", "1"},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					FlexVolume: &corev1.FlexVolumeSource{Driver: glusterDriver, Options: opts}}}},
			},
		}
	}
	pv := func(opts map[string]string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "forged-" + g.ns},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					FlexVolume: &corev1.FlexPersistentVolumeSource{Driver: glusterDriver, Options: opts}},
			},
		}
	}
	if _, err := g.bed.Client.CoreV1().Pods(g.ns).Create(ctx, pod(own), dry); err != nil {
		t.Fatalf("a pod with options of its own only is refused: %v", err)
	}
	if _, err := g.bed.Client.CoreV1().PersistentVolumes().Create(ctx, pv(own), dry); err != nil {
		t.Fatalf("a PV with options of its own only is refused: %v", err)
	}
	for _, key := range []string{"kubernetes.io/pod.name", "kubernetes.io/pod.namespace", "kubernetes.io/pod.uid",
		"kubernetes.io/secret/key", "kubernetes.io/readwrite", "Kubernetes.IO/pod.name", "k8s.io/pod.name"} {
		opts := maps.Clone(own)
		opts[key] = "ledger-0"
		_, perr := g.bed.Client.CoreV1().Pods(g.ns).Create(ctx, pod(opts), dry)
		_, verr := g.bed.Client.CoreV1().PersistentVolumes().Create(ctx, pv(opts), dry)
		for what, err := range map[string]error{"pod's inline flexVolume": perr, "PV's flexVolume": verr} {
			if err == nil || !strings.Contains(err.Error(), "namespaces are reserved") {
				t.Errorf("a %s with the option %s: %v; want it refused (namespaces are reserved)", what, key, err)
			}
		}
	}
	t.Logf("the API server refuses a kubernetes.io/ or k8s.io/ option in a pod's flexVolume and a PV's, e.g. kubernetes.io/pod.name")
}

// testSubPathSymlink: with shared, the victim's pod binds the node's mount
// of the volume (the driver's default), and the tenant's client is a mount
// of their own (as a pod of another namespace would have), which the
// victim's daemon's death leaves alive.
func (g *glusterEnv) testSubPathSymlink(t *testing.T, mode mcexec.ExecMode, shared bool) {
	bed := g.bed
	log := setDriverSettings(t, g.driver, mode, func(s *flexvolume.Settings) { s.SharedMounts = shared })
	name := "hostile-" + string(mode)
	if shared {
		name = "hostile-shared-" + string(mode)
	}
	// A node directory with a secret in it, where the mount pod sees it
	// too (the kubelet's directory): what the tenant wants to see.
	node := filepath.Join(bed.Env.KubeletRoot, "e2e-node-secret-"+name)
	if err := os.MkdirAll(node, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(node) })
	secret := fmt.Sprintf("node secret %d", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(node, "secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := name
	p := g.startPod(t, name, false,
		sleeper{name: "main", sleep: "infinity", mountPath: "/data"},
		sleeper{name: "victim", sleep: "infinity", mountPath: "/sub", subPath: sub})
	dir := g.volumeDir(p)
	waitMountedVia(t, log, dir, viaOf(t, mode))
	bed.MustExec(t, g.ns, name, "victim", "sh", "-c", "echo mine > /sub/own")
	if shared {
		if servedAt(t, dir) == dir {
			t.Fatalf("%s is a mount of its own, want a bind of the node's mount of the volume (shared mounts)", dir)
		}
		setDriverSettings(t, g.driver, mode, func(s *flexvolume.Settings) { s.SharedMounts = false })
	}

	// The tenant's client of the volume: their own pod here (their own
	// server would do as well).
	tenant := g.workload(t, "tenant-"+name)
	if shared && servedAt(t, g.volumeDir(tenant)) != g.volumeDir(tenant) {
		t.Fatalf("the tenant's volume %s is a bind of the victim's node's mount, want a mount of its own", g.volumeDir(tenant))
	}
	t.Cleanup(func() {
		if t.Failed() {
			mp := g.mountPod(t)
			t.Logf("mount pod log:\n%s", bed.Kubectl(t, "-n", mp.Namespace, "logs", "--tail=40", mp.Name))
		}
	})
	// The daemon dies while the mount pod is held still (SIGSTOP), so that
	// the tenant's move comes before the recovery, as a tenant who waits
	// for the death would have it. The dead client cannot see the move:
	// the victim's bind still names the directory it was made of.
	resume := g.killDaemonHeld(t, dir)
	// The tenant's move, through their client: the subPath becomes a link
	// to the node directory.
	bed.MustExec(t, g.ns, tenant.Name, "main", "sh", "-c",
		fmt.Sprintf("mv /data/%[1]s /data/%[1]s.orig && ln -s %[2]s /data/%[1]s && sync", sub, node))
	if m := containerMount(t, bed, g.ns, name, "victim", "/sub"); m.root != "/"+sub {
		t.Fatalf("the victim's /sub is %+v with its daemon dead; want the bind of /%s", m, sub)
	}
	resume()

	// The volume comes back in the container that mounts it whole, the
	// tenant's link in it ...
	err := framework.Poll(context.Background(), "the volume back in "+name+"/main", 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			out, se, err := bed.Exec(ctx, 30*time.Second, g.ns, name, "main", "readlink", "/data/"+sub)
			return err == nil && strings.TrimSpace(out) == node, fmt.Sprintf("%q %q %v", out, se, err), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	// ... and the victim's subPath is refused, as the pod's Event says,
	// or (the harm) the victim reads the node's secret there.
	var out, se string
	err = framework.Poll(context.Background(), "the subPath refused or the node's secret read", 250*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			out, se, _ = bed.Exec(ctx, 30*time.Second, g.ns, name, "victim", "cat", "/sub/secret")
			if strings.Contains(out, secret) {
				return true, "", nil
			}
			evs, err := bed.Client.CoreV1().Events(g.ns).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + name + ",reason=" + recovery.ReasonRecoveryFailed})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, ev := range evs.Items {
				if strings.Contains(ev.Message, "refused") && strings.Contains(ev.Message, "/"+sub) {
					t.Logf("Event %s: %s", ev.Reason, ev.Message)
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d Events %s, none refusing /%s; the victim's cat: %q", len(evs.Items), recovery.ReasonRecoveryFailed, sub, strings.TrimSpace(se)), nil
		})
	if err != nil {
		t.Error(err)
	}
	if strings.Contains(out, secret) {
		t.Fatalf("the victim reads the node's secret through its subPath: the recovery attached the node's %s", node)
	}
	// The victim's /sub is never the node directory: still the dead bind
	// of the volume's own directory.
	m := containerMount(t, bed, g.ns, name, "victim", "/sub")
	if m.fstype != "fuse.glusterfs" || m.root != "/"+sub {
		t.Errorf("the victim's /sub is %+v; want the volume's /%s (fuse.glusterfs), never the node's %s", m, sub, node)
	}
	t.Logf("the victim's /sub after the recovery: %+v; reading the node's file there: %q", m, strings.TrimSpace(se))
}

// testDaemonOOM: the kernel's OOM killer, confined to a FUSE daemon's
// scope, kills the daemon, and neither the workload nor the mount pod;
// the recovery then brings the volume back. A daemon grows as its clients
// and server drive it (caches, queues, threads); here a process placed in
// the daemon's scope stands in for that growth, so that the scope, not the
// node or the pod, hits its limit, and the daemon is made the OOM killer's
// first choice in it (raising a score needs no privilege). The daemon must
// not keep the system-node-critical mount pod's oom_score_adj (-997); on
// this bed the runtime restricts every container to its own score (0:
// restrict_oom_score_adj), so that the raise itself is proven by the scope
// package's tests, and here only the result.
func (g *glusterEnv) testDaemonOOM(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	log := g.setDriverMode(t, mode)
	mp := g.mountPod(t)
	w := g.startOwnStreamWriter(t, "oom-"+string(mode))
	w.retried = true
	dir := g.volumeDir(w.pod)
	waitMountedVia(t, log, dir, viaOf(t, mode))
	w.waitLines(t, 10)
	pids := fuseProcesses(t, dir)
	if len(pids) != 1 {
		t.Fatalf("%d glusterfs processes serve %s, want 1", len(pids), dir)
	}
	daemon := pids[0]
	adjFile := fmt.Sprintf("/proc/%d/oom_score_adj", daemon)
	if adj := strings.TrimSpace(readFile(t, adjFile)); adj != "0" {
		t.Errorf("the FUSE daemon %d has oom_score_adj %s; want the deploy's MOUNTPOD_SCOPE_OOM_SCORE_ADJ, 0 (never the mount pod's -997)", daemon, adj)
	}

	// The daemon's scope in the memory controller's hierarchy, and the
	// limit the plugin's scopes parent has.
	scope, v2 := memoryCgroup(t, daemon)
	limitFile, usageFile, oomFile := "memory.limit_in_bytes", "memory.usage_in_bytes", "memory.oom_control"
	if v2 {
		limitFile, usageFile, oomFile = "memory.max", "memory.current", "memory.events"
	}
	parentLimit := strings.TrimSpace(readFile(t, filepath.Join(filepath.Dir(scope), limitFile)))
	if n, err := strconv.ParseInt(parentLimit, 10, 64); err != nil || n > 64<<30 {
		t.Errorf("the scopes parent %s has %s %s; want the deploy's MOUNTPOD_SCOPE_MEMORY_LIMIT (4Gi)", filepath.Dir(scope), limitFile, parentLimit)
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(readFile(t, filepath.Join(scope, usageFile))), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	limit := usage + 64<<20
	if err := os.WriteFile(filepath.Join(scope, limitFile), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Fatal(err)
	}
	oomKills := func() int {
		for _, line := range strings.Split(readFileOr(filepath.Join(scope, oomFile)), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
				n, _ := strconv.Atoi(f[1])
				return n
			}
		}
		return 0
	}
	kills0 := oomKills()
	if err := os.WriteFile(adjFile, []byte("1000"), 0); err != nil {
		t.Fatal(err)
	}
	mountRestarts := restarts(t, bed, mp)
	before := w.lines(t)

	// The growth: a process in the daemon's scope that eats memory.
	hog := exec.Command("sh", "-c", `echo $$ > "$1" && exec tail /dev/zero`, "hog", filepath.Join(scope, "cgroup.procs"))
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	hogDone := make(chan error, 1)
	go func() { hogDone <- hog.Wait() }()
	t.Cleanup(func() {
		_ = hog.Process.Kill()
		<-hogDone
	})
	var kills int
	err = framework.Poll(context.Background(), fmt.Sprintf("the FUSE daemon %d OOM-killed in its scope %s", daemon, scope), 100*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			if n := oomKills(); n > kills {
				kills = n
			}
			return !processAlive(daemon), fmt.Sprintf("oom_kill %d", kills), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	// The stand-in goes next (the kernel's choice once the daemon is gone,
	// or this test's).
	select {
	case err := <-hogDone:
		hogDone <- err
		t.Logf("the stand-in ended: %v", err)
	case <-time.After(time.Minute):
		t.Logf("the stand-in still runs a minute after the daemon's death: killed by the test")
		_ = hog.Process.Kill()
	}
	if kills <= kills0 {
		t.Errorf("the daemon %d died, but the kernel counted no OOM kill in its scope %s (oom_kill %d before, %d after)", daemon, scope, kills0, kills)
	}
	t.Logf("the FUSE daemon %d, its scope at %d bytes of %d, OOM-killed there (oom_kill %d -> %d)", daemon, usage, limit, kills0, kills)

	// The volume comes back for the workload, which never restarted, and
	// the mount pod was not touched.
	w.waitLines(t, before+10)
	if now := fuseProcesses(t, dir); len(now) != 1 || now[0] == daemon {
		t.Errorf("glusterfs processes serving %s: %v (the OOM-killed one was %d); want one new", dir, now, daemon)
	}
	if m := containerMount(t, bed, g.ns, w.pod.Name, "main", "/data"); m.dev != hostMountDev(t, dir) || m.fstype != "fuse.glusterfs" || m.root != "/" {
		t.Errorf("the writer's /data is %+v; want the node's new mount of %s", m, dir)
	}
	w.assertNotRestarted(t)
	if n := restarts(t, bed, mp); n != mountRestarts {
		t.Errorf("the mount pod's containers restarted (%d restarts, %d before)", n, mountRestarts)
	}
	w.waitEvents(t, recovery.ReasonRecovered, 1, "came back")
	n, _ := w.verify(t)
	w.repeatsWereRetries(t)
	t.Logf("brick stream: %d lines verified", n)
}

// killDaemonHeld kills the FUSE daemon of the mount at dir while the mount
// pod's mountpod is held still (SIGSTOP), and waits until the mount answers
// "not connected": what a test does next comes before the recovery. It
// returns the resume (SIGCONT), which the test's end calls too.
func (g *glusterEnv) killDaemonHeld(t *testing.T, dir string) (resume func()) {
	t.Helper()
	mp := g.mountPod(t)
	serve := podProcess(t, mp.UID, "mountpod", "serve")
	if err := syscall.Kill(serve, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume = func() {
		if stopped {
			stopped = false
			if err := syscall.Kill(serve, syscall.SIGCONT); err != nil {
				t.Errorf("resume the mount pod's mountpod %d: %v", serve, err)
			}
		}
	}
	t.Cleanup(resume)
	served := servedAt(t, dir) // dir, or the node's mount it binds
	pids := fuseProcesses(t, served)
	if len(pids) != 1 {
		t.Fatalf("%d glusterfs processes serve %s, want 1", len(pids), served)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNotConnected(t, dir)
	return resume
}

// memoryCgroup returns the directory of pid's cgroup in the memory
// controller's hierarchy, and whether that is cgroup v2.
func memoryCgroup(t *testing.T, pid int) (string, bool) {
	t.Helper()
	cgs := procCgroups(t, pid)
	for h, p := range cgs {
		if slices.Contains(strings.Split(h, ","), "memory") {
			return filepath.Join("/sys/fs/cgroup", h, p), false
		}
	}
	if p, ok := cgs[""]; ok {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			return filepath.Join("/sys/fs/cgroup", p), true
		}
	}
	t.Fatalf("process %d is in no memory cgroup: %v", pid, cgs)
	return "", false
}

// restarts sums the restart counts of pod p's containers now.
func restarts(t *testing.T, bed *framework.Bed, p corev1.Pod) int32 {
	t.Helper()
	cur, err := bed.Client.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.UID != p.UID {
		t.Fatalf("the pod %s/%s was replaced", p.Namespace, p.Name)
	}
	var n int32
	for _, cs := range cur.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func readFileOr(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}
