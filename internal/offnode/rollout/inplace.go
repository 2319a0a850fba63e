package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mountcontainers/mountcontainers/internal/boundary/livestatus"
)

// errUnscoped is the failure of inspect-mounts with UnscopedRefuse.
var errUnscoped = errors.New("not replaced in place (--unscoped refuse)")

// inspect reads old's live-mount report and decides the node's strategy:
// in place when every live mount is scoped (the report becomes the
// baseline verify checks), else drain or, with UnscopedRefuse, a failure
// naming the unscoped mounts.
func (n *nodeRun) inspect(ctx context.Context, old *corev1.Pod) (string, error) {
	var (
		rep     *livestatus.Report
		lastErr error
		stale   string
	)
	err := wait.PollUntilContextTimeout(ctx, n.r.opts.PollInterval, n.r.opts.UnmountTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := n.readable(ctx, old)
		switch {
		case errors.Is(err, errGone):
			return false, err
		case errors.Is(err, errNotRunning) && n.replacedInPlaceBefore():
			stale = p.Name
			return true, nil
		case err != nil:
			lastErr = err
			return false, nil
		}
		r, err := n.r.Status.Status(ctx, p, n.t.container)
		switch {
		case errors.Is(err, ErrNoStatus):
			return false, err
		case err != nil:
			lastErr = err
			return false, nil
		}
		rep = r
		return true, nil
	})
	switch {
	case errors.Is(err, ErrNoStatus):
		return n.unscoped(unscopedSummary(old.Name, nil, err))
	case wait.Interrupted(err) && lastErr != nil:
		return "", fmt.Errorf("cannot read the live mounts through %s within %s: %w", old.Name, n.r.opts.UnmountTimeout, lastErr)
	case err != nil:
		return "", err
	case stale != "":
		return fmt.Sprintf("container %s of %s is not running, so no daemon runs in it; an earlier run of this rollout found the node's mounts all scoped and replaced its mount pod in place (it reached %s): replacing %s in place again",
			n.t.container, stale, n.prior.Step, stale), nil
	}
	if why := unscopedSummary(old.Name, rep, nil); why != "" {
		return n.unscoped(why)
	}
	n.baseline = rep
	return fmt.Sprintf("%s: replacing %s in place", scopedSummary(rep), old.Name), nil
}

// unscoped applies the UnscopedPolicy to a node whose live mounts are not
// all scoped, as why says.
func (n *nodeRun) unscoped(why string) (string, error) {
	if n.r.opts.Unscoped == UnscopedRefuse {
		return "", fmt.Errorf("%w: %s", errUnscoped, why)
	}
	n.strategy = StrategyDrain
	return why + ": draining the node instead", nil
}

// replacedInPlaceBefore reports whether an earlier run of this rollout
// found the node's mounts all scoped and got as far as replacing its mount
// pod in place.
func (n *nodeRun) replacedInPlaceBefore() bool {
	past := n.prior.Step == StepDelete || n.prior.Step == StepReady || n.prior.Step == StepVerify
	return n.priorStrategy() == StrategyInPlace && past
}

// unscopedSummary says which live mounts of rep, pod's report, are not
// scoped and would die with pod; "" when all are scoped. A nil rep and
// statusErr say that pod cannot tell.
func unscopedSummary(pod string, rep *livestatus.Report, statusErr error) string {
	if rep == nil {
		return fmt.Sprintf("%s cannot tell whether the node's mounts are scoped: %v", pod, statusErr)
	}
	unscoped := rep.Unscoped()
	if len(unscoped) == 0 {
		return ""
	}
	var parts []string
	for _, m := range unscoped {
		parts = append(parts, describeLive(m))
	}
	s := fmt.Sprintf("%d of %d live mount(s) not scoped, they would die with %s: %s", len(unscoped), len(rep.Mounts), pod, strings.Join(parts, "; "))
	if rep.ScopesError != "" {
		s += " (scopes are unavailable in " + pod + ": " + rep.ScopesError + ")"
	}
	return s
}

// scopedSummary describes rep, whose live mounts are all scoped.
func scopedSummary(rep *livestatus.Report) string {
	if len(rep.Mounts) == 0 {
		return "no live FUSE mount"
	}
	return fmt.Sprintf("%d live mount(s), all scoped", len(rep.Mounts))
}

// verify reads the live-mount report of the node's new mount pod and checks
// that every mount of the baseline is still there (unless the pod using it
// went meanwhile), healthy and scoped, and that no other mount is broken.
// Without a baseline (a resumed node) every live mount must be healthy and
// scoped. A report whose only faults are mounts that do not answer as
// healthy is read again until UnmountTimeout: a mount whose check found it
// busy (no answer within the check's bound on a loaded node), or whose
// daemon the new pod's recovery is mounting again, passes later; the last
// report's faults are then the error. A mount gone, or not scoped, fails
// at once.
func (n *nodeRun) verify(ctx context.Context) (string, error) {
	var (
		msg        string
		lastErr    error
		lastFaults *mountFaults
	)
	err := wait.PollUntilContextTimeout(ctx, n.r.opts.PollInterval, n.r.opts.UnmountTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := n.readable(ctx, nil)
		if err != nil {
			lastErr = err
			return false, nil
		}
		if p.Labels[RevisionLabel] != n.t.revision {
			lastErr = fmt.Errorf("the node's mount pod %s is of revision %s, not %s", p.Name, p.Labels[RevisionLabel], n.t.revision)
			return false, nil
		}
		r, err := n.r.Status.Status(ctx, p, n.t.container)
		if err != nil {
			lastErr = err
			return false, nil
		}
		msg, err = n.judge(ctx, r, p)
		var faults *mountFaults
		switch {
		case errors.As(err, &faults) && faults.lasting:
			return false, faults
		case faults != nil:
			lastFaults = faults
			return false, nil
		case err != nil:
			lastErr = err
			return false, nil
		}
		return true, nil
	})
	var faults *mountFaults
	switch {
	case errors.As(err, &faults):
		return "", faults
	case ctx.Err() != nil:
		return "", context.Cause(ctx)
	case wait.Interrupted(err) && lastFaults != nil:
		return "", lastFaults
	case wait.Interrupted(err) && lastErr != nil:
		return "", fmt.Errorf("cannot read the live mounts through the new mount pod within %s: %w", n.r.opts.UnmountTimeout, lastErr)
	case err != nil:
		return "", err
	}
	return msg, nil
}

// mountFaults is the error of a report that does not pass verify; lasting
// when a fault cannot clear by itself (a mount gone, or not scoped).
type mountFaults struct {
	msg     string
	lasting bool
}

func (e *mountFaults) Error() string { return e.msg }

// judge checks rep, read from the new mount pod cur, as verify says.
func (n *nodeRun) judge(ctx context.Context, rep *livestatus.Report, cur *corev1.Pod) (string, error) {
	if n.baseline == nil {
		var bad []string
		lasting := false
		for _, m := range rep.Mounts {
			if !m.Healthy || !m.Scoped {
				bad = append(bad, describeLive(m))
				lasting = lasting || m.Healthy
			}
		}
		if len(bad) > 0 {
			return "", &mountFaults{fmt.Sprintf("%d live mount(s) on the node are not healthy and scoped under the new mount pod %s: %s", len(bad), cur.Name, strings.Join(bad, "; ")), lasting}
		}
		return fmt.Sprintf("%d live mount(s), all healthy and scoped under %s", len(rep.Mounts), cur.Name), nil
	}
	live, err := n.livePods(ctx)
	if err != nil {
		return "", err
	}
	var (
		bad     []string
		kept    int
		went    int
		lasting bool
	)
	inBaseline := map[string]bool{}
	for _, m := range n.baseline.Mounts {
		inBaseline[m.Target] = true
		now, ok := findLive(rep, m.Target)
		switch {
		case !ok && !live[podUIDOf(m.Target)]:
			went++ // unmounted with its pod, which went meanwhile
		case !ok:
			bad = append(bad, m.Target+": gone, while the pod using it still runs")
			lasting = true
		case !now.Healthy || !now.Scoped:
			lasting = lasting || now.Healthy
			s := describeLive(now)
			if !m.Healthy {
				s += " (not healthy before the replacement either)"
			}
			bad = append(bad, s)
		default:
			kept++
		}
	}
	for _, m := range rep.Mounts {
		if !inBaseline[m.Target] && !m.Healthy {
			bad = append(bad, describeLive(m)+" (mounted while the mount pod was replaced)")
		}
	}
	if len(bad) > 0 {
		return "", &mountFaults{fmt.Sprintf("%d mount(s) did not survive the replacement in place (new mount pod %s): %s", len(bad), cur.Name, strings.Join(bad, "; ")), lasting}
	}
	msg := fmt.Sprintf("%d live mount(s) kept, healthy and scoped under %s", kept, cur.Name)
	if went > 0 {
		msg += fmt.Sprintf("; %d unmounted meanwhile with their pods", went)
	}
	return msg, nil
}

// livePods returns the UIDs of the pods on the node that are neither
// finished nor being deleted.
func (n *nodeRun) livePods(ctx context.Context) (map[types.UID]bool, error) {
	list, err := n.r.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.node})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", n.node, err)
	}
	live := map[types.UID]bool{}
	for _, p := range list.Items {
		if p.Spec.NodeName == n.node && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live[p.UID] = true
		}
	}
	return live, nil
}

// podUIDOf returns the pod UID of a volume mount target
// <kubelet dir>/pods/<UID>/volumes/..., "" for any other target.
func podUIDOf(target string) types.UID {
	_, rest, ok := strings.Cut(target, "/pods/")
	if !ok {
		return ""
	}
	uid, rest, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(rest, "volumes/") {
		return ""
	}
	return types.UID(uid)
}

// dryRun fills in what each node of plan would get now: its strategy and,
// where it would or might be drained, the pods to evict. It only reads.
func (r *Rollout) dryRun(ctx context.Context, t *target, plan *Plan) error {
	pods, err := r.mountPods(ctx, t.ds)
	if err != nil {
		return err
	}
	for i := range plan.Nodes {
		np := &plan.Nodes[i]
		np.Strategy, np.StrategyReason = r.dryStrategy(ctx, t, pods[np.Node])
		if np.Strategy == string(StrategyInPlace) || np.Strategy == "refused" {
			continue
		}
		sel, err := t.selector.podsToEvict(ctx, np.Node)
		if sel != nil {
			for _, p := range sel.evict {
				np.Evict = append(np.Evict, p.Namespace+"/"+p.Name)
			}
			np.Warnings = sel.warnings
		}
		if err != nil {
			np.Warnings = append(np.Warnings, err.Error())
		}
	}
	return nil
}

// dryStrategy says which strategy a node whose mount pod is old (nil if
// none) would get now, and why, as inspect-mounts would decide.
func (r *Rollout) dryStrategy(ctx context.Context, t *target, old *corev1.Pod) (string, string) {
	if r.opts.Strategy == StrategyDrain {
		return string(StrategyDrain), ""
	}
	switch {
	case old == nil:
		return string(StrategyInPlace), "no mount pod on the node: waits for the DaemonSet's new one"
	case old.DeletionTimestamp == nil && old.Labels[RevisionLabel] == t.revision:
		return string(StrategyInPlace), "the mount pod already runs the newest revision"
	case !containerRunning(old, t.container):
		return "unknown", fmt.Sprintf("container %s of %s is not running: its live mounts cannot be read", t.container, old.Name)
	}
	rep, err := r.Status.Status(ctx, old, t.container)
	if err != nil && !errors.Is(err, ErrNoStatus) {
		return "unknown", err.Error()
	}
	why := unscopedSummary(old.Name, rep, err)
	switch {
	case why == "":
		return string(StrategyInPlace), scopedSummary(rep)
	case r.opts.Unscoped == UnscopedRefuse:
		return "refused", why
	}
	return string(StrategyDrain), why
}
