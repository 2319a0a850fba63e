package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubectl/pkg/drain"

	"github.com/mountcontainers/mountcontainers/internal/boundary/livestatus"
)

// nodeRun is one node's upgrade in progress.
type nodeRun struct {
	r     *Rollout
	t     *target
	node  string
	start time.Time
	// strategy is the node's: the rollout's, or drain after inspect-mounts
	// found an unscoped live mount.
	strategy Strategy
	// prior is the node's record from an earlier rollout (zero if none).
	prior NodeRecord
	// fenced: the node carried this DaemonSet's taint before this run's
	// taint step.
	fenced bool
	// baseline is the old mount pod's live-mount report that an in-place
	// replacement must keep (nil: none was read).
	baseline *livestatus.Report
}

// nodeStep is a step and what it runs.
type nodeStep struct {
	step Step
	run  func(ctx context.Context) (string, error)
}

func (n *nodeRun) report(step Step, status Status, since time.Time, msg string) {
	now := n.r.now()
	e := Event{Node: n.node, Step: step, Status: status, Message: msg, NodeSeconds: now.Sub(n.start).Seconds()}
	if !since.IsZero() {
		e.StepSeconds = now.Sub(since).Seconds()
	}
	n.r.report(e)
}

// upgradeNode takes node through the steps of its strategy; see the package
// documentation. It returns nil when the node is done.
func (r *Rollout) upgradeNode(ctx context.Context, t *target, node string) *Error {
	n := &nodeRun{r: r, t: t, node: node, start: r.now(), strategy: r.opts.Strategy, prior: r.prior[node]}
	if _, err := r.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		n.report(StepDone, StatusInfo, time.Time{}, "the node no longer exists")
		if err := r.setNode(ctx, node, NodeRecord{Step: StepDone, Strategy: n.strategy}); err != nil {
			return n.fail(ctx, StepPending, err)
		}
		return nil
	}
	old, err := n.mountPod(ctx)
	if err != nil {
		return n.fail(ctx, StepPending, err)
	}
	// replaced: resumed after the replacement was made (or the pod went).
	upToDate := old != nil && old.DeletionTimestamp == nil && old.Labels[RevisionLabel] == t.revision
	replaced := upToDate || old == nil
	if n.strategy == StrategyInPlace && replaced && n.priorStrategy() == StrategyDrain {
		n.strategy = StrategyDrain // finish a node drained by an earlier run as it began
	}
	if n.strategy == StrategyInPlace && !replaced {
		if err := n.runStep(ctx, nodeStep{StepInspect, func(ctx context.Context) (string, error) { return n.inspect(ctx, old) }}); err != nil {
			return err
		}
	}
	for _, s := range n.steps(old, upToDate) {
		if err := n.runStep(ctx, s); err != nil {
			return err
		}
	}
	if err := r.setNode(ctx, node, NodeRecord{Step: StepDone, Strategy: n.strategy}); err != nil {
		return n.fail(ctx, StepDone, err)
	}
	msg := fmt.Sprintf("node %s: mount pod replaced, revision %s Ready, taint removed", node, t.revision)
	if n.strategy == StrategyInPlace {
		msg = fmt.Sprintf("node %s: mount pod replaced in place, revision %s Ready, live mounts kept", node, t.revision)
	}
	r.event(ctx, t.ds, corev1.EventTypeNormal, "NodeUpgraded", msg)
	return nil
}

// priorStrategy is the strategy an earlier rollout upgraded the node with:
// "" if it did not start on the node, drain for a record from before the
// strategy was recorded.
func (n *nodeRun) priorStrategy() Strategy {
	switch {
	case n.prior.Step == "" || n.prior.Step == StepPending:
		return ""
	case n.prior.Strategy == "":
		return StrategyDrain
	}
	return n.prior.Strategy
}

// steps returns the steps left for the node's strategy, old being the
// node's mount pod at the start and upToDate telling whether it already
// runs the newest revision.
func (n *nodeRun) steps(old *corev1.Pod, upToDate bool) []nodeStep {
	var (
		taint   = nodeStep{StepTaint, n.taint}
		drain   = nodeStep{StepDrain, n.drain}
		unmount = nodeStep{StepUnmount, func(ctx context.Context) (string, error) { return n.waitUnmounted(ctx, old) }}
		del     = nodeStep{StepDelete, func(ctx context.Context) (string, error) { return n.deleteOld(ctx, old) }}
		ready   = nodeStep{StepReady, n.waitReady}
		verify  = nodeStep{StepVerify, n.verify}
		untaint = nodeStep{StepUntaint, n.untaint}
	)
	switch {
	case n.strategy == StrategyInPlace && (upToDate || old == nil):
		return []nodeStep{ready, verify, untaint}
	case n.strategy == StrategyInPlace:
		return []nodeStep{del, ready, verify, untaint}
	case upToDate:
		return []nodeStep{taint, ready, untaint} // resumed after the replacement was made
	}
	return []nodeStep{taint, drain, unmount, del, ready, untaint}
}

// runStep records s as the node's step, runs it and reports it.
func (n *nodeRun) runStep(ctx context.Context, s nodeStep) *Error {
	if err := n.r.setNode(ctx, n.node, NodeRecord{Step: s.step, Strategy: n.strategy}); err != nil {
		return n.fail(ctx, s.step, err)
	}
	since := n.r.now()
	n.report(s.step, StatusStarted, time.Time{}, "")
	msg, err := s.run(ctx)
	if err != nil {
		n.report(s.step, StatusFailed, since, err.Error())
		return n.fail(ctx, s.step, stepError(ctx, err))
	}
	n.report(s.step, StatusDone, since, msg)
	return nil
}

// fail records the failure of step and builds the error for the operator.
func (n *nodeRun) fail(ctx context.Context, step Step, err error) *Error {
	r := n.r
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if werr := r.setNode(wctx, n.node, NodeRecord{Step: step, Error: err.Error(), Strategy: n.strategy}); werr != nil {
		r.log.Warn("record the failure", "node", n.node, "err", werr)
	}
	var hint strings.Builder
	switch step {
	case StepInspect:
		if errors.Is(err, errUnscoped) {
			hint.WriteString("Those mounts' FUSE daemons run in the mount pod (docs/scopes.md says why a mount is not scoped): replacing it would break them. Drain the node instead (--unscoped drain, or --strategy drain), or move those workloads first. ")
		} else {
			hint.WriteString("The old mount pod's live mounts could not be read: is its container running (kubectl describe pod)? ")
		}
	case StepDrain:
		hint.WriteString("A pod could not be evicted: if a PodDisruptionBudget forbids it, wait until it allows a disruption (or scale the workload up). ")
	case StepUnmount:
		if errors.Is(err, errNotRunning) || errors.Is(err, errNoPod) {
			hint.WriteString("No mount can be read without a running mount pod: once sure that no workload on the node uses the plugin's volumes, delete a mount pod whose container is not running by hand; the resumed rollout then waits for its replacement. ")
		} else {
			hint.WriteString("Mounts of the plugin are still on the node: find the pods using them (kubectl get pods --field-selector spec.nodeName=" + n.node + " -A) and the kubelet's log. ")
		}
	case StepReady:
		hint.WriteString(fmt.Sprintf("The new mount pod is not Ready (kubectl -n %s describe pod -l %s): fix the DaemonSet (image, environment); --resume deletes a pod of an older revision and waits for its replacement. ",
			r.opts.Namespace, metav1.FormatLabelSelector(n.t.ds.Spec.Selector)))
	case StepVerify:
		hint.WriteString("The new mount pod is Ready, but the mounts named did not survive the replacement: the pods using them must be restarted (deleted) to mount again. Check that the mount pods run with hostPID and that scopes work (mountpod status in the new pod; docs/scopes.md). ")
	}
	if n.tainted(wctx) {
		fmt.Fprintf(&hint, "Node %s stays tainted %s, so nothing but the mount pod is scheduled there. When fixed, continue with: %s",
			n.node, taintString(r.taint()), r.resumeCommand())
		fmt.Fprintf(&hint, "\nTo reopen the node by hand once its mount pod is Ready: kubectl taint node %s %s:NoSchedule-", n.node, TaintKey)
	} else {
		fmt.Fprintf(&hint, "Node %s is not tainted: its workloads keep running. When fixed, continue with: %s", n.node, r.resumeCommand())
	}
	return &Error{Kind: Failed, Node: n.node, Step: step, Err: err, Hint: hint.String()}
}

// tainted reports whether the node carries this DaemonSet's taint (true if
// that cannot be read).
func (n *nodeRun) tainted(ctx context.Context) bool {
	node, err := n.r.Client.CoreV1().Nodes().Get(ctx, n.node, metav1.GetOptions{})
	return err != nil || hasOurTaint(node, n.r.opts.taintValue())
}

// mountPod returns the node's mount pod (nil if none).
func (n *nodeRun) mountPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := n.r.mountPods(ctx, n.t.ds)
	if err != nil {
		return nil, err
	}
	return pods[n.node], nil
}

// taint fences the node.
func (n *nodeRun) taint(ctx context.Context) (string, error) {
	want := n.r.taint()
	msg := "tainted " + taintString(want)
	err := n.updateNode(ctx, func(node *corev1.Node) (bool, error) {
		for _, t := range node.Spec.Taints {
			if t.Key == want.Key && t.Effect == want.Effect {
				if t.Value != want.Value {
					return false, fmt.Errorf("node is fenced by another rollout: taint %s", taintString(t))
				}
				n.fenced = true
				msg = "already tainted " + taintString(want)
				return false, nil
			}
		}
		now := metav1.NewTime(n.r.now())
		want.TimeAdded = &now
		node.Spec.Taints = append(node.Spec.Taints, want)
		return true, nil
	})
	return msg, err
}

// untaint reopens the node.
func (n *nodeRun) untaint(ctx context.Context) (string, error) {
	want := n.r.taint()
	msg := "taint removed"
	err := n.updateNode(ctx, func(node *corev1.Node) (bool, error) {
		var kept []corev1.Taint
		for _, t := range node.Spec.Taints {
			if !(t.Key == want.Key && t.Effect == want.Effect && t.Value == want.Value) {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			msg = "no taint to remove"
			return false, nil
		}
		msg = "taint removed"
		node.Spec.Taints = kept
		return true, nil
	})
	return msg, err
}

// updateNode applies change to the node and writes it if change says so.
func (n *nodeRun) updateNode(ctx context.Context, change func(*corev1.Node) (bool, error)) error {
	nodes := n.r.Client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, n.node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node: %w", err)
		}
		write, err := change(node)
		if err != nil || !write {
			return err
		}
		if err := n.r.mayAct(); err != nil {
			return err
		}
		_, err = nodes.Update(ctx, node, metav1.UpdateOptions{FieldManager: EventSource})
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("update node: %w", err)
		}
		return err
	})
}

// drain evicts the selected pods through the Eviction API.
func (n *nodeRun) drain(ctx context.Context) (string, error) {
	sel, err := n.t.selector.podsToEvict(ctx, n.node)
	if err != nil {
		return "", err
	}
	for _, w := range sel.warnings {
		n.report(StepDrain, StatusInfo, time.Time{}, "warning: "+w)
	}
	if len(sel.evict) == 0 {
		return "no pod to evict", nil
	}
	var names []string
	for _, p := range sel.evict {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if err := n.r.mayAct(); err != nil {
		return "", err
	}
	n.report(StepDrain, StatusInfo, time.Time{}, "evicting "+strings.Join(names, ", "))
	// A refusal (a PodDisruptionBudget's, most often) is retried until the
	// drain timeout: each is reported, so that a rollout that waits says why.
	refusals := &lastLine{each: func(line string) {
		n.report(StepDrain, StatusInfo, time.Time{}, "eviction refused, retrying: "+line)
	}}
	h := &drain.Helper{
		Ctx:                  ctx,
		Client:               n.r.Client,
		GracePeriodSeconds:   *n.r.opts.GracePeriod,
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   n.r.opts.DeleteEmptyDirData,
		Force:                n.r.opts.Force,
		Timeout:              n.r.opts.DrainTimeout,
		EvictErrorRetryDelay: n.r.opts.EvictRetryDelay,
		Out:                  discardWriter{},
		ErrOut:               refusals,
		OnPodDeletionOrEvictionFinished: func(p *corev1.Pod, usingEviction bool, err error) {
			if err == nil {
				n.report(StepDrain, StatusInfo, time.Time{}, "evicted "+p.Namespace+"/"+p.Name)
			}
		},
	}
	if err := h.DeleteOrEvictPods(sel.evict); err != nil {
		if last := refusals.get(); last != "" {
			return "", fmt.Errorf("evict within %s: %w; last refusal: %s", n.r.opts.DrainTimeout, err, last)
		}
		return "", fmt.Errorf("evict within %s: %w", n.r.opts.DrainTimeout, err)
	}
	return fmt.Sprintf("evicted %d pod(s)", len(sel.evict)), nil
}

// waitUnmounted waits until no mount that old serves is left on the node:
// none that the matcher selects in the mount table, and none that old's
// live-mount report shows served by a daemon of the pod (not scoped). Both
// are read through old, or through the node's mount pod when it had none;
// a pod that cannot be read through is no answer, and the wait goes on.
func (n *nodeRun) waitUnmounted(ctx context.Context, old *corev1.Pod) (string, error) {
	var (
		left     []string
		lastErr  error
		shown    string
		noStatus bool
		skipped  string
	)
	err := wait.PollUntilContextTimeout(ctx, n.r.opts.PollInterval, n.r.opts.UnmountTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := n.readable(ctx, old)
		switch {
		case errors.Is(err, errGone):
			return false, err
		case errors.Is(err, errNotRunning) && n.emptiedBefore():
			skipped = p.Name
			return true, nil
		case err != nil:
			lastErr = err
			return false, nil
		}
		mounts, err := n.r.Mounts.Mounts(ctx, p, n.t.container)
		if err != nil {
			lastErr = err
			return false, nil
		}
		rep, err := n.r.Status.Status(ctx, p, n.t.container)
		switch {
		case errors.Is(err, ErrNoStatus):
			if !noStatus {
				noStatus = true
				n.report(StepUnmount, StatusInfo, time.Time{}, fmt.Sprintf("%s: %v: only the mounts of the plugin's volumes are waited for", p.Name, err))
			}
			rep = nil
		case err != nil:
			lastErr = err
			return false, nil
		}
		lastErr = nil
		left = n.served(mounts, rep)
		if len(left) > 0 {
			if s := summarize(left); s != shown {
				shown = s
				n.report(StepUnmount, StatusInfo, time.Time{}, fmt.Sprintf("waiting for %d mount(s): %s", len(left), s))
			}
		}
		return len(left) == 0, nil
	})
	switch {
	case err == nil && skipped != "":
		return fmt.Sprintf("container %s of %s is not running; an earlier run of this rollout emptied the node of the plugin's mounts (it reached %s) and the node has stayed fenced since",
			n.t.container, skipped, n.prior.Step), nil
	case err == nil:
		return "no mount of the plugin left on the node", nil
	case wait.Interrupted(err) && len(left) > 0 && lastErr == nil:
		return "", fmt.Errorf("%d mount(s) still on the node after %s: %s", len(left), n.r.opts.UnmountTimeout, summarize(left))
	case wait.Interrupted(err) && lastErr != nil:
		return "", fmt.Errorf("cannot read the mounts on the node within %s: %w", n.r.opts.UnmountTimeout, lastErr)
	}
	return "", err
}

// served lists the mounts the old mount pod serves: those of mounts the
// matcher selects, and those rep (nil if the pod cannot report) shows
// served by a daemon of the pod.
func (n *nodeRun) served(mounts []Mount, rep *livestatus.Report) []string {
	var left []string
	seen := map[string]bool{}
	for _, m := range mounts {
		if n.t.matcher.Match(m) {
			left = append(left, m.String())
			seen[m.Target] = true
		}
	}
	if rep != nil {
		for _, m := range rep.Mounts {
			if servedByPod(m) && !seen[m.Target] {
				left = append(left, fmt.Sprintf("%s on %s type %s (%s)", m.Source, m.Target, m.FSType, unscopedWhy(m)))
			}
		}
	}
	return left
}

var (
	errNotRunning = errors.New("container not running")
	errNoPod      = errors.New("no mount pod on the node")
	errGone       = errors.New("disappeared")
)

// readable returns the pod to read the node's mounts through: old itself
// (same name and UID) or, when old is nil, the node's mount pod now. Its
// error wraps errGone when old was deleted (final), errNoPod or
// errNotRunning (with the pod) when there is nothing to read through yet.
func (n *nodeRun) readable(ctx context.Context, old *corev1.Pod) (*corev1.Pod, error) {
	var p *corev1.Pod
	if old != nil {
		got, err := n.r.Client.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && got.UID != old.UID) {
			return nil, fmt.Errorf("old mount pod %s %w while its mounts were observed", old.Name, errGone)
		}
		if err != nil {
			return nil, fmt.Errorf("get mount pod %s: %w", old.Name, err)
		}
		p = got
	} else {
		cur, err := n.mountPod(ctx)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("%w: nothing to read its mounts through", errNoPod)
		}
		p = cur
	}
	if !containerRunning(p, n.t.container) {
		return p, fmt.Errorf("container %s of %s: %w", n.t.container, p.Name, errNotRunning)
	}
	return p, nil
}

// emptiedBefore reports whether an earlier run of this rollout emptied the
// node of the plugin's mounts (its record has the node past wait-unmount
// with the drain strategy) and the node has stayed fenced since, so that
// nothing could have mounted the plugin's volumes there.
func (n *nodeRun) emptiedBefore() bool {
	past := n.prior.Step == StepDelete || n.prior.Step == StepReady || n.prior.Step == StepUntaint
	return n.fenced && past && n.priorStrategy() == StrategyDrain
}

// summarize lists up to five mounts.
func summarize(ms []string) string {
	if len(ms) > 5 {
		return strings.Join(ms[:5], "; ") + fmt.Sprintf("; and %d more", len(ms)-5)
	}
	return strings.Join(ms, "; ")
}

// deleteOld deletes the old mount pod and waits until it is gone.
func (n *nodeRun) deleteOld(ctx context.Context, old *corev1.Pod) (string, error) {
	if old == nil {
		return "no old mount pod on the node", nil
	}
	pods := n.r.Client.CoreV1().Pods(old.Namespace)
	uid := old.UID
	if err := n.r.mayAct(); err != nil {
		return "", err
	}
	err := pods.Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", fmt.Errorf("delete %s: %w", old.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, n.r.opts.PollInterval, n.r.opts.DeleteTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			return true, nil
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return "", fmt.Errorf("old mount pod %s still terminating after %s (--delete-timeout)", old.Name, n.r.opts.DeleteTimeout)
	}
	if err != nil {
		return "", err
	}
	return "deleted " + old.Name, nil
}

// waitReady waits for a Ready mount pod of the newest revision.
func (n *nodeRun) waitReady(ctx context.Context) (string, error) {
	var cur *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, n.r.opts.PollInterval, n.r.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := n.mountPod(ctx)
		if err != nil {
			return false, nil
		}
		cur = p
		return p != nil && p.DeletionTimestamp == nil && p.Labels[RevisionLabel] == n.t.revision && podReady(p), nil
	})
	switch {
	case err == nil:
		return fmt.Sprintf("%s of revision %s is Ready", cur.Name, n.t.revision), nil
	case !wait.Interrupted(err):
		return "", err
	case cur == nil:
		return "", fmt.Errorf("no mount pod on the node after %s: does the DaemonSet's node selector or affinity still match it?", n.r.opts.ReadyTimeout)
	case cur.Labels[RevisionLabel] != n.t.revision:
		return "", fmt.Errorf("the node's mount pod %s is of revision %s, not %s, after %s", cur.Name, cur.Labels[RevisionLabel], n.t.revision, n.r.opts.ReadyTimeout)
	}
	return "", fmt.Errorf("mount pod %s not Ready after %s: %s", cur.Name, n.r.opts.ReadyTimeout, describePod(cur))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func containerRunning(p *corev1.Pod, container string) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == container {
			return c.State.Running != nil
		}
	}
	return false
}

// describePod says why a pod is not Ready, as far as its status tells.
func describePod(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, c := range p.Status.ContainerStatuses {
		s := fmt.Sprintf("container %s", c.Name)
		switch {
		case c.State.Waiting != nil:
			s += " waiting: " + c.State.Waiting.Reason
			if c.State.Waiting.Message != "" {
				s += " (" + c.State.Waiting.Message + ")"
			}
		case c.State.Running != nil:
			s += " running but not ready"
		case c.State.Terminated != nil:
			s += fmt.Sprintf(" terminated: %s, exit code %d", c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		}
		if t := c.LastTerminationState.Terminated; t != nil {
			s += fmt.Sprintf("; last exit code %d (%s)", t.ExitCode, t.Reason)
			if msg := strings.TrimSpace(t.Message); msg != "" {
				s += ": " + msg
			}
		}
		if c.RestartCount > 0 {
			s += fmt.Sprintf("; %d restart(s)", c.RestartCount)
		}
		parts = append(parts, s)
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// lastLine is an io.Writer that keeps the last complete non-empty line.
type lastLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	last string
	each func(line string) // when set, called with every complete line
}

// Write keeps the last complete line of what was written.
func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // incomplete: keep for the next write
			return len(p), nil
		}
		if s := strings.TrimSpace(line); s != "" {
			l.last = s
			if l.each != nil {
				l.each(s)
			}
		}
	}
}

func (l *lastLine) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

type discardWriter struct{}

// Write drops p.
func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
