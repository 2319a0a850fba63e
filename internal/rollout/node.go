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
)

// nodeRun is one node's upgrade in progress.
type nodeRun struct {
	r     *Rollout
	t     *target
	node  string
	start time.Time
}

func (n *nodeRun) report(step Step, status Status, since time.Time, msg string) {
	now := n.r.now()
	e := Event{Node: n.node, Step: step, Status: status, Message: msg, NodeSeconds: now.Sub(n.start).Seconds()}
	if !since.IsZero() {
		e.StepSeconds = now.Sub(since).Seconds()
	}
	n.r.report(e)
}

// upgradeNode takes node through every step; see the package
// documentation. It returns nil when the node is done.
func (r *Rollout) upgradeNode(ctx context.Context, t *target, node string) *Error {
	n := &nodeRun{r: r, t: t, node: node, start: r.now()}
	if _, err := r.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		n.report(StepDone, StatusInfo, time.Time{}, "the node no longer exists")
		if err := r.setNode(ctx, node, StepDone, ""); err != nil {
			return n.fail(ctx, StepPending, err)
		}
		return nil
	}
	old, err := n.mountPod(ctx)
	if err != nil {
		return n.fail(ctx, StepPending, err)
	}
	upToDate := old != nil && old.DeletionTimestamp == nil && old.Labels[RevisionLabel] == t.revision
	steps := []struct {
		step Step
		run  func(ctx context.Context) (string, error)
	}{
		{StepTaint, n.taint},
		{StepDrain, n.drain},
		{StepUnmount, func(ctx context.Context) (string, error) { return n.waitUnmounted(ctx, old) }},
		{StepDelete, func(ctx context.Context) (string, error) { return n.deleteOld(ctx, old) }},
		{StepReady, n.waitReady},
		{StepUntaint, n.untaint},
	}
	for _, s := range steps {
		if upToDate && (s.step == StepDrain || s.step == StepUnmount || s.step == StepDelete) {
			continue // resumed after the replacement was made
		}
		if err := r.setNode(ctx, node, s.step, ""); err != nil {
			return n.fail(ctx, s.step, err)
		}
		since := r.now()
		n.report(s.step, StatusStarted, time.Time{}, "")
		msg, err := s.run(ctx)
		if err != nil {
			n.report(s.step, StatusFailed, since, err.Error())
			return n.fail(ctx, s.step, stepError(ctx, err))
		}
		n.report(s.step, StatusDone, since, msg)
	}
	if err := r.setNode(ctx, node, StepDone, ""); err != nil {
		return n.fail(ctx, StepDone, err)
	}
	r.event(ctx, t.ds, corev1.EventTypeNormal, "NodeUpgraded", fmt.Sprintf("node %s: mount pod replaced, revision %s Ready, taint removed", node, t.revision))
	return nil
}

// fail records the failure of step and builds the error for the operator.
func (n *nodeRun) fail(ctx context.Context, step Step, err error) *Error {
	r := n.r
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if werr := r.setNode(wctx, n.node, step, err.Error()); werr != nil {
		r.log.Warn("record the failure", "node", n.node, "err", werr)
	}
	var hint strings.Builder
	switch step {
	case StepDrain:
		hint.WriteString("A pod could not be evicted: if a PodDisruptionBudget forbids it, wait until it allows a disruption (or scale the workload up). ")
	case StepUnmount:
		hint.WriteString("Mounts of the plugin are still on the node: find the pods using them (kubectl get pods --field-selector spec.nodeName=" + n.node + " -A) and the kubelet's log. ")
	case StepReady:
		hint.WriteString(fmt.Sprintf("The new mount pod is not Ready (kubectl -n %s describe pod -l %s): fix the DaemonSet (image, environment); --resume deletes a pod of an older revision and waits for its replacement. ",
			r.opts.Namespace, metav1.FormatLabelSelector(n.t.ds.Spec.Selector)))
	}
	fmt.Fprintf(&hint, "Node %s stays tainted %s, so nothing but the mount pod is scheduled there. When fixed, continue with: %s",
		n.node, taintString(r.taint()), r.resumeCommand())
	fmt.Fprintf(&hint, "\nTo reopen the node by hand once its mount pod is Ready: kubectl taint node %s %s:NoSchedule-", n.node, TaintKey)
	return &Error{Kind: Failed, Node: n.node, Step: step, Err: err, Hint: hint.String()}
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
	return "taint removed", n.updateNode(ctx, func(node *corev1.Node) (bool, error) {
		var kept []corev1.Taint
		for _, t := range node.Spec.Taints {
			if !(t.Key == want.Key && t.Effect == want.Effect && t.Value == want.Value) {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			return false, nil
		}
		node.Spec.Taints = kept
		return true, nil
	})
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
	n.report(StepDrain, StatusInfo, time.Time{}, "evicting "+strings.Join(names, ", "))
	refusals := &lastLine{}
	h := &drain.Helper{
		Ctx:                  ctx,
		Client:               n.r.Client,
		GracePeriodSeconds:   *n.r.opts.GracePeriod,
		IgnoreAllDaemonSets:  true,
		DeleteEmptyDirData:   true,
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

// waitUnmounted waits until the mounts old serves are gone from the node.
func (n *nodeRun) waitUnmounted(ctx context.Context, old *corev1.Pod) (string, error) {
	if old == nil {
		return "no old mount pod on the node: nothing to observe", nil
	}
	pods := n.r.Client.CoreV1().Pods(old.Namespace)
	var (
		left    []Mount
		lastErr error
		shown   string
	)
	err := wait.PollUntilContextTimeout(ctx, n.r.opts.PollInterval, n.r.opts.UnmountTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != old.UID) {
			return false, fmt.Errorf("old mount pod %s disappeared while its mounts were observed", old.Name)
		}
		if err != nil {
			lastErr = err
			return false, nil
		}
		if !containerRunning(p, n.t.container) {
			lastErr = errNotRunning
			return true, nil
		}
		mounts, err := n.r.Mounts.Mounts(ctx, p, n.t.container)
		if err != nil {
			lastErr = err
			return false, nil
		}
		lastErr = nil
		left = left[:0]
		for _, m := range mounts {
			if n.t.matcher.Match(m) {
				left = append(left, m)
			}
		}
		if len(left) > 0 {
			if s := summarize(left); s != shown {
				shown = s
				n.report(StepUnmount, StatusInfo, time.Time{}, fmt.Sprintf("waiting for %d mount(s): %s", len(left), s))
			}
		}
		return len(left) == 0, nil
	})
	switch {
	case err == nil && errors.Is(lastErr, errNotRunning):
		return fmt.Sprintf("container %s of %s is not running: it serves no mount, nothing to observe", n.t.container, old.Name), nil
	case err == nil:
		return "no mount of the plugin left on the node", nil
	case wait.Interrupted(err) && len(left) > 0 && lastErr == nil:
		return "", fmt.Errorf("%d mount(s) still on the node after %s: %s", len(left), n.r.opts.UnmountTimeout, summarize(left))
	case wait.Interrupted(err) && lastErr != nil:
		return "", fmt.Errorf("cannot read the mounts through %s within %s: %w", old.Name, n.r.opts.UnmountTimeout, lastErr)
	}
	return "", err
}

var errNotRunning = errors.New("container not running")

// summarize lists up to five mounts.
func summarize(ms []Mount) string {
	var parts []string
	for i, m := range ms {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ms)-5))
			break
		}
		parts = append(parts, m.String())
	}
	return strings.Join(parts, "; ")
}

// deleteOld deletes the old mount pod and waits until it is gone.
func (n *nodeRun) deleteOld(ctx context.Context, old *corev1.Pod) (string, error) {
	if old == nil {
		return "no old mount pod on the node", nil
	}
	pods := n.r.Client.CoreV1().Pods(old.Namespace)
	uid := old.UID
	err := pods.Delete(ctx, old.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", fmt.Errorf("delete %s: %w", old.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, n.r.opts.PollInterval, n.r.opts.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != uid) {
			return true, nil
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return "", fmt.Errorf("old mount pod %s still terminating after %s", old.Name, n.r.opts.ReadyTimeout)
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
