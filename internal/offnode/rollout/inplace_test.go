package rollout_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	rt "github.com/mountcontainers/mountcontainers/internal/offnode/rollout/rollouttest"
)

// writerMount is the mount of the writer's flexVolume volume on n1.
const writerMount = "/var/lib/kubelet/pods/uid-writer/volumes/mountcontainers.io~glusterfs/data"

func inPlace(mod func(o *rollout.Options)) func(o *rollout.Options) {
	return func(o *rollout.Options) {
		o.Strategy = rollout.StrategyInPlace
		if mod != nil {
			mod(o)
		}
	}
}

// nodeWrites counts the writes to node objects (taints).
func (e *env) nodeWrites() int {
	n := 0
	for _, a := range e.rc.Actions() {
		if a.GetResource().Resource == "nodes" && (a.GetVerb() == "update" || a.GetVerb() == "patch") {
			n++
		}
	}
	return n
}

// stepsDone returns the steps node finished, in order.
func (e *env) stepsDone(node string) []rollout.Step {
	var steps []rollout.Step
	for _, ev := range e.progress() {
		if ev.Node == node && ev.Status == rollout.StatusDone {
			steps = append(steps, ev.Step)
		}
	}
	return steps
}

func (e *env) podUID(name string) string {
	e.t.Helper()
	p, err := e.c.Client.CoreV1().Pods("app").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return string(p.UID)
}

// Every live mount of n1 is scoped: its mount pod is replaced under the
// mount, without taint or eviction, and the new pod's report shows the
// mount kept, healthy and scoped.
func TestInPlaceScopedMounts(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetScoped("n1", true)
	writer := e.podUID("writer")
	if _, err := e.run(inPlace(nil)); err != nil {
		t.Fatal(err)
	}
	if w := e.nodeWrites(); w != 0 {
		t.Errorf("%d writes to nodes: a taint was set", w)
	}
	if e.c.Evictions("app/writer") != 0 || e.podUID("writer") != writer {
		t.Error("the workload was evicted")
	}
	if e.c.Replaced() != 2 || e.revisions()["n1"] != "new" || e.revisions()["n2"] != "new" {
		t.Errorf("replaced %d, revisions %v", e.c.Replaced(), e.revisions())
	}
	if got := e.stepsDone("n1"); !slices.Equal(got, rollout.InPlaceSteps) {
		t.Errorf("n1 steps %v, want %v", got, rollout.InPlaceSteps)
	}
	// The old pod was asked before, the new one after the replacement.
	if asked := e.mounts.StatusAsked(); !slices.Contains(asked, "mp-n1") || !slices.Contains(asked, "glusterfs-mountpod-r1") {
		t.Errorf("live-mount reports asked of %v, want mp-n1 and its replacement glusterfs-mountpod-r1", asked)
	}
	verified := e.verified("n1")
	if !strings.Contains(verified, "1 live mount(s) kept, healthy and scoped under glusterfs-mountpod-r1") {
		t.Errorf("verify-mounts said %q", verified)
	}
	rec := e.record()
	if rec.Phase != rollout.PhaseDone || rec.Nodes["n1"].Step != rollout.StepDone || rec.Nodes["n1"].Strategy != rollout.StrategyInPlace {
		t.Errorf("record %+v, n1 %+v", rec, rec.Nodes["n1"])
	}
}

// verified returns what node's verify-mounts step said when done.
func (e *env) verified(node string) string {
	var msg string
	for _, ev := range e.progress() {
		if ev.Node == node && ev.Step == rollout.StepVerify && ev.Status == rollout.StatusDone {
			msg = ev.Message
		}
	}
	return msg
}

// A mount whose check the new mount pod finds busy (no answer within its
// bound, as on a loaded node) is read again, and the node passes once it
// answers.
func TestInPlaceBusyMountReadAgain(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetScoped("n1", true)
	e.mounts.SetBusy(writerMount, 2)
	if _, err := e.run(inPlace(nil)); err != nil {
		t.Fatal(err)
	}
	verified := e.verified("n1")
	if !strings.Contains(verified, "1 live mount(s) kept, healthy and scoped") {
		t.Errorf("verify-mounts said %q", verified)
	}
	if asked := e.mounts.StatusAsked(); len(asked) < 4 {
		t.Errorf("live-mount reports asked of %v; want the old pod's and three or more of the new one's", asked)
	}
}

// A mount that does not survive the replacement fails the node, named,
// and leaves it as it is: untainted, with the new pod; no other node starts.
func TestInPlaceBrokenMountFailsNode(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetScoped("n1", true)
	e.mounts.SetFragile(writerMount)
	_, err := e.run(inPlace(nil))
	re := wantFailure(t, err, "n1", rollout.StepVerify, "did not survive the replacement in place", writerMount, "not healthy", "transport endpoint is not connected")
	if !strings.Contains(re.Hint, "is not tainted") || !strings.Contains(re.Hint, "--strategy in-place --resume") {
		t.Errorf("hint %q", re.Hint)
	}
	if e.tainted("n1") || e.nodeWrites() != 0 {
		t.Error("n1 was tainted")
	}
	if e.revisions()["n2"] != "old" {
		t.Error("n2 was started after n1 failed")
	}
	if rec := e.record(); rec.Phase != rollout.PhaseFailed || rec.Nodes["n1"].Step != rollout.StepVerify {
		t.Errorf("record %+v", rec)
	}
}

// A node with an unscoped live mount is drained instead (--unscoped drain,
// the default); a node without one beside it is still replaced in place.
func TestInPlaceUnscopedFallsBackToDrain(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.run(inPlace(nil)); err != nil {
		t.Fatal(err)
	}
	if e.c.Evictions("app/writer") != 1 {
		t.Error("n1, with an unscoped mount, was not drained")
	}
	want := append([]rollout.Step{rollout.StepInspect}, rollout.Steps...)
	if got := e.stepsDone("n1"); !slices.Equal(got, want) {
		t.Errorf("n1 steps %v, want %v", got, want)
	}
	if got := e.stepsDone("n2"); !slices.Equal(got, rollout.InPlaceSteps) {
		t.Errorf("n2 steps %v, want %v", got, rollout.InPlaceSteps)
	}
	if e.tainted("n1") || e.tainted("n2") || e.revisions()["n1"] != "new" || e.revisions()["n2"] != "new" {
		t.Error("not finished")
	}
	rec := e.record()
	if rec.Nodes["n1"].Strategy != rollout.StrategyDrain || rec.Nodes["n2"].Strategy != rollout.StrategyInPlace {
		t.Errorf("record strategies n1 %q, n2 %q", rec.Nodes["n1"].Strategy, rec.Nodes["n2"].Strategy)
	}
}

// --unscoped refuse: a node with an unscoped live mount fails untouched,
// naming the mount.
func TestInPlaceUnscopedRefused(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.run(inPlace(func(o *rollout.Options) { o.Unscoped = rollout.UnscopedRefuse }))
	re := wantFailure(t, err, "n1", rollout.StepInspect, "1 of 1 live mount(s) not scoped", writerMount, "in no scope", "mp-n1")
	if !strings.Contains(re.Hint, "--unscoped drain") || !strings.Contains(re.Hint, "--strategy in-place --unscoped refuse --resume") {
		t.Errorf("hint %q", re.Hint)
	}
	if e.tainted("n1") || e.nodeWrites() != 0 || e.revisions()["n1"] != "old" || e.c.Evictions("app/writer") != 0 || e.c.Replaced() != 0 {
		t.Error("n1 was touched")
	}
}

// A mount pod that cannot report its live mounts cannot prove them scoped:
// its node is drained.
func TestInPlaceNoStatusFallsBackToDrain(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetScoped("n1", true)
	e.mounts.SetNoStatus(true)
	if _, err := e.run(inPlace(nil)); err != nil {
		t.Fatal(err)
	}
	if e.c.Evictions("app/writer") != 1 || e.record().Nodes["n1"].Strategy != rollout.StrategyDrain {
		t.Error("n1 was not drained")
	}
	if !strings.Contains(e.out.String(), "cannot tell whether the node's mounts are scoped") {
		t.Errorf("progress does not say why:\n%s", e.out.String())
	}
}

// The dry run says which strategy each node would get, and evicts for the
// nodes that would be drained only.
func TestInPlaceDryRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		scoped   bool
		unscoped rollout.UnscopedPolicy
		want     string
		evict    bool
	}{
		{"scoped", true, rollout.UnscopedDrain, "in-place: 1 live mount(s), all scoped", false},
		{"unscoped drain", false, rollout.UnscopedDrain, "drain: 1 of 1 live mount(s) not scoped", true},
		{"unscoped refuse", false, rollout.UnscopedRefuse, "refused: 1 of 1 live mount(s) not scoped", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.mounts.SetScoped("n1", tc.scoped)
			plan, err := e.run(inPlace(func(o *rollout.Options) { o.DryRun = true; o.Unscoped = tc.unscoped }))
			if err != nil {
				t.Fatal(err)
			}
			n1, n2 := plan.Nodes[0], plan.Nodes[1]
			if got := n1.Strategy + ": " + n1.StrategyReason; !strings.HasPrefix(got, tc.want) {
				t.Errorf("n1: %q, want %q", got, tc.want)
			}
			if n2.Strategy != "in-place" || n2.StrategyReason != "no live FUSE mount" {
				t.Errorf("n2: %s: %s", n2.Strategy, n2.StrategyReason)
			}
			if got := len(n1.Evict) > 0; got != tc.evict {
				t.Errorf("n1 evicts %v", n1.Evict)
			}
			if !strings.Contains(plan.String(), "strategy "+tc.want) {
				t.Errorf("plan text lacks %q:\n%s", "strategy "+tc.want, plan.String())
			}
			if e.c.Replaced() != 0 || e.nodeWrites() != 0 || e.record() != nil {
				t.Error("the dry run changed the cluster")
			}
		})
	}
}

// An in-place rollout stopped by a replacement that never gets Ready
// leaves the node untainted; once the DaemonSet is fixed, --resume
// replaces the broken pod (whose container runs no daemon) in place again
// and checks the node's mounts.
func TestInPlaceResumeAfterBrokenImage(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetScoped("n1", true)
	e.c.SetReplacementReady("n1", false)
	_, err := e.run(inPlace(nil))
	wantFailure(t, err, "n1", rollout.StepReady, "not Ready")
	if e.tainted("n1") {
		t.Error("n1 tainted")
	}
	e.c.SetReplacementReady("n1", true)
	if _, err := e.c.Client.AppsV1().ControllerRevisions(ns).Create(context.Background(), rt.Revision(e.ds, "fixed", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.out.Reset()
	if _, err := e.run(inPlace(func(o *rollout.Options) { o.Resume = true })); err != nil {
		t.Fatal(err)
	}
	if got := e.stepsDone("n1"); !slices.Equal(got, rollout.InPlaceSteps) {
		t.Errorf("n1 steps %v, want %v", got, rollout.InPlaceSteps)
	}
	for node, rev := range e.revisions() {
		if rev != "fixed" || e.tainted(node) {
			t.Errorf("node %s: revision %s, tainted %v", node, rev, e.tainted(node))
		}
	}
	if e.nodeWrites() != 0 || e.c.Evictions("app/writer") != 0 {
		t.Error("a node was tainted or drained")
	}
}
