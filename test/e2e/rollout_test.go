//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestRollout runs `mountpod-rollout` (the real binary) against a mount-pod
// DaemonSet of its own namespace on the bed's node:
//
//   - a workload (a Deployment) appends a checksummed stream to a hostPath
//     file and holds a volume the rollout must wait for: a memory emptyDir,
//     a tmpfs the kubelet mounts under its pods directory and unmounts only
//     after the pod is gone, observed through the mount pod like a plugin's
//     mount (--mount-pattern);
//   - PDBBlocks: the DaemonSet moves to a new image tag; a
//     PodDisruptionBudget forbids the eviction: exit 1, taint on, the reason
//     recorded on the DaemonSet and in an Event, nothing replaced;
//   - ResumeFinishes: without the budget, --resume evicts the workload,
//     waits for the tmpfs to go, replaces the mount pod, waits until it is
//     Ready (registered), removes the taint; the workload runs again and
//     every line written before verifies;
//   - BadImage: an image whose mount pod cannot become Ready (a required
//     tool missing) stops the rollout with the taint on; after fixing the
//     DaemonSet, --resume finishes it.
//
// TestRolloutGlusterfs does the same with the GlusterFS mount pod of
// deploy/glusterfs and a workload on a GlusterFS Flexvolume.
func TestRollout(t *testing.T) {
	bed := framework.Current(t)
	r := setUpRollout(t, bed)

	t.Run("DryRun", r.testDryRun)
	if t.Failed() {
		return
	}
	t.Run("PDBBlocks", r.testPDBBlocks)
	if t.Failed() {
		return
	}
	t.Run("ResumeFinishes", r.testResumeFinishes)
	if t.Failed() {
		return
	}
	t.Run("BadImage", r.testBadImage)
}

const (
	// rolloutDS is named as deploy/glusterfs names its DaemonSet: the
	// rollout runs with exactly deploy/rbac, which grants DaemonSets and
	// their Leases by name.
	rolloutDS       = "glusterfs-mountpod"
	rolloutSelector = "app=rollout-mountpod"
	writerSelector  = "app=writer"
	scratchPattern  = `/volumes/kubernetes\.io~empty-dir/scratch$`
)

type rolloutEnv struct {
	bed *framework.Bed
	// sa is the ServiceAccount of deploy/rbac the rollout runs as.
	sa      *framework.ServiceAccountKubeconfig
	ns      string
	plugin  string
	binary  string
	dataDir string
	newTag  string
}

func setUpRollout(t *testing.T, bed *framework.Bed) *rolloutEnv {
	t.Helper()
	if bed.Env.MountpodImage == "" || bed.Env.KubeletRoot == "" || bed.Env.BaseImage == "" {
		t.Fatal("the bed's env has no MOUNTPOD_IMAGE, KUBELET_ROOT or BASE_IMAGE")
	}
	// The writer's hostPath directory outlives the namespace: its removal,
	// a cleanup registered first, runs last, once the writer is gone (see
	// below); removed while the writer appends, it was found not empty.
	dataDir := t.TempDir()
	r := &rolloutEnv{bed: bed, ns: bed.CreateNamespace(t, "rollout"), dataDir: dataDir}
	r.plugin = "e2e.mountcontainers.io/" + r.ns
	r.binary = buildRollout(t)
	r.sa = rolloutServiceAccount(t, bed, r.ns, "-"+r.ns)
	t.Cleanup(func() {
		// Never leave the only node fenced for the tests that follow.
		bed.RemoveTaints(t, rollout.TaintKey, r.taintValue())
		if p, err := registration.Path(bed.Env.RegistrationDir, r.plugin); err == nil {
			_ = os.Remove(p)
		}
	})

	// A new tag of the same image, for the upgrade.
	r.newTag = strings.TrimSuffix(r.bed.Env.MountpodImage, ":dev") + ":rollout-" + strings.TrimPrefix(r.ns, "rollout-")
	ctr := func(args ...string) {
		cmd := exec.Command("ctr", append([]string{"-a", r.bed.Env.CRISocket, "-n", "k8s.io", "images"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ctr images %v: %v\n%s", args, err, out)
		}
	}
	ctr("tag", "--force", r.bed.Env.MountpodImage, r.newTag)
	t.Cleanup(func() {
		_ = exec.Command("ctr", "-a", r.bed.Env.CRISocket, "-n", "k8s.io", "images", "rm", r.newTag).Run()
	})

	bed.Apply(t, r.daemonSet(bed.Env.MountpodImage))
	bed.WaitPodsBySelector(t, r.ns, rolloutSelector, 1, true, 2*time.Minute)
	bed.Apply(t, r.writer())
	t.Cleanup(func() { r.deleteWriter(t) })
	w := bed.WaitPodsBySelector(t, r.ns, writerSelector, 1, true, 2*time.Minute)[0]
	r.waitLines(t, 10, time.Minute)

	// The premise of wait-unmount: the mount pod sees the workload's tmpfs.
	mp := r.mountPod(t)
	out := bed.MustExec(t, r.ns, mp.Name, "mount", "cat", "/proc/self/mountinfo")
	mounts, err := rollout.ParseMountInfo([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	matcher, err := rollout.NewMountMatcher(nil, nil, nil, []string{scratchPattern})
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, m := range mounts {
		seen = seen || (matcher.Match(m) && strings.Contains(m.Target, string(w.UID)))
	}
	if !seen {
		t.Fatalf("the mount pod does not see the writer's emptyDir tmpfs:\n%s", out)
	}
	return r
}

func (r *rolloutEnv) daemonSet(image string) string {
	e := r.bed.Env
	return mountPodDS{
		Namespace: r.ns, Name: rolloutDS, App: "rollout-mountpod", Image: image,
		Plugins: []string{r.plugin}, RegistrationDir: e.RegistrationDir, GracePeriod: 5,
		OnDelete: true, Tolerate: rollout.TaintKey, Readiness: true,
		Mounts: []hostPathMount{{Name: "kubelet", HostPath: e.KubeletRoot, MountPath: e.KubeletRoot, Type: "Directory", Bidirectional: true}},
	}.manifest()
}

// writer appends "<n> <ns time> <pod> <sha256 of the first three, 16 hex>"
// lines to /data/stream (a hostPath), continuing the count of an existing
// stream, and keeps a memory emptyDir busy.
// deleteWriter deletes the writer's Deployment and waits until none of its
// pods is left (2 min guard), so that nothing writes to its hostPath
// directory any more.
func (r *rolloutEnv) deleteWriter(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Deleted gracefully (a second), never forced: a forced deletion
	// removes the pod from the API while its container may still write.
	fg := metav1.DeletePropagationForeground
	grace := int64(1)
	_ = r.bed.Client.AppsV1().Deployments(r.ns).Delete(ctx, "writer", metav1.DeleteOptions{PropagationPolicy: &fg})
	_ = r.bed.Client.CoreV1().Pods(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{LabelSelector: writerSelector})
	err := framework.Poll(ctx, "the writer's pods gone", 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			pods, err := r.bed.Client.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: writerSelector})
			if err != nil {
				return false, err.Error(), nil
			}
			return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items)), nil
		})
	if err != nil {
		t.Errorf("delete the writer: %v", err)
	}
}

func (r *rolloutEnv) writer() string {
	return writerDeployment(r.ns, r.bed.Env.BaseImage, fmt.Sprintf(`      - name: data
        hostPath: {path: %q, type: Directory}
      - name: scratch
        emptyDir: {medium: Memory, sizeLimit: 1Mi}
`, r.dataDir))
}

// writerDeployment is a Deployment "writer" (label app=writer) running
// writerScript with the volumes "data" and "scratch" that volumes (the YAML
// of the pod's volume list items) defines.
func writerDeployment(ns, image, volumes string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: writer
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: writer}
  template:
    metadata:
      labels: {app: writer, e2e-namespace: %[1]s}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: %[2]s
        imagePullPolicy: Never
        command: ["sh", "-c", %[3]q]
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: scratch, mountPath: /scratch}
      volumes:
%[4]s`, ns, image, writerScript, volumes)
}

// writerScript appends a numbered, checksummed line to /data/stream every
// 100 ms, continuing the count of an existing stream, and keeps
// /scratch busy.
const writerScript = `trap 'exit 0' TERM
i=$(wc -l < /data/stream 2>/dev/null || echo 0)
while :; do
  line="$i $(date +%s%N) $HOSTNAME"
  sum=$(printf '%s' "$line" | sha256sum | cut -c1-16)
  printf '%s %s\n' "$line" "$sum" >> /data/stream
  printf '%s\n' "$line" > /scratch/last
  i=$((i+1))
  sleep 0.1
done`

// verifyStream checks every complete line of the stream and returns how many
// there are and which pods wrote them.
func (r *rolloutEnv) verifyStream(t *testing.T) (int, map[string]int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.dataDir, "stream"))
	if err != nil {
		t.Fatal(err)
	}
	return verifyStream(t, data)
}

// verifyStream checks every line of a stream the writer wrote: each line
// numbered one more than the last (none lost or doubled) and matching its
// checksum. It returns how many lines there are and which pods wrote them.
func verifyStream(t *testing.T, data []byte) (int, map[string]int) {
	t.Helper()
	writers := map[string]int{}
	n := 0
	// The writer may be live: a last line without its newline may be a
	// write under way (a write across a page boundary shows in two steps).
	// It is left out; had it been cut short for good, the next line would
	// be appended to it and fail as malformed (as in checkRetriedStream).
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			t.Fatalf("stream line %d malformed: %q", n, sc.Text())
		}
		sum := sha256.Sum256([]byte(strings.Join(f[:3], " ")))
		if hex.EncodeToString(sum[:])[:16] != f[3] {
			t.Fatalf("stream line %d fails its checksum: %q", n, sc.Text())
		}
		if i, err := strconv.Atoi(f[0]); err != nil || i != n {
			t.Fatalf("stream line %d numbered %q: a line was lost or doubled", n, f[0])
		}
		writers[f[2]]++
		n++
	}
	return n, writers
}

func (r *rolloutEnv) waitLines(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	err := framework.Poll(context.Background(), fmt.Sprintf("%d lines in the stream", n), 200*time.Millisecond, timeout,
		func(context.Context) (bool, string, error) {
			// The writer's first line creates the stream: none yet is
			// no line yet (a loaded machine starts the pod's shell late).
			if _, err := os.Stat(filepath.Join(r.dataDir, "stream")); errors.Is(err, os.ErrNotExist) {
				return false, "no stream yet", nil
			}
			got, _ := r.verifyStream(t)
			return got >= n, fmt.Sprintf("%d lines", got), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// runRollout runs the binary and returns its stdout, stderr and exit code.
func (r *rolloutEnv) runRollout(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return r.startRollout(t, args...)()
}

// startRollout starts the binary, as deploy/rbac's ServiceAccount, and
// returns a function that waits for it and returns its stdout, stderr and
// exit code.
func (r *rolloutEnv) startRollout(t *testing.T, args ...string) func() (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	args = append(append([]string{"-n", r.ns,
		// The selector applies to the whole node: name this test's writer only.
		"--pod-selector", writerSelector + ",e2e-namespace=" + r.ns, "--mount-pattern", scratchPattern,
		// The deletion's and readiness' bounds are hang guards: a runtime
		// can take half a minute to stop a container whose probe it is
		// running (seen with containerd 1.6).
		"--poll-interval", "500ms", "--drain-timeout", "20s", "--unmount-timeout", "1m", "--delete-timeout", "2m", "--ready-timeout", "2m",
		"--evict-retry-delay", "1s",
		// The writer's memory emptyDir is scratch space, deleted with it.
		"--delete-emptydir-data"}, args...), rolloutDS)
	cmd := exec.CommandContext(ctx, r.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+r.sa.Path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("run %s: %v", r.binary, err)
	}
	return func() (string, string, int) {
		t.Helper()
		defer cancel()
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatalf("run %s: %v", r.binary, err)
		}
		t.Logf("mountpod-rollout %s (as %s): exit %d in %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.sa.User, code,
			time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
		return stdout.String(), stderr.String(), code
	}
}

// rolloutServiceAccount binds a ServiceAccount in namespace to exactly the
// rules of deploy/rbac, RBAC and admission policies, and returns its
// kubeconfig (a TokenRequest token), after checking that it is no
// administrator and that the policies are in force.
func rolloutServiceAccount(t *testing.T, bed *framework.Bed, namespace, suffix string) *framework.ServiceAccountKubeconfig {
	t.Helper()
	sa := bed.RBACKubeconfig(t, "deploy/rbac", namespace, suffix)
	// The authorizer's cache may lag the new bindings by a moment.
	if err := framework.Poll(context.Background(), sa.User+" may patch daemonset "+rolloutDS, 200*time.Millisecond, 30*time.Second,
		func(context.Context) (bool, string, error) {
			return sa.Can(t, "patch", "apps", "daemonsets", "", namespace, rolloutDS), "not yet", nil
		}); err != nil {
		t.Fatal(err)
	}
	if sa.Can(t, "delete", "", "pods", "", "default", "") || sa.Can(t, "patch", "apps", "daemonsets", "", namespace, "kube-proxy") {
		t.Fatalf("%s may delete pods in default or patch daemonset kube-proxy: not the RBAC of deploy/rbac", sa.User)
	}
	checkRolloutAdmission(t, bed, sa, namespace)
	t.Logf("mountpod-rollout runs as %s, bound to deploy/rbac and its policies %v", sa.User, sa.Policies)
	return sa
}

// checkRolloutAdmission waits until deploy/rbac's admission policies (as
// RBACKubeconfig copied them for sa) apply to sa, then checks, with dry
// runs as sa, what they refuse: any change of a node but its
// mountcontainers.io/upgrading NoSchedule taint, any change of the
// DaemonSet but its rollout record, and Leases not named after a
// mount-pod DaemonSet.
func checkRolloutAdmission(t *testing.T, bed *framework.Bed, sa *framework.ServiceAccountKubeconfig, namespace string) {
	t.Helper()
	ctx := context.Background()
	nodes := sa.Client.CoreV1().Nodes()
	// update makes change to the node as sa, in a dry run.
	update := func(ctx context.Context, change func(*corev1.Node)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := nodes.Get(ctx, bed.Env.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(n)
			_, err = nodes.Update(ctx, n, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
	}
	refused := func(err error) bool {
		return err != nil && slices.ContainsFunc(sa.Policies, func(p string) bool { return strings.Contains(err.Error(), "'"+p+"'") })
	}
	// The API server loads each new policy on its own, asynchronously:
	// wait until each of the three refuses one change before the table
	// below holds any of them to a verdict.
	waitRefused := func(what string, try func(context.Context) error) {
		t.Helper()
		var last error
		if err := framework.Poll(ctx, "deploy/rbac's policies refuse "+what+" as "+sa.User, 200*time.Millisecond, time.Minute,
			func(ctx context.Context) (bool, string, error) {
				last = try(ctx)
				return refused(last), fmt.Sprint(last), nil
			}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s refused: %v", what, last)
	}
	waitRefused("a node's label change", func(ctx context.Context) error {
		return update(ctx, func(n *corev1.Node) { metav1.SetMetaDataLabel(&n.ObjectMeta, "e2e.mountcontainers.io/probe", sa.Name) })
	})
	_, dsErr := bed.Client.AppsV1().DaemonSets(namespace).Get(ctx, rolloutDS, metav1.GetOptions{})
	dss := sa.Client.AppsV1().DaemonSets(namespace)
	if dsErr == nil {
		waitRefused("a DaemonSet's label change", func(ctx context.Context) error {
			_, err := dss.Patch(ctx, rolloutDS, types.MergePatchType, []byte(`{"metadata":{"labels":{"e2e.mountcontainers.io/probe":"x"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
	}
	leases := sa.Client.CoordinationV1().Leases(namespace)
	waitRefused("a Lease of another name", func(ctx context.Context) error {
		_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "e2e-probe"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	taint := func(effect corev1.TaintEffect) func(*corev1.Node) {
		return func(n *corev1.Node) {
			// Unique by key and effect: in place of any left over.
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == rollout.TaintKey && t.Effect == effect })
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: rollout.TaintKey, Value: namespace + "." + rolloutDS, Effect: effect})
		}
	}
	for _, tc := range []struct {
		what   string
		change func(*corev1.Node)
		admit  bool
	}{
		{"the rollout's taint", taint(corev1.TaintEffectNoSchedule), true},
		{"a NoExecute taint of the rollout's key", taint(corev1.TaintEffectNoExecute), false},
		{"another taint", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "e2e.mountcontainers.io/probe", Effect: corev1.TaintEffectNoSchedule})
		}, false},
		{"cordoning", func(n *corev1.Node) { n.Spec.Unschedulable = !n.Spec.Unschedulable }, false},
		{"an annotation", func(n *corev1.Node) {
			metav1.SetMetaDataAnnotation(&n.ObjectMeta, "e2e.mountcontainers.io/probe", sa.Name)
		}, false},
	} {
		err := update(ctx, tc.change)
		if (tc.admit && err != nil) || (!tc.admit && !refused(err)) {
			t.Errorf("a dry-run node update adding %s as %s: %v; want admitted %v", tc.what, sa.User, err, tc.admit)
		}
	}
	// The DaemonSet, where it exists already: only the rollout's record
	// may change (the account may get and patch it, not update it).
	if dsErr == nil {
		for _, tc := range []struct {
			what  string
			typ   types.PatchType
			patch string
			admit bool
		}{
			{"the rollout's record", types.MergePatchType, `{"metadata":{"annotations":{"` + rollout.RecordAnnotation + `":"{}"}}}`, true},
			{"the image", types.JSONPatchType, `[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"e2e.invalid/other"}]`, false},
			{"another annotation", types.MergePatchType, `{"metadata":{"annotations":{"e2e.mountcontainers.io/probe":"x"}}}`, false},
		} {
			_, err := dss.Patch(ctx, rolloutDS, tc.typ, []byte(tc.patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			if (tc.admit && err != nil) || (!tc.admit && !refused(err)) {
				t.Errorf("a dry-run patch of DaemonSet %s/%s changing %s as %s: %v; want admitted %v", namespace, rolloutDS, tc.what, sa.User, err, tc.admit)
			}
		}
	}
	for name, admit := range map[string]bool{rolloutDS: true, "kube-controller-manager": false} {
		_, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		// Admission comes first: a Lease that exists was admitted.
		if (admit && err != nil && !apierrors.IsAlreadyExists(err)) || (!admit && !refused(err)) {
			t.Errorf("a dry-run creation of Lease %s/%s as %s: %v; want admitted %v", namespace, name, sa.User, err, admit)
		}
	}
}

// leaseHolder returns the holder of the rollout's Lease ("" if none).
func (r *rolloutEnv) leaseHolder(ctx context.Context) string {
	l, err := r.bed.Client.CoordinationV1().Leases(r.ns).Get(ctx, rolloutDS, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (r *rolloutEnv) mountPod(t *testing.T) corev1.Pod {
	t.Helper()
	return r.bed.WaitPodsBySelector(t, r.ns, rolloutSelector, 1, true, 2*time.Minute)[0]
}

// anyPod returns the one pod matching selector, ready or not.
func (r *rolloutEnv) anyPod(t *testing.T, selector string) corev1.Pod {
	t.Helper()
	pods, err := r.bed.Client.CoreV1().Pods(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d pods match %s, want 1", len(pods.Items), selector)
	}
	return pods.Items[0]
}

func (r *rolloutEnv) taintValue() string { return r.ns + "." + rolloutDS }

func (r *rolloutEnv) tainted(t *testing.T) bool {
	t.Helper()
	return len(r.bed.Taints(t, rollout.TaintKey, r.taintValue())) > 0
}

func (r *rolloutEnv) record(t *testing.T) *rollout.Record {
	t.Helper()
	ds, err := r.bed.Client.AppsV1().DaemonSets(r.ns).Get(context.Background(), rolloutDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rollout.ReadRecord(ds)
	if err != nil || rec == nil {
		t.Fatalf("rollout record: %v, %v", rec, err)
	}
	return rec
}

// event returns the message of the newest Event of reason on the DaemonSet.
func (r *rolloutEnv) event(t *testing.T, reason string) string {
	t.Helper()
	evs, err := r.bed.Client.CoreV1().Events(r.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	for _, e := range evs.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "DaemonSet" && e.Source.Component == rollout.EventSource {
			msg = e.Message
		}
	}
	return msg
}

func (r *rolloutEnv) patchDS(t *testing.T, patchType types.PatchType, patch string) {
	t.Helper()
	if _, err := r.bed.Client.AppsV1().DaemonSets(r.ns).Patch(context.Background(), rolloutDS, patchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch daemonset: %v", err)
	}
}

func (r *rolloutEnv) testDryRun(t *testing.T) {
	// The new image tag of the same image: a new revision.
	r.patchDS(t, types.StrategicMergePatchType, fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"mount","image":%q}]}}}}`, r.newTag))

	stdout, _, code := r.runRollout(t, "--dry-run=client", "-o", "json")
	if code != 0 {
		t.Fatalf("dry run exit %d", code)
	}
	var out struct{ Plan rollout.Plan }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("dry run output: %v", err)
	}
	w := r.anyPod(t, writerSelector)
	if len(out.Plan.Nodes) != 1 || out.Plan.Nodes[0].Node != r.bed.Env.NodeName || len(out.Plan.Nodes[0].Evict) != 1 ||
		out.Plan.Nodes[0].Evict[0] != r.ns+"/"+w.Name {
		t.Fatalf("plan %+v, want node %s evicting %s", out.Plan, r.bed.Env.NodeName, w.Name)
	}
	if r.tainted(t) {
		t.Fatal("the dry run tainted the node")
	}
}

func (r *rolloutEnv) testPDBBlocks(t *testing.T) {
	ctx := context.Background()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: r.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "writer"}}},
	}
	if _, err := r.bed.Client.PolicyV1().PodDisruptionBudgets(r.ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The disruption controller must have computed the budget, or the
	// eviction could slip through.
	if err := framework.Poll(ctx, "PDB status", 200*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		p, err := r.bed.Client.PolicyV1().PodDisruptionBudgets(r.ns).Get(ctx, "writer", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return p.Status.ObservedGeneration >= p.Generation && p.Status.ExpectedPods == 1, fmt.Sprintf("%+v", p.Status), nil
	}); err != nil {
		t.Fatal(err)
	}
	mp, w := r.mountPod(t), r.anyPod(t, writerSelector)

	_, stderr, code := r.runRollout(t)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, s := range []string{"drain", "disruption budget", "stays tainted", "--resume"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("message lacks %q", s)
		}
	}
	if !r.tainted(t) {
		t.Error("the node was reopened")
	}
	if rec := r.record(t); rec.Phase != rollout.PhaseFailed || !strings.Contains(rec.Reason, "disruption budget") {
		t.Errorf("record %+v", rec)
	}
	if ev := r.event(t, "RolloutFailed"); !strings.Contains(ev, "disruption budget") {
		t.Errorf("RolloutFailed event %q", ev)
	}
	if got := r.anyPod(t, rolloutSelector); got.UID != mp.UID {
		t.Error("the mount pod was replaced although the drain failed")
	}
	if got := r.anyPod(t, writerSelector); got.UID != w.UID {
		t.Error("the workload was evicted despite its budget")
	}
	if err := r.bed.Client.PolicyV1().PodDisruptionBudgets(r.ns).Delete(ctx, "writer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (r *rolloutEnv) testResumeFinishes(t *testing.T) {
	before, _ := r.verifyStream(t)
	oldMP, oldW := r.mountPod(t), r.anyPod(t, writerSelector)

	obs := r.observe(oldMP, oldW)
	// A short lease (renewed every 0.5 s) so that a second rollout sees a
	// renewal well within the few seconds the first takes.
	wait := r.startRollout(t, "--resume", "-o", "json", "--lock-lease", "3s")
	// A second rollout meanwhile sees the first renew the Lease and
	// refuses, touching nothing.
	if err := framework.Poll(context.Background(), "the rollout's Lease held", 100*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			h := r.leaseHolder(ctx)
			return h != "", "holder " + h, nil
		}); err != nil {
		t.Fatal(err)
	}
	_, stderr2, code2 := r.runRollout(t, "--resume", "--lock-lease", "3s")
	if code2 != 3 || !strings.Contains(stderr2, "another rollout") {
		t.Errorf("a second rollout at once: exit %d, want 3 (refused: another rollout is running)", code2)
	}
	stdout, _, code := wait()
	seen := obs.stop()
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if h := r.leaseHolder(context.Background()); h != "" {
		t.Errorf("the Lease is still held by %s after the rollout", h)
	}
	r.checkProgress(t, stdout)
	checkObservedOrder(t, seen)
	r.checkUpgraded(t, oldMP, oldW, r.newTag)
	r.waitLines(t, before+10, time.Minute)
	n, writers := r.verifyStream(t)
	if len(writers) < 2 {
		t.Errorf("writers %v: the workload did not run again", writers)
	}
	t.Logf("stream: %d lines verified (%d before the rollout), writers %v", n, before, writers)
}

// checkProgress checks the JSON progress of a successful rollout: for the
// node, each step of rollout.Steps started and then done, in that order,
// each one started only after the one before it was done, with times that
// never go back.
func (r *rolloutEnv) checkProgress(t *testing.T, stdout string) {
	t.Helper()
	done := map[rollout.Step]rollout.Event{}
	var seq []string // "<step> <status>" of the node, in output order
	var last time.Time
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"plan"`) {
			continue
		}
		var e rollout.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("progress line %q: %v", sc.Text(), err)
		}
		if e.Node != r.bed.Env.NodeName || e.Step == "" || e.Status == rollout.StatusInfo {
			continue
		}
		if e.Time.Before(last) {
			t.Errorf("progress goes back in time at %s %s (%s < %s)", e.Step, e.Status, e.Time, last)
		}
		last = e.Time
		seq = append(seq, string(e.Step)+" "+string(e.Status))
		if e.Status == rollout.StatusDone {
			done[e.Step] = e
		}
	}
	var want []string
	for _, s := range rollout.Steps {
		want = append(want, string(s)+" "+string(rollout.StatusStarted), string(s)+" "+string(rollout.StatusDone))
	}
	if !slices.Equal(seq, want) {
		t.Errorf("the node's steps ran as\n  %s\nwant\n  %s", strings.Join(seq, ", "), strings.Join(want, ", "))
	}
	t.Logf("steps: drain %.1fs, wait-unmount %.1fs (%s), delete-pod %.1fs, wait-ready %.1fs, node %.1fs",
		done[rollout.StepDrain].StepSeconds, done[rollout.StepUnmount].StepSeconds, done[rollout.StepUnmount].Message,
		done[rollout.StepDelete].StepSeconds, done[rollout.StepReady].StepSeconds, done[rollout.StepUntaint].NodeSeconds)
}

// Milestones of a node's upgrade as the cluster shows them, in the order
// they must happen.
var milestones = []string{
	"workload evicted",           // the old writer pod deleted or gone
	"workload's tmpfs unmounted", // its emptyDir gone from the host's mounts
	"old mount pod deleted",      // deleted or gone
	"new mount pod Ready",        // another pod of the DaemonSet Ready
	"taint removed",              // the node open again
}

// observer polls the cluster and the host's mount table while a rollout
// runs and records when it first saw each milestone (a poll number).
type observer struct {
	stopc chan struct{}
	done  chan struct{}
	seen  map[string]int
}

// observe starts an observer of the upgrade of the node whose mount pod is
// oldMP and whose workload is oldW; the node must be tainted.
func (r *rolloutEnv) observe(oldMP, oldW corev1.Pod) *observer {
	o := &observer{stopc: make(chan struct{}), done: make(chan struct{}), seen: map[string]int{}}
	scratch := filepath.Join(r.bed.Env.KubeletRoot, "pods", string(oldW.UID), "volumes", "kubernetes.io~empty-dir", "scratch")
	podState := func(ctx context.Context, uid types.UID, name string) (gone bool) {
		p, err := r.bed.Client.CoreV1().Pods(r.ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && (p.UID != uid || p.DeletionTimestamp != nil)
	}
	go func() {
		defer close(o.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		final := false
		for n := 0; ; n++ {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			now := map[string]bool{
				"workload evicted":           podState(ctx, oldW.UID, oldW.Name),
				"old mount pod deleted":      podState(ctx, oldMP.UID, oldMP.Name),
				"workload's tmpfs unmounted": !mountedOnHost(scratch),
			}
			if pods, err := r.bed.Client.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: rolloutSelector}); err == nil {
				for _, p := range pods.Items {
					if p.UID != oldMP.UID && p.DeletionTimestamp == nil && podReady(&p) {
						now["new mount pod Ready"] = true
					}
				}
			}
			if node, err := r.bed.Client.CoreV1().Nodes().Get(ctx, r.bed.Env.NodeName, metav1.GetOptions{}); err == nil {
				tainted := false
				for _, tn := range node.Spec.Taints {
					tainted = tainted || tn.Key == rollout.TaintKey && tn.Value == r.taintValue()
				}
				now["taint removed"] = !tainted
			}
			cancel()
			for m, ok := range now {
				if _, seen := o.seen[m]; ok && !seen {
					o.seen[m] = n
				}
			}
			if final {
				return
			}
			select {
			case <-o.stopc:
				// One more look: the rollout may have ended just
				// after the last poll.
				final = true
			case <-tick.C:
			}
		}
	}()
	return o
}

// stop ends the observation and returns when each milestone was first seen.
func (o *observer) stop() map[string]int {
	close(o.stopc)
	<-o.done
	return o.seen
}

// checkObservedOrder checks that every milestone was seen, none before the
// one it must follow, and none before the observation began (poll 0: the
// rollout had not started).
func checkObservedOrder(t *testing.T, seen map[string]int) {
	t.Helper()
	prev := 0
	var got []string
	for _, m := range milestones {
		n, ok := seen[m]
		switch {
		case !ok:
			t.Errorf("%s: never seen", m)
			continue
		case n == 0:
			t.Errorf("%s: already so when the rollout started", m)
		case n < prev:
			t.Errorf("%s seen at poll %d, before the milestone before it (poll %d)", m, n, prev)
		}
		prev = max(prev, n)
		got = append(got, fmt.Sprintf("%s@%d", m, n))
	}
	t.Logf("milestones seen (100 ms polls): %s", strings.Join(got, ", "))
}

// mountedOnHost reports whether dir is a mount point in the host's mount
// table (false when the table cannot be read).
func mountedOnHost(dir string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// podReady reports whether p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkUpgraded checks that the mount pod was replaced by a Ready pod of
// image that holds the registration, the taint is gone and the workload
// runs again.
func (r *rolloutEnv) checkUpgraded(t *testing.T, oldMP, oldW corev1.Pod, image string) {
	t.Helper()
	if r.tainted(t) {
		t.Error("the node is still tainted")
	}
	mp := r.mountPod(t)
	if mp.UID == oldMP.UID || mp.Spec.Containers[0].Image != image {
		t.Errorf("mount pod %s (image %s), was %s", mp.Name, mp.Spec.Containers[0].Image, oldMP.Name)
	}
	reg, ok, err := registration.Read(r.bed.Env.RegistrationDir, r.plugin)
	if err != nil || !ok || reg.PodUID != string(mp.UID) {
		t.Errorf("registration %+v (%v, %v) does not name the new mount pod %s", reg, ok, err, mp.UID)
	}
	w := r.bed.WaitPodsBySelector(t, r.ns, writerSelector, 1, true, 2*time.Minute)[0]
	if w.UID == oldW.UID {
		t.Error("the workload was not evicted")
	}
	if rec := r.record(t); rec.Phase != rollout.PhaseDone {
		t.Errorf("record %+v", rec)
	}
}

func (r *rolloutEnv) testBadImage(t *testing.T) {
	oldMP, oldW := r.mountPod(t), r.anyPod(t, writerSelector)
	before, _ := r.verifyStream(t)
	// The same image, but it requires a tool it lacks: mountpod serve exits.
	r.patchDS(t, types.JSONPatchType, `[{"op":"add","path":"/spec/template/spec/containers/0/env/-","value":{"name":"MOUNTPOD_REQUIRE_TOOLS","value":"mount,no-such-tool-e2e"}}]`)

	// A mount pod that cannot start is never Ready: the rollout's wait
	// for it is a bound, not the verdict, so it is shorter than the other
	// rollouts' (the flag given last counts).
	_, stderr, code := r.runRollout(t, "--ready-timeout", "15s")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, s := range []string{"wait-ready", "not Ready after 15s", "stays tainted", "--resume"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("message lacks %q", s)
		}
	}
	if !r.tainted(t) {
		t.Fatal("the node was reopened although its mount pod is not Ready")
	}
	rec := r.record(t)
	if rec.Phase != rollout.PhaseFailed || rec.Nodes[r.bed.Env.NodeName].Step != rollout.StepReady || !strings.Contains(rec.Reason, "not Ready") {
		t.Errorf("record %+v", rec)
	}
	if ev := r.event(t, "RolloutFailed"); !strings.Contains(ev, "not Ready") {
		t.Errorf("RolloutFailed event %q", ev)
	}
	if w, err := r.bed.Client.CoreV1().Pods(r.ns).List(context.Background(), metav1.ListOptions{LabelSelector: writerSelector}); err == nil {
		for _, p := range w.Items {
			if p.Spec.NodeName != "" {
				t.Errorf("workload pod %s scheduled onto the fenced node", p.Name)
			}
		}
	}

	// Fix the DaemonSet: back to the good template (a newer revision of it).
	ds, err := r.bed.Client.AppsV1().DaemonSets(r.ns).Get(context.Background(), rolloutDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ds.Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "MOUNTPOD_REQUIRE_TOOLS" })
	r.patchDS(t, types.JSONPatchType, fmt.Sprintf(`[{"op":"test","path":"/spec/template/spec/containers/0/env/%[1]d/name","value":"MOUNTPOD_REQUIRE_TOOLS"},{"op":"remove","path":"/spec/template/spec/containers/0/env/%[1]d"}]`, i))
	stdout, _, code := r.runRollout(t, "--resume", "-o", "json")
	if code != 0 {
		t.Fatalf("resume: exit %d", code)
	}
	r.checkProgress(t, stdout)
	r.checkUpgraded(t, oldMP, oldW, r.newTag)
	r.waitLines(t, before+10, time.Minute)
	n, writers := r.verifyStream(t)
	t.Logf("stream: %d lines verified, writers %v", n, writers)
}
