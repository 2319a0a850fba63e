package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	rt "github.com/mountcontainers/mountcontainers/internal/offnode/rollout/rollouttest"
)

const (
	ns     = rollout.DefaultNamespace
	dsName = "glusterfs-mountpod"
	driver = "mountcontainers.io/glusterfs"
)

// env is a cluster of three nodes: n1 and n2 run revision "old" of the
// DaemonSet, n3 the newest revision "new". n1 runs a workload using the
// plugin's driver and one that does not.
type env struct {
	t *testing.T
	c *rt.Cluster
	// rc is the rollouts' client: its actions are their API calls, each
	// checked against deploy/rbac when the test ends (checkShipped).
	rc     *fake.Clientset
	mounts *rt.Mounts
	ds     *appsv1.DaemonSet
	out    bytes.Buffer
}

func newEnv(t *testing.T, mutate func(ds *appsv1.DaemonSet), extra ...runtime.Object) *env {
	t.Helper()
	ds := rt.DaemonSet(ns, dsName, "kubernetes.io/glusterfs")
	if mutate != nil {
		mutate(ds)
	}
	objs := []runtime.Object{
		ds,
		rt.Revision(ds, "old", 1), rt.Revision(ds, "new", 2),
		rt.Node("n1"), rt.Node("n2"), rt.Node("n3"),
		rt.MountPod(ns, dsName, ds.UID, "mp-n1", "n1", "old", true),
		rt.MountPod(ns, dsName, ds.UID, "mp-n2", "n2", "old", true),
		rt.MountPod(ns, dsName, ds.UID, "mp-n3", "n3", "new", true),
		rt.Workload("app", "writer", "n1", driver, map[string]string{"app": "writer"}),
		rt.Workload("app", "bystander", "n1", "", map[string]string{"app": "bystander"}),
	}
	e := &env{t: t, c: rt.NewCluster(append(objs, extra...)...), ds: ds}
	e.rc = e.c.NewClient()
	e.mounts = rt.NewMounts(e.c, 2)
	checkShipped(t, e.c, e.rc)
	return e
}

func (e *env) rollout(mod func(o *rollout.Options)) *rollout.Rollout {
	o := rollout.Options{
		Namespace: ns, Name: dsName, Drivers: []string{driver},
		PollInterval: 2 * time.Millisecond, EvictRetryDelay: 5 * time.Millisecond,
		DrainTimeout: 300 * time.Millisecond, UnmountTimeout: 300 * time.Millisecond,
		ReadyTimeout: 300 * time.Millisecond, RevisionTimeout: 300 * time.Millisecond,
		Holder: "test",
	}
	if mod != nil {
		mod(&o)
	}
	rep, err := rollout.NewReporter(&e.out, "json")
	if err != nil {
		e.t.Fatal(err)
	}
	clock := &rt.Clock{}
	return &rollout.Rollout{Client: e.rc, Mounts: e.mounts, Status: e.mounts, Progress: rep, Options: o, Clock: clock.Now}
}

func (e *env) run(mod func(o *rollout.Options)) (*rollout.Plan, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return e.rollout(mod).Run(ctx)
}

func (e *env) node(name string) *corev1.Node {
	e.t.Helper()
	n, err := e.c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) tainted(name string) bool {
	for _, t := range e.node(name).Spec.Taints {
		if t.Key == rollout.TaintKey {
			return true
		}
	}
	return false
}

func (e *env) record() *rollout.Record {
	e.t.Helper()
	ds, err := e.c.Client.AppsV1().DaemonSets(ns).Get(context.Background(), dsName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rec, err := rollout.ReadRecord(ds)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// revisions returns the revision of each node's mount pod.
func (e *env) revisions() map[string]string {
	e.t.Helper()
	pods, err := e.c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Spec.NodeName] = p.Labels[rollout.RevisionLabel]
	}
	return out
}

func (e *env) events() map[string]string {
	e.t.Helper()
	evs, err := e.c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, ev := range evs.Items {
		out[ev.Reason] = ev.Type + ": " + ev.Message
	}
	return out
}

// progress decodes the JSON progress lines.
func (e *env) progress() []rollout.Event {
	var out []rollout.Event
	for _, line := range strings.Split(strings.TrimSpace(e.out.String()), "\n") {
		if strings.HasPrefix(line, `{"plan"`) || line == "" {
			continue
		}
		var ev rollout.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			e.t.Fatalf("progress line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func wantFailure(t *testing.T, err error, node string, step rollout.Step, substr ...string) *rollout.Error {
	t.Helper()
	var re *rollout.Error
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T), want a *rollout.Error", err, err)
	}
	if re.Kind != rollout.Failed || re.Node != node || re.Step != step {
		t.Fatalf("failure kind %d node %q step %q, want failed on %s at %s: %v", re.Kind, re.Node, re.Step, node, step, err)
	}
	for _, s := range substr {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q:\n%v", s, err)
		}
	}
	return re
}

func TestRolloutUpgradesOutdatedNodes(t *testing.T) {
	e := newEnv(t, nil)
	plan, err := e.run(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(plan.Nodes); got != 2 || plan.Nodes[0].Node != "n1" || plan.Nodes[1].Node != "n2" {
		t.Errorf("plan nodes %+v, want n1 and n2", plan.Nodes)
	}
	for node, rev := range e.revisions() {
		if rev != "new" {
			t.Errorf("node %s runs revision %s", node, rev)
		}
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if e.tainted(n) {
			t.Errorf("node %s still tainted", n)
		}
	}
	if e.c.Evictions("app/writer") != 1 || e.c.Evictions("app/bystander") != 0 {
		t.Errorf("evictions: writer %d (want 1), bystander %d (want 0)", e.c.Evictions("app/writer"), e.c.Evictions("app/bystander"))
	}
	if e.c.Replaced() != 2 {
		t.Errorf("%d mount pods replaced, want 2", e.c.Replaced())
	}
	// The kubelet's lag: the mounts were observed until they went.
	if e.mounts.Calls() < 3 {
		t.Errorf("mounts observed %d times; the lagging mount should take 3", e.mounts.Calls())
	}
	rec := e.record()
	if rec.Phase != rollout.PhaseDone || rec.Nodes["n1"].Step != rollout.StepDone || rec.Nodes["n2"].Step != rollout.StepDone {
		t.Errorf("record %+v", rec)
	}
	if ev := e.events()["RolloutSucceeded"]; !strings.HasPrefix(ev, "Normal") {
		t.Errorf("no RolloutSucceeded event: %v", e.events())
	}
	// Every step of n1, in order, with elapsed times.
	var steps []rollout.Step
	for _, ev := range e.progress() {
		if ev.Node == "n1" && ev.Status == rollout.StatusDone {
			steps = append(steps, ev.Step)
			if ev.NodeSeconds <= 0 || ev.TotalSeconds <= 0 {
				t.Errorf("event without elapsed time: %+v", ev)
			}
		}
	}
	if got, want := len(steps), len(rollout.Steps); got != want {
		t.Errorf("n1 steps done %v, want %v", steps, rollout.Steps)
	}

	// A second run finds nothing to do.
	e.out.Reset()
	plan, err = e.run(nil)
	if err != nil || len(plan.Nodes) != 0 {
		t.Errorf("second run: %v, plan %+v", err, plan)
	}
}

func TestRolloutParallel(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.run(func(o *rollout.Options) { o.MaxUnavailable = 3 }); err != nil {
		t.Fatal(err)
	}
	for node, rev := range e.revisions() {
		if rev != "new" || e.tainted(node) {
			t.Errorf("node %s: revision %s, tainted %v", node, rev, e.tainted(node))
		}
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	plan, err := e.run(func(o *rollout.Options) { o.DryRun = true })
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Nodes) != 2 || len(plan.Nodes[0].Evict) != 1 || plan.Nodes[0].Evict[0] != "app/writer" || len(plan.UpToDate) != 1 {
		t.Errorf("plan %+v", plan)
	}
	if e.tainted("n1") || e.record() != nil || e.c.Replaced() != 0 || e.c.Evictions("app/writer") != 0 {
		t.Error("dry run changed the cluster")
	}
	if !strings.Contains(e.out.String(), `"plan"`) {
		t.Errorf("no plan printed: %s", e.out.String())
	}
	// Its node-by-node pod lists come from the API server's cache; a real
	// run's drain reads them consistently.
	nodeLists := 0
	for _, a := range e.rc.Actions() {
		if l, ok := a.(k8stesting.ListActionImpl); ok && a.GetResource().Resource == "pods" && strings.Contains(l.ListOptions.FieldSelector, "spec.nodeName") {
			nodeLists++
			if l.ListOptions.ResourceVersion != "0" {
				t.Errorf("dry run lists a node's pods with %+v, want resourceVersion 0", l.ListOptions)
			}
		}
	}
	if nodeLists == 0 {
		t.Error("dry run listed no node's pods")
	}
	text := plan.String()
	for _, s := range []string{"n1", "outdated", "evict app/writer", "up to date: n3"} {
		if !strings.Contains(text, s) {
			t.Errorf("plan text lacks %q:\n%s", s, text)
		}
	}
}

func TestPreflightRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(ds *appsv1.DaemonSet)
		opts   func(o *rollout.Options)
		want   string
	}{
		{"rolling update", func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
		}, nil, "not OnDelete"},
		{"no toleration", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}
		}, nil, "does not tolerate"},
		{"NoExecute toleration only", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: rollout.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		}, nil, "does not tolerate"},
		{"generation not observed", func(ds *appsv1.DaemonSet) { ds.Generation = 2 }, nil, "has not observed generation 2"},
		{"nothing to drain for", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Env = nil
		}, func(o *rollout.Options) { o.Drivers = nil }, "no volume plugin or driver"},
		// A name deploy/rbac grants, but no such DaemonSet.
		{"missing", nil, func(o *rollout.Options) { o.Name = "rbd-mountpod" }, "not found"},
		{"bad selector", nil, func(o *rollout.Options) { o.PodSelector = "a in (" }, "pod selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.mutate)
			_, err := e.run(tc.opts)
			if !rollout.IsRefused(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a refusal containing %q", err, tc.want)
			}
			if e.tainted("n1") || e.record() != nil {
				t.Error("a refused rollout touched the cluster")
			}
		})
	}
}

// A DaemonSet that deploy/rbac does not name: the API server forbids
// reading it, and the refusal says what to add.
func TestForbiddenDaemonSetNamesTheRBAC(t *testing.T) {
	e := newEnv(t, nil)
	e.rc.PrependReactor("get", "daemonsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(appsv1.Resource("daemonsets"), dsName, errors.New("RBAC: access denied"))
	})
	_, err := e.run(nil)
	if !rollout.IsRefused(err) || !strings.Contains(err.Error(), "resourceNames") || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("%v, want a refusal naming resourceNames", err)
	}
}

func TestPDBStopsRolloutWithTaintOn(t *testing.T) {
	e := newEnv(t, nil, rt.PDB("app", "writer", map[string]string{"app": "writer"}, 0))
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepDrain, "disruption budget", "--resume", "stays tainted")
	if !e.tainted("n1") {
		t.Error("n1 reopened after a failed drain")
	}
	if e.tainted("n2") || e.revisions()["n2"] != "old" {
		t.Error("n2 was started after n1 failed")
	}
	if e.revisions()["n1"] != "old" {
		t.Error("the old mount pod was deleted although the drain failed")
	}
	rec := e.record()
	if rec.Phase != rollout.PhaseFailed || !strings.Contains(rec.Reason, "disruption budget") ||
		rec.Nodes["n1"].Step != rollout.StepDrain || rec.Nodes["n1"].Error == "" {
		t.Errorf("record %+v, n1 %+v", rec, rec.Nodes["n1"])
	}
	if ev := e.events()["RolloutFailed"]; !strings.HasPrefix(ev, "Warning") || !strings.Contains(ev, "disruption budget") {
		t.Errorf("RolloutFailed event %q", ev)
	}
	// While it retried, the progress said why it waited.
	refused := 0
	for _, ev := range e.progress() {
		if ev.Node == "n1" && ev.Step == rollout.StepDrain && ev.Status == rollout.StatusInfo &&
			strings.HasPrefix(ev.Message, "eviction refused, retrying: ") && strings.Contains(ev.Message, "disruption budget") {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("no progress event reports the refused eviction: %s", e.out.String())
	}

	// Without --resume a new run refuses; once the budget allows, --resume finishes.
	if _, err := e.run(nil); !rollout.IsRefused(err) || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("rerun without --resume: %v", err)
	}
	pdb := rt.PDB("app", "writer", map[string]string{"app": "writer"}, 1)
	if _, err := e.c.Client.PolicyV1().PodDisruptionBudgets("app").UpdateStatus(context.Background(), pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.run(func(o *rollout.Options) { o.Resume = true }); err != nil {
		t.Fatal(err)
	}
	if e.tainted("n1") || e.revisions()["n1"] != "new" || e.record().Phase != rollout.PhaseDone {
		t.Errorf("after resume: tainted %v, revision %s, record %+v", e.tainted("n1"), e.revisions()["n1"], e.record())
	}
}

// The old mount pod's deletion has its own bound: a runtime slow to stop
// its containers (here: the pod stays terminating for 200 reads, at least
// 400 ms at a read per 2 ms) holds the rollout past ReadyTimeout (300 ms)
// but not past DeleteTimeout; and past DeleteTimeout, the rollout stops at
// delete-pod naming the flag.
func TestSlowDeletionBoundedByDeleteTimeout(t *testing.T) {
	e := newEnv(t, nil)
	e.c.SetSlowDeletion("n1", 200)
	e.c.SetSlowDeletion("n2", 200)
	if _, err := e.run(func(o *rollout.Options) { o.DeleteTimeout = time.Minute }); err != nil {
		t.Fatal(err)
	}
	for node, rev := range e.revisions() {
		if rev != "new" || e.tainted(node) {
			t.Errorf("node %s: revision %s, tainted %v", node, rev, e.tainted(node))
		}
	}

	e = newEnv(t, nil)
	e.c.SetSlowDeletion("n1", 1<<30)
	_, err := e.run(func(o *rollout.Options) { o.DeleteTimeout = 100 * time.Millisecond })
	wantFailure(t, err, "n1", rollout.StepDelete, "still terminating after 100ms", "--delete-timeout")
	if !e.tainted("n1") {
		t.Error("n1 reopened while its old mount pod is terminating")
	}
}

func TestNotReadyReplacementStopsThenResumeFinishes(t *testing.T) {
	e := newEnv(t, nil)
	e.c.SetReplacementReady("n1", false)
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepReady, "not Ready", "CrashLoopBackOff", "missing tools", "kubectl taint node n1")
	if !e.tainted("n1") {
		t.Fatal("n1 reopened although its mount pod is not Ready")
	}
	if rec := e.record(); rec.Phase != rollout.PhaseFailed || rec.Nodes["n1"].Step != rollout.StepReady {
		t.Errorf("record %+v", rec)
	}

	// The operator fixes the image: a third revision whose pods become Ready.
	e.c.SetReplacementReady("n1", true)
	if _, err := e.c.Client.AppsV1().ControllerRevisions(ns).Create(context.Background(), rt.Revision(e.ds, "fixed", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plan, err := e.run(func(o *rollout.Options) { o.Resume = true })
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Resume || plan.Nodes[0].Node != "n1" || plan.Nodes[0].Why != "unfinished" {
		t.Errorf("resume plan %+v", plan)
	}
	for node, rev := range e.revisions() {
		if rev != "fixed" || e.tainted(node) {
			t.Errorf("node %s: revision %s, tainted %v", node, rev, e.tainted(node))
		}
	}
}

func TestStuckMountsKeepOldPod(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetStuck(rollout.Mount{Target: "/var/lib/kubelet/pods/x/volumes/mountcontainers.io~glusterfs/data", FSType: "fuse.glusterfs", Source: "s:/v"})
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepUnmount, "1 mount(s) still on the node", "mountcontainers.io~glusterfs/data")
	if e.revisions()["n1"] != "old" || !e.tainted("n1") {
		t.Error("old mount pod deleted or node reopened under a live mount")
	}
}

func TestUnobservableMountsFail(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetErr(errors.New("exec refused"))
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepUnmount, "cannot read the mounts", "exec refused")
	if e.revisions()["n1"] != "old" {
		t.Error("old mount pod deleted although its mounts could not be read")
	}
}

// An old mount pod whose container is not running shows no mount: that is
// no answer, not "unmounted", so the wait goes on and fails; deleting that
// pod by hand lets --resume finish.
func TestOldPodNotRunningIsNotUnmounted(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	p, _ := e.c.Client.CoreV1().Pods(ns).Get(ctx, "mp-n1", metav1.GetOptions{})
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	if _, err := e.c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.run(nil)
	re := wantFailure(t, err, "n1", rollout.StepUnmount, "cannot read the mounts", "mp-n1", "not running")
	if !strings.Contains(re.Hint, "delete a mount pod whose container is not running by hand") {
		t.Errorf("hint %q", re.Hint)
	}
	if e.revisions()["n1"] != "old" || !e.tainted("n1") {
		t.Error("the old mount pod was deleted, or the node reopened, although its mounts could not be read")
	}
	if err := e.c.Client.CoreV1().Pods(ns).Delete(ctx, "mp-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.run(func(o *rollout.Options) { o.Resume = true }); err != nil {
		t.Fatal(err)
	}
	if e.revisions()["n1"] != "new" || e.tainted("n1") {
		t.Error("resume did not finish n1")
	}
}

// A node without a mount pod has nothing to read its mounts through: that
// is no answer, not "unmounted".
func TestMissingOldPodIsNotUnmounted(t *testing.T) {
	e := newEnv(t, nil)
	// The pod goes without the fake DaemonSet controller seeing it; n1 is
	// fenced, as a rollout killed before would have left it.
	if err := e.c.Client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), ns, "mp-n1"); err != nil {
		t.Fatal(err)
	}
	n1 := e.node("n1")
	n1.Spec.Taints = []corev1.Taint{{Key: rollout.TaintKey, Value: ns + "." + dsName, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := e.c.Client.CoreV1().Nodes().Update(context.Background(), n1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepUnmount, "cannot read the mounts", "no mount pod on the node")
}

// A live-mount report that cannot be read is no answer either.
func TestUnreadableStatusFails(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetStatusErr(errors.New("exec refused"))
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepUnmount, "cannot read the mounts", "exec refused")
	if e.revisions()["n1"] != "old" {
		t.Error("old mount pod deleted although its live mounts could not be read")
	}
}

// wait-unmount waits for the FUSE mounts whose daemons run in the old
// mount pod (not scoped), even those of no volume of the plugin; a scoped
// one does not hold it up.
func TestUnscopedDaemonMountsAreWaitedFor(t *testing.T) {
	const other = "/var/lib/kubelet/pods/u9/volumes/kubernetes.io~csi/other/mount"
	for _, scoped := range []bool{false, true} {
		t.Run(fmt.Sprintf("scoped=%v", scoped), func(t *testing.T) {
			e := newEnv(t, nil)
			e.mounts.AddFUSE("n1", other, "fuse.sshfs", scoped)
			_, err := e.run(nil)
			if scoped {
				if err != nil {
					t.Fatalf("a scoped mount held the drain up: %v", err)
				}
				return
			}
			wantFailure(t, err, "n1", rollout.StepUnmount, "1 mount(s) still on the node", other, "fuse.sshfs", "in no scope")
			if e.revisions()["n1"] != "old" {
				t.Error("the old mount pod was deleted under a mount its daemon serves")
			}
		})
	}
}

// A mount pod whose image predates `mountpod status` is still upgraded:
// wait-unmount then waits for the mounts of the plugin's volumes alone.
func TestNoStatusWaitsForPluginMounts(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetNoStatus(true)
	if _, err := e.run(nil); err != nil {
		t.Fatal(err)
	}
	if e.revisions()["n1"] != "new" || e.c.Evictions("app/writer") != 1 {
		t.Error("n1 not upgraded")
	}
	if !strings.Contains(e.out.String(), "predates") {
		t.Errorf("no notice that the pod cannot report its live mounts:\n%s", e.out.String())
	}
}

// Without --driver, the flexVolume driver the DaemonSet installs is
// drained for: the workload using it is evicted before the mount pod is
// deleted.
func TestDriverInferredFromDaemonSet(t *testing.T) {
	e := newEnv(t, func(ds *appsv1.DaemonSet) {
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "MOUNTPOD_INSTALL_FLEXVOLUME_DIR", Value: "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"})
	})
	plan, err := e.run(func(o *rollout.Options) { o.Drivers = nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Drivers) != 1 || plan.Drivers[0] != driver {
		t.Errorf("plan drivers %v, want %s", plan.Drivers, driver)
	}
	evicted, deleted := -1, -1
	for i, a := range e.rc.Actions() {
		switch {
		case a.GetVerb() == "create" && a.GetSubresource() == "eviction" && a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name == "writer":
			evicted = i
		case a.GetVerb() == "delete" && a.GetResource().Resource == "pods" && a.(k8stesting.DeleteAction).GetName() == "mp-n1":
			deleted = i
		}
	}
	if evicted < 0 || deleted < 0 || evicted > deleted {
		t.Errorf("writer evicted at action %d, mp-n1 deleted at %d: want the eviction first", evicted, deleted)
	}
}

// A record written by a release before the Lease, whose holder's lease
// has not run out, is still respected.
func TestLegacyRecordLockRespected(t *testing.T) {
	e := newEnv(t, nil)
	now := time.Now()
	setRecord(t, e, rollout.Record{Holder: "other/1", Phase: rollout.PhaseRunning, Started: now, Renewed: now, LeaseSeconds: 3600})
	for _, resume := range []bool{false, true} {
		r := e.rollout(func(o *rollout.Options) { o.Resume = resume })
		r.Clock = time.Now
		_, err := r.Run(context.Background())
		if !rollout.IsRefused(err) || !strings.Contains(err.Error(), "older mountpod-rollout is running") {
			t.Fatalf("resume %v: %v, want a refusal naming the other rollout", resume, err)
		}
	}
	if e.tainted("n1") || e.record().Holder != "other/1" {
		t.Error("the record was taken from a live rollout")
	}
}

// A rollout killed after replacing n1's pod but before removing the taint:
// its lease expired; --resume reopens n1 without draining it again.
func TestResumeKilledRollout(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if err := e.c.Client.CoreV1().Pods(ns).Delete(ctx, "mp-n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n1 := e.node("n1")
	n1.Spec.Taints = []corev1.Taint{{Key: rollout.TaintKey, Value: ns + "." + dsName, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := e.c.Client.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	setRecord(t, e, rollout.Record{Holder: "dead/1", Phase: rollout.PhaseRunning, Revision: "new", Started: old, Renewed: old, LeaseSeconds: 60,
		Nodes: map[string]*rollout.NodeRecord{"n1": {Step: rollout.StepReady, Since: old}, "n2": {Step: rollout.StepPending, Since: old}}})

	_, err := e.run(nil)
	if !rollout.IsRefused(err) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("without --resume: %v", err)
	}
	plan, err := e.run(func(o *rollout.Options) { o.Resume = true })
	if err != nil {
		t.Fatal(err)
	}
	if plan.Nodes[0].Node != "n1" || plan.Nodes[1].Node != "n2" {
		t.Errorf("plan %+v", plan.Nodes)
	}
	if e.tainted("n1") || e.tainted("n2") || e.revisions()["n2"] != "new" {
		t.Error("resume did not finish")
	}
	if e.c.Evictions("app/writer") != 0 {
		t.Error("n1, whose mount pod was already replaced, was drained again")
	}
	if e.record().Holder != "test" || e.record().Phase != rollout.PhaseDone {
		t.Errorf("record %+v", e.record())
	}
}

func TestForeignTaintFailsNode(t *testing.T) {
	e := newEnv(t, nil)
	n1 := e.node("n1")
	n1.Spec.Taints = []corev1.Taint{{Key: rollout.TaintKey, Value: "kube-system.rbd-mountpod", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := e.c.Client.CoreV1().Nodes().Update(context.Background(), n1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepTaint, "fenced by another rollout", "rbd-mountpod")
	if got := e.node("n1").Spec.Taints; len(got) != 1 || got[0].Value != "kube-system.rbd-mountpod" {
		t.Errorf("the other rollout's taint was touched: %+v", got)
	}
}

func TestBarePodNeedsForce(t *testing.T) {
	bare := rt.Workload("app", "bare", "n1", driver, nil)
	bare.OwnerReferences = nil
	e := newEnv(t, nil, bare)
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepDrain, "app/bare", "--force")
	if _, err := e.run(func(o *rollout.Options) { o.Resume = true; o.Force = true }); err != nil {
		t.Fatal(err)
	}
	if e.c.Evictions("app/bare") != 1 {
		t.Error("bare pod not evicted with --force")
	}
}

func TestSelection(t *testing.T) {
	claimed := rt.Workload("app", "claimed", "n1", "", nil)
	claimed.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
	intree := rt.Workload("app", "intree", "n1", "", nil)
	intree.Spec.Volumes = []corev1.Volume{{Name: "g", VolumeSource: corev1.VolumeSource{Glusterfs: &corev1.GlusterfsVolumeSource{EndpointsName: "e", Path: "v"}}}}
	dsPod := rt.Workload("app", "ds-user", "n1", driver, nil)
	dsPod.OwnerReferences[0].Kind = "DaemonSet"
	objs := []runtime.Object{
		claimed, intree, dsPod,
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "c"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{FlexVolume: &corev1.FlexPersistentVolumeSource{Driver: driver}}}},
	}
	for _, tc := range []struct {
		name string
		opts func(o *rollout.Options)
		want []string
		warn bool
	}{
		{"drivers and plugins", nil, []string{"app/claimed", "app/intree", "app/writer"}, true},
		{"label selector", func(o *rollout.Options) {
			o.Drivers = nil
			o.Plugins = []string{"none"}
			o.PodSelector = "app=bystander"
		}, []string{"app/bystander"}, false},
		{"all pods", func(o *rollout.Options) { o.AllPods = true }, []string{"app/bystander", "app/claimed", "app/intree", "app/writer"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, objs...)
			plan, err := e.run(func(o *rollout.Options) {
				o.DryRun = true
				if tc.opts != nil {
					tc.opts(o)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			got := plan.Nodes[0].Evict
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("evict %v, want %v", got, tc.want)
			}
			if hasWarn := len(plan.Nodes[0].Warnings) > 0; hasWarn != tc.warn {
				t.Errorf("warnings %v, want some: %v", plan.Nodes[0].Warnings, tc.warn)
			}
		})
	}
}

func TestInterruptRecordsFailure(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetStuck(rollout.Mount{Target: "/var/lib/kubelet/pods/x/volumes/mountcontainers.io~glusterfs/d", FSType: "fuse.glusterfs"})
	ctx, cancel := context.WithCancel(context.Background())
	r := e.rollout(func(o *rollout.Options) { o.UnmountTimeout = time.Minute })
	done := make(chan error, 1)
	go func() { _, err := r.Run(ctx); done <- err }()
	for e.mounts.Calls() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		wantFailure(t, err, "n1", rollout.StepUnmount, "context canceled", "--resume")
	case <-time.After(10 * time.Second):
		t.Fatal("rollout did not stop on cancel")
	}
	if rec := e.record(); rec.Phase != rollout.PhaseFailed || !e.tainted("n1") {
		t.Errorf("record %+v, tainted %v", rec, e.tainted("n1"))
	}
}

func setRecord(t *testing.T, e *env, rec rollout.Record) {
	t.Helper()
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := e.c.Client.AppsV1().DaemonSets(ns).Get(context.Background(), dsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Annotations = map[string]string{rollout.RecordAnnotation: string(data)}
	if _, err := e.c.Client.AppsV1().DaemonSets(ns).Update(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestNodeSelector: with a node selector the plan holds only the selected
// nodes; a node fenced by an earlier rollout but not selected stays as it
// is, and the plan warns of it.
func TestNodeSelector(t *testing.T) {
	e := newEnv(t, nil)
	for name, zone := range map[string]string{"n1": "a", "n2": "b", "n3": "a"} {
		n := e.node(name)
		n.Labels = map[string]string{"zone": zone}
		if name == "n1" {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: rollout.TaintKey, Value: ns + "." + dsName, Effect: corev1.TaintEffectNoSchedule})
		}
		if _, err := e.c.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := e.run(func(o *rollout.Options) { o.NodeSelector = "zone=b" })
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Nodes) != 1 || plan.Nodes[0].Node != "n2" || len(plan.UpToDate) != 0 || plan.NodeSelector != "zone=b" {
		t.Errorf("plan nodes %+v, up to date %v, selector %q; want n2 alone", plan.Nodes, plan.UpToDate, plan.NodeSelector)
	}
	if !slices.ContainsFunc(plan.Warnings, func(w string) bool { return strings.Contains(w, "node n1 is tainted") }) {
		t.Errorf("warnings %v, want one of fenced n1 left out", plan.Warnings)
	}
	revs := e.revisions()
	if revs["n2"] != "new" || revs["n1"] != "old" || !e.tainted("n1") {
		t.Errorf("revisions %v, n1 tainted %v: want n2 upgraded, n1 left as it was", revs, e.tainted("n1"))
	}
	if _, err := e.run(func(o *rollout.Options) { o.NodeSelector = "zone in (" }); !rollout.IsRefused(err) {
		t.Errorf("a selector that does not parse: %v, want a refusal", err)
	}
}

// TestNodeSelectorResume: resuming with a node selector that leaves out a
// node the last rollout left unfinished is refused (resumed, the rollout
// would end done and its record of that node gone), and the resume
// command a failure prints keeps the selector.
func TestNodeSelectorResume(t *testing.T) {
	e := newEnv(t, nil)
	for name, zone := range map[string]string{"n1": "a", "n2": "b", "n3": "b"} {
		n := e.node(name)
		n.Labels = map[string]string{"zone": zone}
		if _, err := e.c.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.c.SetReplacementReady("n1", false)
	_, err := e.run(func(o *rollout.Options) { o.NodeSelector = "zone=a" })
	wantFailure(t, err, "n1", rollout.StepReady, "not Ready")
	if !strings.Contains(err.Error(), "--selector 'zone=a' --resume") {
		t.Errorf("failure %q, want the resume command with the selector", err)
	}
	_, err = e.run(func(o *rollout.Options) { o.Resume, o.NodeSelector = true, "zone=b" })
	if !rollout.IsRefused(err) || !strings.Contains(err.Error(), "nodes [n1] unfinished") {
		t.Fatalf("resume leaving out the unfinished n1: %v, want a refusal naming it", err)
	}
	if rec := e.record(); rec.Phase != rollout.PhaseFailed {
		t.Errorf("record phase %s after the refusal, want it still failed", rec.Phase)
	}
}
