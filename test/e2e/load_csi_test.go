//go:build e2e && e2e_load

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// csiLoadWave runs the wave on PersistentVolumes of the GlusterFS CSI
// driver, started on the node and registered with the kubelet, its
// commands placed in mode: one static volume per GlusterFS volume
// (ReadWriteMany), bound before the wave, each staged once on the node by
// the mount pod and published into the loadPods/len(vols) pods that use
// it. As in the Flexvolume waves, every pod must write and read its volume
// and be Running with no failed mount, and each staging mount must have
// gone through mode's path; then all pods are deleted at once and nothing
// of the volumes may be left (staging or published mount, FUSE daemon,
// scope, mount record). It returns the time until all pods were Running.
func (g *glusterEnv) csiLoadWave(t *testing.T, bin string, mode mcexec.ExecMode, vols []string, parent string) waveFigures {
	bed := g.bed
	ctx := context.Background()
	wave := "csi-" + string(mode)
	label := "e2e-load=" + wave
	logPath := filepath.Join(bed.Env.LogDir, "csi-driver-load-"+string(mode)+".log")
	startRegisteredCSIDriver(t, bin, logPath, filepath.Join(bed.Env.KubeletRoot, "plugins", csiGlusterDriver), mode)
	waitCSINode(t, bed, csiGlusterDriver)

	// The claims are the cluster's state before the wave, not the node's
	// work in it: bound first.
	claims := make([]string, len(vols))
	var objs strings.Builder
	for i, v := range vols {
		claims[i] = "load-" + wave + "-" + v
		fmt.Fprintf(&objs, `---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: %[1]s-%[2]s
  labels: {e2e-load: %[6]s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: %[2]s, name: %[1]s}
  csi:
    driver: %[3]s
    volumeHandle: %[2]s-%[1]s
    volumeAttributes: {server: %[4]q, volume: %[5]s, mountOptions: log-level=WARNING}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[1]s
  namespace: %[2]s
  labels: {e2e-load: %[6]s}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: %[1]s-%[2]s
  resources: {requests: {storage: 1Gi}}
`, claims[i], g.ns, csiGlusterDriver, bed.Env.NodeName, v, wave)
	}
	bed.Apply(t, objs.String())
	// Pods first (their volumes are unstaged before the driver stops, at
	// the end of the test), then the claims and volumes.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_ = bed.Client.CoreV1().Pods(g.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label})
		_ = framework.Poll(ctx, "the wave's pods gone and no mount of "+csiGlusterDriver+" left", time.Second, 5*time.Minute, func(ctx context.Context) (bool, string, error) {
			left, err := bed.Client.CoreV1().Pods(g.ns).List(ctx, metav1.ListOptions{LabelSelector: label})
			if err != nil {
				return false, "", err
			}
			mounts := csiMounts(t, bed.Env.KubeletRoot, csiGlusterDriver)
			return len(left.Items) == 0 && len(mounts) == 0, fmt.Sprintf("%d pods, %d mounts left", len(left.Items), len(mounts)), nil
		})
		bed.Kubectl(t, "-n", g.ns, "delete", "pvc", "-l", label, "--wait")
		bed.Kubectl(t, "delete", "pv", "-l", label, "--wait")
	})
	for _, c := range claims {
		waitClaimBound(t, bed, g.ns, c)
	}

	mp := g.mountPod(t)
	mpPID := mountpodPID(t, mp.UID)
	anonIdle, threadsIdle := procStatusBytes(mpPID, "RssAnon"), procStatusNumber(mpPID, "Threads")
	cpu0 := podCPU(t, mp.UID)
	var peak loadPeak
	stop := peak.start(mp.UID, mpPID, parent, filepath.Join(bed.Env.KubeletRoot, "plugins/kubernetes.io/csi", csiGlusterDriver))
	defer stop()
	cgroups := g.loadCgroups(t, string(mp.UID), parent)
	cpuStart := takeCPU(cgroups)
	stopProfile := profileKubelet(t, g.bed, profileName(t))
	defer stopProfile()
	start := time.Now()
	createLoadPods(t, g, wave, func(i int) corev1.VolumeSource {
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claims[i%len(claims)]}}
	})
	pods := waitAllRunning(t, bed, g.ns, label, loadPods, 5*time.Minute)
	allRunning := time.Since(start)
	cpuRunning := takeCPU(cgroups)
	stopProfile()
	fig := waveFigures{running: allRunning, cpu: cpuRunning.busy - cpuStart.busy}
	t.Logf("CPU until all Running: %s", cpuSplit(cpuStart, cpuRunning))
	cpu := podCPU(t, mp.UID) - cpu0
	stop()

	for _, p := range pods {
		out, err := bed.Client.CoreV1().Pods(g.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "main"}).Do(ctx).Raw()
		if err != nil || strings.TrimSpace(string(out)) != "ok "+p.Name {
			t.Errorf("pod %s logged %q (%v), want it to have written and read its volume", p.Name, out, err)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("pod %s restarted %d times", p.Name, cs.RestartCount)
			}
		}
	}
	evs, err := bed.Client.CoreV1().Events(g.ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedMount"})
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet fetches a pod's claim as soon as it sees the pod; the API
	// server's node authorizer lets it once its graph links the pod to the
	// node, a moment later, and the kubelet asks again. That is the
	// cluster's, before any mount is attempted: counted apart. Any other
	// FailedMount is a failed mount.
	var authorizerLag, failed []string
	for _, ev := range evs.Items {
		if !strings.HasPrefix(ev.InvolvedObject.Name, "load-"+wave+"-") {
			continue
		}
		if strings.Contains(ev.Message, "failed to fetch PVC from API server") && strings.Contains(ev.Message, "no relationship found between node") {
			authorizerLag = append(authorizerLag, ev.InvolvedObject.Name)
			continue
		}
		failed = append(failed, ev.InvolvedObject.Name+": "+ev.Message)
	}
	if len(failed) != 0 {
		t.Errorf("%d FailedMount Events, want none; first: %s", len(failed), failed[0])
	}
	if len(authorizerLag) != 0 {
		t.Logf("%d FailedMount Events before any mount (the node authorizer had not yet linked the pod to the node when the kubelet fetched its claim): %v", len(authorizerLag), authorizerLag)
	}
	if codes := csiCallCodes(t, logPath, "NodeStageVolume"); len(codes) != 1 || codes["OK"] != len(vols) {
		t.Errorf("the driver's NodeStageVolume calls by code: %v, want %d OK and nothing else (one per volume, none retried)", codes, len(vols))
	}
	var staging []string
	for _, m := range csiMounts(t, bed.Env.KubeletRoot, csiGlusterDriver) {
		if strings.HasSuffix(m, "/globalmount") {
			staging = append(staging, m)
		}
	}
	if len(staging) != len(vols) {
		t.Errorf("%d staging mounts of %s on the node, want one per volume (%d): %v", len(staging), csiGlusterDriver, len(vols), staging)
	}
	if n := stagedVia(t, logPath, viaOf(t, mode)); n != len(vols) {
		t.Errorf("the driver's log %s shows %d staging mounts, want %d (one per volume), via %s", logPath, n, len(vols), viaOf(t, mode))
	}
	if daemons, _ := fuseDaemonsOf(staging); daemons != len(vols) {
		t.Errorf("%d FUSE daemons serve the %d staging mounts, want one each", daemons, len(vols))
	}
	stage, publish := callTimes(t, logPath, "NodeStageVolume"), callTimes(t, logPath, "NodePublishVolume")
	if len(publish) != loadPods {
		t.Errorf("the driver's log shows %d NodePublishVolume calls that succeeded, want %d (one per pod)", len(publish), loadPods)
	}
	t.Logf("%d pods Running in %s on %d volumes of %s through %s; NodeStageVolume p50 %s, p99 %s (%d calls); NodePublishVolume p50 %s, p99 %s (%d calls)",
		len(pods), allRunning.Round(time.Millisecond), len(vols), csiGlusterDriver, mode,
		msPct(stage, 50), msPct(stage, 99), len(stage), msPct(publish, 50), msPct(publish, 99), len(publish))
	if mode == mcexec.ModeCRI {
		sizes := execBatches(t, logPath)
		n := 0
		for _, k := range sizes {
			n += k
		}
		t.Logf("through CRI: %d commands went in %d batches (sizes %v)", n, len(sizes), sizes)
	}
	t.Logf("mount pod: peak RSS of mountpod %.1f MiB (its own, RssAnon: %.1f MiB before the wave, peak %.1f MiB, %.1f MiB after; its threads %d before, %d after), peak memory of its cgroup %.1f MiB (working set %.1f MiB; at that peak %s; %.1f MiB right after), CPU %s during the wave; in scopes at the end of the wave, %d FUSE daemons using %.1f MiB",
		mib(peak.mountpodHWM), mib(anonIdle), mib(peak.mountpodAnon), mib(procStatusBytes(mpPID, "RssAnon")), threadsIdle, procStatusNumber(mpPID, "Threads"), mib(peak.podMemory), mib(peak.podWorkingSet), peak.atPeak, mib(podMemoryUsage(mp.UID).usage), cpu.Round(time.Millisecond),
		peak.daemons, mib(peak.daemonRSS))

	// All deleted at once: every volume unpublished and unstaged, nothing
	// left behind.
	cpuStart = takeCPU(cgroups)
	start = time.Now()
	if err := bed.Client.CoreV1().Pods(g.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label}); err != nil {
		t.Fatal(err)
	}
	var podsGone, mountsGone time.Duration
	err = framework.Poll(ctx, "the wave's pods gone and their volumes unstaged", time.Second, 5*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			left, err := bed.Client.CoreV1().Pods(g.ns).List(ctx, metav1.ListOptions{LabelSelector: label})
			if err != nil {
				return false, "", err
			}
			mounts := csiMounts(t, bed.Env.KubeletRoot, csiGlusterDriver)
			l := leftovers(t, staging, parent, bed.Env.RegistrationDir)
			now := time.Since(start)
			if podsGone == 0 && len(left.Items) == 0 {
				podsGone = now
			}
			if mountsGone == 0 && len(mounts) == 0 {
				mountsGone = now
			}
			return len(left.Items) == 0 && len(mounts) == 0 && l.none(), fmt.Sprintf("%d pods, %d mounts of the driver, %s", len(left.Items), len(mounts), l), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	fig.deleted = time.Since(start)
	cpuDeleted := takeCPU(cgroups)
	fig.deleteCPU = cpuDeleted.busy - cpuStart.busy
	t.Logf("all %d deleted at once: pods gone, volumes unpublished and unstaged, no FUSE daemon, scope or mount record left after %s (no mount after %s, no pod after %s)",
		len(pods), fig.deleted.Round(time.Millisecond), mountsGone.Round(time.Second), podsGone.Round(time.Second))
	t.Logf("CPU of the deletion: %s", cpuSplit(cpuStart, cpuDeleted))
	unstage, unpublish := callTimes(t, logPath, "NodeUnstageVolume"), callTimes(t, logPath, "NodeUnpublishVolume")
	if len(unstage) != len(vols) || len(unpublish) != loadPods {
		t.Errorf("the driver's log shows %d NodeUnstageVolume and %d NodeUnpublishVolume calls that succeeded, want %d and %d", len(unstage), len(unpublish), len(vols), loadPods)
	}
	t.Logf("NodeUnpublishVolume p50 %s, p99 %s; NodeUnstageVolume p50 %s, p99 %s",
		msPct(unpublish, 50), msPct(unpublish, 99), msPct(unstage, 50), msPct(unstage, 99))
	return fig
}

// msPct is the p-th percentile of ms (milliseconds) as a duration.
func msPct(ms []float64, p int) time.Duration {
	if len(ms) == 0 {
		return 0
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return (time.Duration(s[min(len(s)-1, len(s)*p/100)] * float64(time.Millisecond))).Round(time.Millisecond)
}

// csiCallCodes counts the calls of a CSI method in the driver's log by
// their gRPC code.
func csiCallCodes(t *testing.T, logPath, method string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		var r struct{ Msg, Method, Code string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "csi call" && strings.HasSuffix(r.Method, "/"+method) {
			codes[r.Code]++
		}
	}
	return codes
}
