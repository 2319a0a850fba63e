package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Rollout upgrades the mount pods of one DaemonSet; see the package
// documentation. Set the exported fields, then call [Rollout.Run] once.
type Rollout struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// Mounts reads a mount pod's mount table (wait-unmount).
	Mounts MountLister
	// Status reads a mount pod's live-mount report (wait-unmount,
	// inspect-mounts, verify-mounts).
	Status StatusReader
	// Progress receives the plan and the progress (nothing if nil).
	Progress Reporter
	// Logger receives warnings (slog.Default() if nil).
	Logger *slog.Logger
	// Options configure the rollout.
	Options Options
	// Clock returns the time (time.Now if nil).
	Clock func() time.Time

	opts  Options
	log   *slog.Logger
	recMu sync.Mutex
	start time.Time
	// lock is the rollout lock while held (nil in a dry run).
	lock *leaseLock
	// prior is each node's record as an earlier rollout left it (resumed
	// nodes only).
	prior map[string]NodeRecord
}

func (r *Rollout) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

func (r *Rollout) init() error {
	r.opts = r.Options.withDefaults()
	if r.opts.Namespace == "" || r.opts.Name == "" {
		return refuse("", "the DaemonSet's namespace and name are required")
	}
	if r.opts.Holder == "" {
		host, _ := os.Hostname()
		r.opts.Holder = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	r.log = r.Logger
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.Progress == nil {
		r.Progress = discard{}
	}
	if r.Mounts == nil || r.Status == nil {
		return refuse("", "no MountLister or StatusReader: cannot observe the mounts")
	}
	switch r.opts.Strategy {
	case StrategyDrain, StrategyInPlace:
	default:
		return refuse("", "strategy %q: want %s or %s", r.opts.Strategy, StrategyDrain, StrategyInPlace)
	}
	switch r.opts.Unscoped {
	case UnscopedDrain, UnscopedRefuse:
	default:
		return refuse("", "unscoped policy %q: want %s or %s", r.opts.Unscoped, UnscopedDrain, UnscopedRefuse)
	}
	r.start = r.now()
	return nil
}

// Run performs the rollout (or, with Options.DryRun, only reports the plan)
// and returns the plan. Its error is an [*Error] when the rollout refused to
// start or stopped on a node, or an API error from preflight.
func (r *Rollout) Run(ctx context.Context) (*Plan, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	t, plan, err := r.preflight(ctx)
	if err != nil {
		return plan, err
	}
	if r.opts.DryRun {
		if err := r.dryRun(ctx, t, plan); err != nil {
			return plan, err
		}
		r.Progress.Plan(plan)
		return plan, nil
	}
	r.Progress.Plan(plan)
	old, err := ReadRecord(t.ds)
	if err != nil {
		return plan, err
	}
	if len(plan.Nodes) == 0 && (old == nil || old.Phase == PhaseDone) {
		msg := "every mount pod runs revision " + plan.Revision
		if plan.NodeSelector != "" {
			msg = "every mount pod of the nodes selected by " + plan.NodeSelector + " runs revision " + plan.Revision
		}
		r.report(Event{Status: StatusDone, Message: msg})
		return plan, nil
	}
	// Refuse what the record of a rollout that ended refuses before
	// waiting for the lock (a running one's holder may be alive: the lock
	// tells); acquire decides again under it.
	if old != nil && old.Phase != PhaseRunning {
		if err := r.mayTake(old); err != nil {
			return plan, err
		}
	}
	lk, err := r.takeLock(ctx)
	if err != nil {
		return plan, err
	}
	// Let the lock go only after the last write.
	defer lk.release()
	r.lock = lk
	rec, err := r.acquire(ctx, plan)
	if err != nil {
		return plan, err
	}
	r.prior = map[string]NodeRecord{}
	for n, nr := range rec.Nodes {
		r.prior[n] = *nr
	}
	r.event(ctx, t.ds, corev1.EventTypeNormal, "RolloutStarted",
		fmt.Sprintf("%s upgrades %d node(s) to revision %s", r.opts.Holder, len(plan.Nodes), plan.Revision))

	// lk.ctx ends with ctx, and when the lock is lost.
	failure := r.runNodes(lk.ctx, t, plan)

	// The record must be written even when ctx was cancelled by a signal
	// (but never once the lock is lost: another rollout may own it).
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer fcancel()
	if failure == nil {
		if err := r.finish(fctx, ""); err != nil {
			return plan, fmt.Errorf("rollout done, but recording it failed: %w", err)
		}
		msg := fmt.Sprintf("%d node(s) upgraded to revision %s", len(plan.Nodes), plan.Revision)
		r.event(fctx, t.ds, corev1.EventTypeNormal, "RolloutSucceeded", msg)
		r.report(Event{Status: StatusDone, Message: msg})
		return plan, nil
	}
	if cause := context.Cause(lk.ctx); errors.Is(cause, errLockLost) {
		failure.Hint = fmt.Sprintf("This rollout lost its lock (%s: %v) and stopped acting: another rollout may have taken over. "+
			"Check kubectl -n %s get lease %s; when nobody holds it, continue with: %s",
			lk.describe(), cause, r.opts.Namespace, r.opts.Name, r.resumeCommand())
	}
	reason := failure.Error()
	if i := strings.IndexByte(reason, '\n'); i >= 0 {
		reason = reason[:i] // the hint is for the operator, not the record
	}
	if err := r.finish(fctx, reason); err != nil {
		failure.Hint += fmt.Sprintf("\n(recording the failure on the DaemonSet failed too: %v)", err)
	}
	r.event(fctx, t.ds, corev1.EventTypeWarning, "RolloutFailed", reason)
	r.report(Event{Status: StatusFailed, Node: failure.Node, Step: failure.Step, Message: reason})
	return plan, failure
}

// runNodes upgrades plan's nodes, MaxUnavailable at a time. After the
// first failure it starts no further node, lets the running ones finish and
// returns that failure (with the others' appended).
func (r *Rollout) runNodes(ctx context.Context, t *target, plan *Plan) *Error {
	work := make(chan string)
	var (
		mu       sync.Mutex
		failures []*Error
		wg       sync.WaitGroup
	)
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(failures) > 0
	}
	for range min(r.opts.MaxUnavailable, len(plan.Nodes)) {
		wg.Go(func() {
			for node := range work {
				if stopped() {
					continue // a node failed: start no other
				}
				if err := r.upgradeNode(ctx, t, node); err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range plan.Nodes {
		if stopped() || ctx.Err() != nil {
			break
		}
		work <- n.Node
	}
	close(work)
	wg.Wait()
	if len(failures) == 0 {
		if ctx.Err() != nil {
			return &Error{Kind: Failed, Err: fmt.Errorf("interrupted: %w", context.Cause(ctx)), Hint: "Continue with: " + r.resumeCommand()}
		}
		return nil
	}
	first := failures[0]
	for _, f := range failures[1:] {
		first.Err = fmt.Errorf("%w; also node %s: %s: %v", first.Err, f.Node, f.Step, f.Err)
	}
	return first
}

// report sends e with the total time filled in, and logs it at debug
// level: the progress goes to its reader, the log may go elsewhere.
func (r *Rollout) report(e Event) {
	e.Time = r.now()
	e.TotalSeconds = e.Time.Sub(r.start).Seconds()
	r.Progress.Event(e)
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		attrs := []any{"node", e.Node, "step", string(e.Step), "status", string(e.Status), "totalSeconds", e.TotalSeconds}
		if e.StepSeconds > 0 {
			attrs = append(attrs, "stepSeconds", e.StepSeconds)
		}
		if e.Message != "" {
			attrs = append(attrs, "message", e.Message)
		}
		r.log.Debug("rollout step", attrs...)
	}
}

// event records a Kubernetes Event on ds; failing to is only logged.
func (r *Rollout) event(ctx context.Context, ds *appsv1.DaemonSet, typ, reason, msg string) {
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	now := metav1.NewTime(r.now())
	ev := &corev1.Event{
		// Named as client-go's event recorder names them.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ds.Name, now.UnixNano()), Namespace: ds.Namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "DaemonSet", APIVersion: "apps/v1", Namespace: ds.Namespace, Name: ds.Name, UID: ds.UID,
		},
		Reason:         reason,
		Message:        msg,
		Type:           typ,
		Source:         corev1.EventSource{Component: EventSource},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	if err := r.mayAct(); err != nil {
		r.log.Warn("event not recorded", "reason", reason, "err", err)
		return
	}
	if _, err := r.Client.CoreV1().Events(ds.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.log.Warn("record event", "reason", reason, "err", err)
	}
}

// errInterrupted wraps a step error caused by the end of the run's context.
func stepError(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, context.Cause(ctx)) {
		return fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	return err
}
