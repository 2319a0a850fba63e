package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// Phase is the state of a rollout as its record tells it.
type Phase string

// The phases of a [Record].
const (
	PhaseRunning Phase = "running"
	PhaseFailed  Phase = "failed"
	PhaseDone    Phase = "done"
)

// Record is the progress record of a rollout, kept as JSON in the
// DaemonSet's [RecordAnnotation]. The lock is a Lease (see
// [Rollout.Run]); the record is written only under it, and only while it
// names the writer as Holder.
type Record struct {
	// Holder names the rollout process that wrote the record last.
	Holder string `json:"holder"`
	// Phase is running while Holder works, failed after a failure or an
	// interruption, done after success.
	Phase Phase `json:"phase"`
	// Revision is the controller-revision-hash the rollout upgrades to.
	Revision string `json:"revision"`
	// Started is when the rollout (or its last resumption) began.
	Started time.Time `json:"started"`
	// Renewed and LeaseSeconds were the lock of releases before the
	// Lease: the holder's last heartbeat, by its clock, and its lease.
	// They are no longer written; a record that has them is taken as
	// held while Renewed + LeaseSeconds is ahead, so that a rollout of an
	// older release is not overrun.
	Renewed      time.Time `json:"renewed,omitzero"`
	LeaseSeconds int       `json:"leaseSeconds,omitempty"`
	// Reason says why a failed rollout stopped.
	Reason string `json:"reason,omitempty"`
	// Nodes is each node's progress.
	Nodes map[string]*NodeRecord `json:"nodes,omitempty"`
}

// NodeRecord is one node's progress.
type NodeRecord struct {
	// Step is the step under way, the step that failed, or done.
	Step Step `json:"step"`
	// Since is when Step began.
	Since time.Time `json:"since"`
	// Error is why Step failed; empty otherwise.
	Error string `json:"error,omitempty"`
	// Strategy is how the node is upgraded: the rollout's, or drain where
	// an in-place rollout found an unscoped live mount. Empty before this
	// field existed: drain.
	Strategy Strategy `json:"strategy,omitempty"`
}

// legacyLive reports whether a rollout of a release before the Lease may
// hold the record at now.
func (r *Record) legacyLive(now time.Time) bool {
	return r.LeaseSeconds > 0 && r.Phase == PhaseRunning && now.Before(r.Renewed.Add(time.Duration(r.LeaseSeconds)*time.Second))
}

// Unfinished returns the nodes the record has not seen through to done,
// sorted by name.
func (r *Record) Unfinished() []string {
	var nodes []string
	for n, nr := range r.Nodes {
		if nr.Step != StepDone {
			nodes = append(nodes, n)
		}
	}
	sort.Strings(nodes)
	return nodes
}

// ReadRecord returns the record of ds, nil if it has none.
func ReadRecord(ds *appsv1.DaemonSet) (*Record, error) {
	s, ok := ds.Annotations[RecordAnnotation]
	if !ok || s == "" {
		return nil, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return nil, fmt.Errorf("annotation %s of daemonset %s/%s: %w", RecordAnnotation, ds.Namespace, ds.Name, err)
	}
	if r.Nodes == nil {
		r.Nodes = map[string]*NodeRecord{}
	}
	return &r, nil
}

// writeRecord reads the DaemonSet, checks that this rollout still holds the
// lock and that the record still names it, applies change to the record and
// writes it back with the read resourceVersion as precondition, retrying on
// conflict.
func (r *Rollout) writeRecord(ctx context.Context, change func(rec *Record)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := r.Client.AppsV1().DaemonSets(r.opts.Namespace).Get(ctx, r.opts.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get daemonset: %w", err)
		}
		rec, err := ReadRecord(ds)
		if err != nil {
			return err
		}
		if rec == nil || rec.Holder != r.opts.Holder {
			holder := "nobody"
			if rec != nil {
				holder = rec.Holder
			}
			return fmt.Errorf("%w: the record names %s", errLockLost, holder)
		}
		change(rec)
		return r.patchRecord(ctx, ds, rec)
	})
}

// patchRecord writes rec into ds's annotation, conditional on ds's
// resourceVersion, if the rollout still holds its lock.
func (r *Rollout) patchRecord(ctx context.Context, ds *appsv1.DaemonSet, rec *Record) error {
	if err := r.mayAct(); err != nil {
		return err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": ds.ResourceVersion,
		"annotations":     map[string]string{RecordAnnotation: string(data)},
	}})
	if err != nil {
		return err
	}
	_, err = r.Client.AppsV1().DaemonSets(ds.Namespace).Patch(ctx, ds.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: EventSource})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("write annotation %s: %w", RecordAnnotation, err)
	}
	return err
}

// acquire takes the lock for plan, or refuses. It returns the record as
// written.
func (r *Rollout) acquire(ctx context.Context, plan *Plan) (*Record, error) {
	var rec *Record
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := r.Client.AppsV1().DaemonSets(r.opts.Namespace).Get(ctx, r.opts.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get daemonset: %w", err)
		}
		old, err := ReadRecord(ds)
		if err != nil {
			return err
		}
		if err := r.mayTake(old); err != nil {
			return err
		}
		now := r.now()
		rec = &Record{
			Holder:   r.opts.Holder,
			Phase:    PhaseRunning,
			Revision: plan.Revision,
			Started:  now,
			Nodes:    map[string]*NodeRecord{},
		}
		if old != nil && old.Phase != PhaseDone {
			// Keep the history of the nodes still to do.
			for n, nr := range old.Nodes {
				if nr.Step != StepDone {
					rec.Nodes[n] = nr
				}
			}
		}
		for _, n := range plan.Nodes {
			if _, ok := rec.Nodes[n.Node]; !ok {
				rec.Nodes[n.Node] = &NodeRecord{Step: StepPending, Since: now}
			}
		}
		return r.patchRecord(ctx, ds, rec)
	})
	return rec, err
}

// mayTake decides whether a rollout may take over the record old.
func (r *Rollout) mayTake(old *Record) error {
	if old == nil || old.Phase == PhaseDone {
		return nil
	}
	cmd := r.resumeCommand()
	if old.legacyLive(r.now()) && old.Holder != r.opts.Holder {
		until := old.Renewed.Add(time.Duration(old.LeaseSeconds) * time.Second)
		return refuse(fmt.Sprintf("Wait for it to finish. If that process is dead, its lock expires at %s by its clock; then run: %s",
			until.UTC().Format(time.RFC3339), cmd),
			"a rollout of daemonset %s/%s by an older mountpod-rollout is running (holder %s, started %s, last heartbeat %s)",
			r.opts.Namespace, r.opts.Name, old.Holder, old.Started.UTC().Format(time.RFC3339), old.Renewed.UTC().Format(time.RFC3339))
	}
	if r.opts.Resume {
		return nil
	}
	what := "was interrupted"
	if old.Phase == PhaseFailed {
		what = "failed"
	}
	reason := ""
	if old.Reason != "" {
		reason = ": " + old.Reason
	}
	return refuse(fmt.Sprintf("Nodes %v may still be tainted %s. Fix the cause, then continue with: %s",
		old.Unfinished(), TaintKey, cmd),
		"the last rollout of daemonset %s/%s %s (holder %s)%s", r.opts.Namespace, r.opts.Name, what, old.Holder, reason)
}

// resumeCommand is the command line that resumes this rollout.
func (r *Rollout) resumeCommand() string {
	var flags string
	if r.opts.Strategy != StrategyDrain {
		flags += " --strategy " + string(r.opts.Strategy)
		if r.opts.Unscoped != UnscopedDrain {
			flags += " --unscoped " + string(r.opts.Unscoped)
		}
	}
	if r.opts.NodeSelector != "" {
		flags += " --selector " + shellQuote(r.opts.NodeSelector)
	}
	return fmt.Sprintf("mountpod-rollout -n %s%s --resume %s", r.opts.Namespace, flags, r.opts.Name)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// setNode records node's step, error and strategy (nr's Since is set to
// now).
func (r *Rollout) setNode(ctx context.Context, node string, nr NodeRecord) error {
	r.recMu.Lock()
	defer r.recMu.Unlock()
	return r.writeRecord(ctx, func(rec *Record) {
		if rec.Nodes == nil {
			rec.Nodes = map[string]*NodeRecord{}
		}
		nr.Since = r.now()
		rec.Nodes[node] = &nr
	})
}

// finish records the end of the rollout: done, or failed with reason.
func (r *Rollout) finish(ctx context.Context, reason string) error {
	r.recMu.Lock()
	defer r.recMu.Unlock()
	return r.writeRecord(ctx, func(rec *Record) {
		if reason == "" {
			rec.Phase = PhaseDone
			rec.Reason = ""
			return
		}
		rec.Phase = PhaseFailed
		rec.Reason = reason
	})
}
