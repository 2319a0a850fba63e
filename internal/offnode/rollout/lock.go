package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// errLockLost is the cause of every step stopped because this rollout no
// longer holds its lock, and the error of every write attempted after.
var errLockLost = errors.New("lost the rollout lock")

// errLockReleased stops acting once the rollout has let its lock go.
var errLockReleased = fmt.Errorf("%w: released", errLockLost)

// lockTimings returns the Lease's duration (whole seconds, at least one:
// the Lease records seconds), how long the holder may act after sending a
// renewal that succeeded, and how often it renews.
func lockTimings(lease time.Duration) (duration, actFor, retry time.Duration) {
	duration = max(lease.Truncate(time.Second), time.Second)
	return duration, duration * 2 / 3, duration / 6
}

// leaseLock is the rollout lock: the coordination.k8s.io/v1 Lease named
// after the DaemonSet, in its namespace, held with client-go's leader
// election. Whether another holder's lease has expired is judged by time
// observed here (the Lease unchanged for its duration), never by the
// holder's timestamps, so clock skew between machines does not matter.
//
// The holder acts only while check says so: until actFor after the send of
// its last renewal that succeeded. A contender takes over no earlier than
// the lease duration after that renewal reached the API server (it must
// see the Lease unchanged that long), so the last third of the lease is
// the margin for calls in flight and for clocks running at different
// rates. Past that point ctx is cancelled, and every acting step checks
// first.
type leaseLock struct {
	resourcelock.Interface
	identity                string
	duration, actFor, retry time.Duration
	// heldBy is called once when the Lease is first seen held by another
	// holder, with that holder and its lease duration.
	heldBy func(holder string, lease time.Duration)

	mu         sync.Mutex
	validUntil time.Time
	timer      *time.Timer
	lost       error
	lastErr    error
	// The other holder seen while acquiring: its name, its raw record,
	// its lease duration; live once its record changed under the same
	// holder (it renews).
	other      string
	otherRaw   string
	otherLease time.Duration
	acquired   chan struct{}
	live       chan struct{}
	liveOnce   sync.Once

	// ctx is cancelled, with an errLockLost cause, when the lock is lost.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// stop ends the election (releasing the Lease if held); done is
	// closed when it has ended.
	stop context.CancelFunc
	done chan struct{}
}

var _ resourcelock.Interface = (*leaseLock)(nil)

// Get reads the Lease, noting who holds it and whether that holder renews.
func (l *leaseLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			l.lastErr = err
		}
		return rec, raw, err
	}
	if rec.HolderIdentity == "" || rec.HolderIdentity == l.identity {
		return rec, raw, err
	}
	first := l.other == ""
	if rec.HolderIdentity == l.other && string(raw) != l.otherRaw {
		l.liveOnce.Do(func() { close(l.live) })
	}
	l.other, l.otherRaw, l.otherLease = rec.HolderIdentity, string(raw), time.Duration(rec.LeaseDurationSeconds)*time.Second
	select {
	case <-l.acquired:
		// Held by another after this rollout held it: the election
		// reports the loss.
	default:
		if first && l.heldBy != nil {
			l.heldBy(l.other, l.otherLease)
		}
	}
	return rec, raw, err
}

// Create creates the Lease; success makes this rollout the holder.
func (l *leaseLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, rec)
	l.wrote(sent, rec, err)
	return err
}

// Update writes the Lease; success as the holder extends the time this
// rollout may act.
func (l *leaseLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Update(ctx, rec)
	l.wrote(sent, rec, err)
	return err
}

func (l *leaseLock) wrote(sent time.Time, rec resourcelock.LeaderElectionRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.lastErr = err
		return
	}
	if rec.HolderIdentity != l.identity || l.lost != nil {
		return // the release, or too late: a lost lock is never taken back
	}
	until := sent.Add(l.actFor)
	if !until.After(l.validUntil) {
		return
	}
	l.validUntil = until
	if l.timer == nil {
		l.timer = time.AfterFunc(time.Until(until), l.expire)
	} else {
		l.timer.Reset(time.Until(until))
	}
}

// expire runs when the time to act is up, unless a renewal moved it.
func (l *leaseLock) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := time.Until(l.validUntil); d > 0 {
		l.timer.Reset(d)
		return
	}
	l.loseLocked(fmt.Errorf("%w: the Lease was not renewed within %s (last error: %v)", errLockLost, l.actFor, l.lastErr))
}

func (l *leaseLock) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(err)
}

func (l *leaseLock) loseLocked(err error) {
	if l.lost != nil {
		return
	}
	l.lost = err
	if l.timer != nil {
		l.timer.Stop()
	}
	l.cancel(err)
}

// check returns nil while this rollout may act, an error wrapping
// errLockLost once it may not.
func (l *leaseLock) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost == nil && !time.Now().Before(l.validUntil) {
		l.loseLocked(fmt.Errorf("%w: the Lease was not renewed within %s (last error: %v)", errLockLost, l.actFor, l.lastErr))
	}
	return l.lost
}

// release stops acting, ends the election and waits until the Lease is
// released (when held).
func (l *leaseLock) release() {
	l.lose(errLockReleased)
	l.stop()
	<-l.done
}

// describe names the Lease.
func (l *leaseLock) describe() string { return "Lease " + l.Describe() }

// takeLock takes the rollout lock, or refuses: when another rollout holds
// it and renews it, as soon as a renewal is seen; when the Lease cannot be
// taken within its holder's lease duration (and a few retries), with the
// last error. It waits while a holder that has stopped renewing has not
// been seen unrenewed for its lease duration.
func (r *Rollout) takeLock(ctx context.Context) (*leaseLock, error) {
	duration, actFor, retry := lockTimings(r.opts.LockLease)
	l := &leaseLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: r.opts.Name},
			Client:     r.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: r.opts.Holder},
			Labels:     map[string]string{"app.kubernetes.io/managed-by": EventSource},
		},
		identity: r.opts.Holder,
		duration: duration, actFor: actFor, retry: retry,
		acquired: make(chan struct{}),
		live:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.heldBy = func(holder string, lease time.Duration) {
		r.report(Event{Status: StatusInfo, Message: fmt.Sprintf("%s is held by %s: waiting until it renews (another rollout is running: refused) or has gone unrenewed for its %s (taken over)",
			l.describe(), holder, lease)})
	}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	var once sync.Once
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          l,
		LeaseDuration: duration,
		RenewDeadline: actFor,
		RetryPeriod:   retry,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { once.Do(func() { close(l.acquired) }) },
			OnStoppedLeading: func() {
				l.lose(fmt.Errorf("%w: %s could not be renewed (last error: %v)", errLockLost, l.describe(), l.lastError()))
			},
		},
		ReleaseOnCancel: true,
		Name:            r.opts.Namespace + "/" + r.opts.Name,
	})
	if err != nil {
		return nil, refuse("", "rollout lock: %v", err)
	}
	// The election outlives ctx (a signal) until release: the failure
	// must still be recorded under the lock.
	ectx, stop := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), logr.FromSlogHandler(warnings{r.log.Handler()})))
	l.stop = stop
	go func() {
		defer close(l.done)
		le.Run(ectx)
	}()

	start := time.Now()
	tick := time.NewTicker(retry)
	defer tick.Stop()
	for {
		select {
		case <-l.acquired:
			return l, nil
		case <-l.live:
			l.release()
			holder := l.holder()
			return nil, refuse(fmt.Sprintf("Wait for it to finish (kubectl -n %s get lease %s names the holder).", r.opts.Namespace, r.opts.Name),
				"another rollout of daemonset %s/%s is running: %s is held by %s, which renews it", r.opts.Namespace, r.opts.Name, l.describe(), holder)
		case <-ctx.Done():
			l.release()
			return nil, refuse("", "interrupted while waiting for the rollout lock: %v", context.Cause(ctx))
		case <-tick.C:
			if bound := 2*max(duration, l.heldLease()) + 2*retry; time.Since(start) > bound {
				l.release()
				return nil, l.notTaken(r, bound)
			}
		}
	}
}

func (l *leaseLock) lastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastErr
}

func (l *leaseLock) holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.other
}

func (l *leaseLock) heldLease() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.otherLease
}

// notTaken is the refusal of a lock not taken within bound.
func (l *leaseLock) notTaken(r *Rollout, bound time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case apierrors.IsForbidden(l.lastErr):
		return refuse(fmt.Sprintf("deploy/rbac grants the Leases of the DaemonSets it names (resourceNames): add %s to the daemonsets and leases rules in an overlay of yours.", r.opts.Name),
			"cannot take the rollout lock, %s: %v", l.describe(), l.lastErr)
	case l.lastErr != nil:
		return refuse("Is the API server reachable? Run the rollout again.", "cannot take the rollout lock, %s, within %s: %v", l.describe(), bound, l.lastErr)
	}
	return refuse(fmt.Sprintf("Wait for it to finish or for its lease to expire (kubectl -n %s get lease %s), then run the rollout again.", r.opts.Namespace, r.opts.Name),
		"%s is held by %s and was not released within %s", l.describe(), l.other, bound)
}

// mayAct returns nil while the rollout holds its lock (always in a dry run,
// which takes none), the reason it may not act otherwise.
func (r *Rollout) mayAct() error {
	if r.lock == nil {
		return nil
	}
	return r.lock.check()
}

// warnings passes on the records of slog.LevelWarn and above: the
// election's progress is reported by the rollout itself, its errors are
// worth seeing.
type warnings struct{ slog.Handler }

// Enabled reports whether level is at least slog.LevelWarn and h wants it.
func (h warnings) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && h.Handler.Enabled(ctx, level)
}

// WithAttrs keeps the filter.
func (h warnings) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnings{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the filter.
func (h warnings) WithGroup(name string) slog.Handler { return warnings{h.Handler.WithGroup(name)} }
