package rollout_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	rt "github.com/mountcontainers/mountcontainers/internal/offnode/rollout/rollouttest"
)

// actLog records, in one order for every client, the acting calls (the
// writes, but for the Lease, which is the lock itself) that clients pass
// on to the cluster.
type actLog struct {
	mu   sync.Mutex
	acts []act
}

type act struct {
	seq int
	who string
	req string
}

func (l *actLog) byWho(who string) []act {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []act
	for _, a := range l.acts {
		if a.who == who {
			out = append(out, a)
		}
	}
	return out
}

// apiPause makes a client's API stop answering: calls made while paused
// wait until resumed and then fail as calls the API server never received
// do (a timeout).
type apiPause struct {
	paused  atomic.Bool
	resume  chan struct{}
	mu      sync.Mutex
	blocked []string
}

// holding reports whether a call is held. The fake clientset serializes its
// calls, so from then on none of the client's calls gets through.
func (p *apiPause) holding() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.blocked) > 0
}

// client returns a client of e's cluster whose acting calls go to log as
// who's, and that p (if not nil) pauses.
func (e *env) client(log *actLog, who string, p *apiPause) *fake.Clientset {
	cs := e.c.NewClient()
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "get", "list", "watch":
			return false, nil, nil
		}
		if a.GetResource().Resource == "leases" {
			return false, nil, nil
		}
		req, _ := rt.RequestOf(a)
		log.mu.Lock()
		log.acts = append(log.acts, act{seq: len(log.acts), who: who, req: req.String()})
		log.mu.Unlock()
		return false, nil, nil
	})
	if p != nil {
		cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if !p.paused.Load() {
				return false, nil, nil
			}
			req, _ := rt.RequestOf(a)
			p.mu.Lock()
			p.blocked = append(p.blocked, req.String())
			p.mu.Unlock()
			<-p.resume
			return true, nil, apierrors.NewServerTimeout(a.GetResource().GroupResource(), a.GetVerb(), 1)
		})
	}
	checkShipped(e.t, e.c, cs)
	return cs
}

// stuck is a mount of the plugin on n1 that keeps a rollout in
// wait-unmount until cleared.
var stuck = rollout.Mount{Target: "/var/lib/kubelet/pods/x/volumes/mountcontainers.io~glusterfs/held", FSType: "fuse.glusterfs", Source: "s:/v"}

// lockRollout is a rollout of e by who through client with a short lease.
func (e *env) lockRollout(who string, client *fake.Clientset, out *bytes.Buffer, mod func(o *rollout.Options)) *rollout.Rollout {
	r := e.rollout(func(o *rollout.Options) {
		o.Holder = who
		o.LockLease = 2 * time.Second
		o.UnmountTimeout = time.Minute
		if mod != nil {
			mod(o)
		}
	})
	r.Client = client
	rep, err := rollout.NewReporter(out, "text")
	if err != nil {
		e.t.Fatal(err)
	}
	r.Progress = rep
	return r
}

// Two rollouts at once, the second one's clock an hour ahead: the lock is
// judged by time observed here, not by the holder's timestamps, so the
// second sees the first renew it and refuses, touching nothing; the first
// then finishes.
func TestLockSurvivesClockSkew(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetStuck(stuck)
	log := &actLog{}
	var outA, outB bytes.Buffer
	a := e.lockRollout("a", e.client(log, "a", nil), &outA, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doneA := make(chan error, 1)
	go func() { _, err := a.Run(ctx); doneA <- err }()
	waitFor(t, "a in wait-unmount", func() bool { return e.mounts.Calls() >= 3 })

	b := e.lockRollout("b", e.client(log, "b", nil), &outB, func(o *rollout.Options) { o.Resume = true })
	b.Clock = func() time.Time { return time.Now().Add(time.Hour) }
	start := time.Now()
	_, err := b.Run(ctx)
	if !rollout.IsRefused(err) || !strings.Contains(err.Error(), "another rollout") || !strings.Contains(err.Error(), "held by a") {
		t.Fatalf("b: %v, want a refusal naming a", err)
	}
	t.Logf("b refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if acts := log.byWho("b"); len(acts) > 0 {
		t.Errorf("b acted while a held the lock: %v", acts)
	}

	e.mounts.SetStuck()
	if err := <-doneA; err != nil {
		t.Fatalf("a: %v", err)
	}
	for node, rev := range e.revisions() {
		if rev != "new" || e.tainted(node) {
			t.Errorf("node %s: revision %s, tainted %v", node, rev, e.tainted(node))
		}
	}
	if rec := e.record(); rec.Holder != "a" || rec.Phase != rollout.PhaseDone {
		t.Errorf("record %+v", rec)
	}
}

// Two rollouts at once, the first one's API paused past its lease: it
// stops acting before the second can take the lock over, the second
// finishes the rollout, and when the first one's API answers again it
// does nothing more (no write, no Event) and says it lost the lock. Only
// one ever acts at a time.
func TestLockLostStopsActing(t *testing.T) {
	e := newEnv(t, nil)
	e.mounts.SetStuck(stuck)
	log := &actLog{}
	pause := &apiPause{resume: make(chan struct{})}
	var outA, outB bytes.Buffer
	a := e.lockRollout("a", e.client(log, "a", pause), &outA, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doneA := make(chan error, 1)
	go func() { _, err := a.Run(ctx); doneA <- err }()
	waitFor(t, "a in wait-unmount", func() bool { return e.mounts.Calls() >= 3 })

	pause.paused.Store(true)
	paused := time.Now()
	// Once a call of a's hangs, no other gets through: the Lease no
	// longer changes.
	waitFor(t, "a's API paused", pause.holding)
	e.mounts.SetStuck()
	pausedActs := len(log.byWho("a"))

	b := e.lockRollout("b", e.client(log, "b", nil), &outB, func(o *rollout.Options) { o.Resume = true })
	if _, err := b.Run(ctx); err != nil {
		t.Fatalf("b: %v\n%s", err, outB.String())
	}
	t.Logf("b took over and finished %s after a's API paused", time.Since(paused).Round(time.Millisecond))

	close(pause.resume)
	pause.paused.Store(false)
	var errA error
	select {
	case errA = <-doneA:
	case <-time.After(30 * time.Second):
		t.Fatal("a did not stop")
	}
	if errA == nil || !strings.Contains(errA.Error(), "lost its lock") {
		t.Errorf("a: %v, want a failure saying it lost its lock", errA)
	}

	actsA, actsB := log.byWho("a"), log.byWho("b")
	if len(actsB) == 0 {
		t.Fatal("b never acted")
	}
	if len(actsA) != pausedActs {
		t.Errorf("a acted after its API paused: %v", actsA[pausedActs:])
	}
	for _, x := range actsA {
		if x.seq > actsB[0].seq {
			t.Errorf("a acted (%s) after b began acting", x.req)
		}
	}
	t.Logf("a acted %d times before the pause, b %d times after; a's calls held by the pause: %v", len(actsA), len(actsB), pause.blocked)
	for node, rev := range e.revisions() {
		if rev != "new" || e.tainted(node) {
			t.Errorf("node %s: revision %s, tainted %v", node, rev, e.tainted(node))
		}
	}
	if rec := e.record(); rec.Holder != "b" || rec.Phase != rollout.PhaseDone {
		t.Errorf("record %+v: a wrote over b's", rec)
	}
	if ev := e.events()["RolloutFailed"]; ev != "" {
		t.Errorf("a recorded an Event after losing the lock: %s", ev)
	}
	lease, err := e.c.Client.CoordinationV1().Leases(ns).Get(context.Background(), dsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("lease still held by %q after both rollouts ended", *h)
	}
}

// A rollout releases its Lease when it ends, so the next one takes it at
// once; the Lease is named after the DaemonSet, in its namespace.
func TestLockReleased(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.run(nil); err != nil {
		t.Fatal(err)
	}
	lease, err := e.c.Client.CoordinationV1().Leases(ns).Get(context.Background(), dsName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no Lease %s/%s: %v", ns, dsName, err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("lease still held by %q", *h)
	}
	if lease.Labels["app.kubernetes.io/managed-by"] != rollout.EventSource {
		t.Errorf("lease labels %v", lease.Labels)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
