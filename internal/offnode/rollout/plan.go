package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Plan is what a rollout will do: the nodes to upgrade, in order.
type Plan struct {
	DaemonSet string `json:"daemonSet"`
	// Revision is the controller-revision-hash of the DaemonSet's newest
	// ControllerRevision, RevisionName that revision's name.
	Revision     string `json:"revision"`
	RevisionName string `json:"revisionName"`
	// Taint is the taint that fences a node, as kubectl writes it.
	Taint          string `json:"taint"`
	MaxUnavailable int    `json:"maxUnavailable"`
	// Strategy is how mount pods are replaced, and Unscoped, for the
	// in-place strategy, what happens on a node with an unscoped live mount.
	Strategy Strategy       `json:"strategy"`
	Unscoped UnscopedPolicy `json:"unscoped,omitempty"`
	// Drain describes which pods are evicted.
	Drain string `json:"drain"`
	// Drivers are the flexVolume and CSI drivers whose volumes are drained
	// and waited for: those named and the one the DaemonSet installs.
	Drivers []string `json:"drivers,omitempty"`
	// Warnings say what the DaemonSet leaves unknown.
	Warnings []string `json:"warnings,omitempty"`
	// Resume is set when the plan continues an earlier rollout.
	Resume bool `json:"resume,omitempty"`
	// NodeSelector limits the plan to the nodes it selects.
	NodeSelector string `json:"nodeSelector,omitempty"`
	// Nodes are the nodes to upgrade, in order; UpToDate those whose mount
	// pod already runs the newest revision.
	Nodes    []NodePlan `json:"nodes"`
	UpToDate []string   `json:"upToDate"`
}

// NodePlan is one node of a [Plan].
type NodePlan struct {
	Node string `json:"node"`
	// Pod is the node's current mount pod ("" if it has none) and
	// PodRevision its controller-revision-hash.
	Pod         string `json:"pod,omitempty"`
	PodRevision string `json:"podRevision,omitempty"`
	// Why the node is in the plan: outdated, unfinished (by an earlier
	// rollout) or tainted (by an earlier rollout).
	Why string `json:"why"`
	// Strategy is what the node would get now (dry run only): drain,
	// in-place, refused (in-place with --unscoped refuse, and an unscoped
	// live mount), or unknown (its mount pod could not tell); StrategyReason
	// says why.
	Strategy       string `json:"strategy,omitempty"`
	StrategyReason string `json:"strategyReason,omitempty"`
	// Evict lists the pods the drain would evict now (dry run only, for a
	// node that would be drained or might be).
	Evict []string `json:"evict,omitempty"`
	// Warnings are pods the drain leaves alone although they use the
	// plugin's volumes (dry run only).
	Warnings []string `json:"warnings,omitempty"`
}

// String renders the plan for a person.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "daemonset %s: newest revision %s (%s); fence with taint %s\n", p.DaemonSet, p.Revision, p.RevisionName, p.Taint)
	switch {
	case p.Strategy == StrategyInPlace:
		fmt.Fprintf(&b, "strategy: in-place where every live mount is scoped; elsewhere %s\n", map[UnscopedPolicy]string{
			UnscopedDrain: "drain", UnscopedRefuse: "refuse (the node fails untouched)"}[p.Unscoped])
	case p.Strategy != "":
		fmt.Fprintf(&b, "strategy: %s\n", p.Strategy)
	}
	fmt.Fprintf(&b, "drain: %s\n", p.Drain)
	if p.NodeSelector != "" {
		fmt.Fprintf(&b, "nodes: those selected by %s\n", p.NodeSelector)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	if p.Resume {
		b.WriteString("resuming the last rollout\n")
	}
	fmt.Fprintf(&b, "%d node(s) to upgrade, %d at a time:\n", len(p.Nodes), p.MaxUnavailable)
	for _, n := range p.Nodes {
		pod := "no mount pod"
		if n.Pod != "" {
			pod = fmt.Sprintf("pod %s (revision %s)", n.Pod, n.PodRevision)
		}
		fmt.Fprintf(&b, "  %-20s %-10s %s\n", n.Node, n.Why, pod)
		if n.Strategy != "" {
			fmt.Fprintf(&b, "      strategy %s", n.Strategy)
			if n.StrategyReason != "" {
				fmt.Fprintf(&b, ": %s", n.StrategyReason)
			}
			b.WriteString("\n")
		}
		for _, e := range n.Evict {
			fmt.Fprintf(&b, "      evict %s\n", e)
		}
		for _, w := range n.Warnings {
			fmt.Fprintf(&b, "      warning: %s\n", w)
		}
	}
	if len(p.UpToDate) > 0 {
		fmt.Fprintf(&b, "up to date: %s\n", strings.Join(p.UpToDate, ", "))
	}
	return b.String()
}

// target is what preflight learns about the DaemonSet.
type target struct {
	ds        *appsv1.DaemonSet
	revision  string
	container string
	// drivers are those named and the one the DaemonSet installs;
	// warnings say what its template leaves unknown.
	drivers  []string
	warnings []string
	selector *podSelector
	matcher  *MountMatcher
}

// preflight checks the DaemonSet and computes the plan. Its errors are
// refusals, apart from API failures.
func (r *Rollout) preflight(ctx context.Context) (*target, *Plan, error) {
	ds, err := r.getDaemonSet(ctx)
	if err != nil {
		return nil, nil, err
	}
	revName, revision, err := r.currentRevision(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	t, err := r.newTarget(ds, revision)
	if err != nil {
		return nil, nil, err
	}
	plan, err := r.plan(ctx, t, revName)
	if err != nil {
		return nil, nil, err
	}
	return t, plan, nil
}

// getDaemonSet gets the DaemonSet, refuses one the rollout cannot upgrade
// safely (not OnDelete, not tolerating the fencing taint, no container),
// and waits until its controller has observed its newest generation.
func (r *Rollout) getDaemonSet(ctx context.Context) (*appsv1.DaemonSet, error) {
	o := r.opts
	ds, err := r.Client.AppsV1().DaemonSets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, refuse("Name the mount pod's DaemonSet: mountpod-rollout -n NAMESPACE NAME.", "daemonset %s/%s not found", o.Namespace, o.Name)
	}
	if apierrors.IsForbidden(err) {
		return nil, refuse(fmt.Sprintf("deploy/rbac grants the rollout its DaemonSets and their Leases by name (resourceNames): add %s to both lists in an overlay of yours, and run the rollout in the DaemonSet's namespace.", o.Name),
			"get daemonset %s/%s: %v", o.Namespace, o.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("get daemonset %s/%s: %w", o.Namespace, o.Name, err)
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		return nil, refuse(
			fmt.Sprintf("With RollingUpdate the DaemonSet controller deletes mount pods under live mounts. Set it first: kubectl -n %s patch daemonset %s -p '{\"spec\":{\"updateStrategy\":{\"type\":\"OnDelete\",\"rollingUpdate\":null}}}'", o.Namespace, o.Name),
			"daemonset %s/%s has updateStrategy %q, not OnDelete", o.Namespace, o.Name, ds.Spec.UpdateStrategy.Type)
	}
	taint := r.taint()
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Tolerations, func(t corev1.Toleration) bool {
		return t.ToleratesTaint(logr.FromSlogHandler(r.log.Handler()), &taint, false)
	}) {
		return nil, refuse(
			fmt.Sprintf("Add the toleration {key: %s, operator: Exists, effect: NoSchedule} to its pod template (deploy/base does), then run the rollout.", TaintKey),
			"daemonset %s/%s does not tolerate the taint %s: its new pods could not start on a fenced node", o.Namespace, o.Name, taintString(taint))
	}
	if len(ds.Spec.Template.Spec.Containers) == 0 {
		return nil, refuse("", "daemonset %s/%s has no container", o.Namespace, o.Name)
	}
	return r.waitObserved(ctx, ds)
}

// waitObserved returns ds once the DaemonSet controller has observed its
// newest generation: until then the newest ControllerRevision is not the
// template's yet.
func (r *Rollout) waitObserved(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.DaemonSet, error) {
	if ds.Status.ObservedGeneration >= ds.Generation {
		return ds, nil
	}
	o := r.opts
	dsc := r.Client.AppsV1().DaemonSets(o.Namespace)
	err := wait.PollUntilContextTimeout(ctx, o.PollInterval/4+time.Millisecond, o.RevisionTimeout, true, func(ctx context.Context) (bool, error) {
		d, err := dsc.Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ds = d
		return d.Status.ObservedGeneration >= d.Generation, nil
	})
	if err != nil {
		return nil, refuse("Is kube-controller-manager running?",
			"daemonset %s/%s: the DaemonSet controller has not observed generation %d within %s (observed %d)",
			o.Namespace, o.Name, ds.Generation, o.RevisionTimeout, ds.Status.ObservedGeneration)
	}
	return ds, nil
}

// newTarget works out, for ds at revision, the mount pod's container, the
// pods to drain and the mounts to wait for.
func (r *Rollout) newTarget(ds *appsv1.DaemonSet, revision string) (*target, error) {
	o := r.opts
	t := &target{ds: ds, revision: revision, container: o.Container}
	if t.container == "" {
		t.container = ds.Spec.Template.Spec.Containers[0].Name
	}
	plugins := o.Plugins
	if len(plugins) == 0 {
		plugins = pluginsOf(ds, t.container)
	}
	installed, warnings := driversOf(ds, t.container)
	for _, w := range warnings {
		r.log.Warn(w)
	}
	t.warnings = warnings
	t.drivers = slices.Clone(o.Drivers)
	for _, d := range installed {
		if !slices.Contains(t.drivers, d) {
			t.drivers = append(t.drivers, d)
		}
	}
	t.selector = &podSelector{client: r.Client, plugins: plugins, drivers: t.drivers, all: o.AllPods, force: o.Force, deleteEmptyDir: o.DeleteEmptyDirData,
		fromCache: o.DryRun}
	if o.PodSelector != "" {
		if err := t.selector.setLabels(o.PodSelector); err != nil {
			return nil, refuse("", "pod selector %q: %v", o.PodSelector, err)
		}
	}
	var err error
	if t.matcher, err = NewMountMatcher(plugins, t.drivers, o.MountFSTypes, o.MountPatterns); err != nil {
		return nil, refuse("", "%v", err)
	}
	if !o.AllPods && t.selector.empty() {
		return nil, refuse("Name them with --driver (flexVolume or CSI driver), or drain by label (--pod-selector) or everything (--all-pods).",
			"daemonset %s/%s: no volume plugin or driver to drain for (its container %q sets no %s and installs no flexVolume driver)", o.Namespace, o.Name, t.container, EnvPlugins)
	}
	return t, nil
}

// plan lists the nodes to upgrade, in order: first those an earlier
// rollout left unfinished (with Resume), then those fenced with the taint,
// then those whose mount pod runs an older revision.
func (r *Rollout) plan(ctx context.Context, t *target, revName string) (*Plan, error) {
	o := r.opts
	plan := &Plan{
		DaemonSet:      o.Namespace + "/" + o.Name,
		Revision:       t.revision,
		RevisionName:   revName,
		Taint:          taintString(r.taint()),
		MaxUnavailable: o.MaxUnavailable,
		Strategy:       o.Strategy,
		Drain:          t.selector.String(),
		Drivers:        t.drivers,
		Warnings:       t.warnings,
		Nodes:          []NodePlan{},
		UpToDate:       []string{},
	}
	if o.Strategy == StrategyInPlace {
		plan.Unscoped = o.Unscoped
	}
	pods, err := r.mountPods(ctx, t.ds)
	if err != nil {
		return nil, err
	}
	selected, err := r.selectedNodes(ctx)
	if err != nil {
		return nil, err
	}
	if selected != nil {
		plan.NodeSelector = o.NodeSelector
	}
	inPlan := map[string]bool{}
	add := func(node, why string) {
		if inPlan[node] {
			return
		}
		if selected != nil && !selected[node] {
			if why != "outdated" {
				plan.Warnings = append(plan.Warnings, fmt.Sprintf("node %s is %s by an earlier rollout, but the node selector leaves it out: it stays as it is", node, why))
			}
			inPlan[node] = true
			return
		}
		inPlan[node] = true
		np := NodePlan{Node: node, Why: why}
		if p := pods[node]; p != nil {
			np.Pod, np.PodRevision = p.Name, p.Labels[RevisionLabel]
		}
		plan.Nodes = append(plan.Nodes, np)
	}

	// First what an earlier rollout left: those nodes are fenced already.
	rec, err := ReadRecord(t.ds)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Phase != PhaseDone && o.Resume {
		plan.Resume = true
		var left []string
		for _, n := range rec.Unfinished() {
			if selected != nil && !selected[n] {
				left = append(left, n)
			}
			add(n, "unfinished")
		}
		// Resumed, the rollout would end done with these nodes never
		// finished, and their record gone.
		if len(left) > 0 {
			return nil, refuse("Resume with a selector that selects them too, or without --selector.",
				"the last rollout left nodes %v unfinished, and the node selector %q leaves them out", left, o.NodeSelector)
		}
	}
	tainted, err := r.taintedNodes(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range tainted {
		add(n, "tainted")
	}
	for _, n := range slices.Sorted(maps.Keys(pods)) {
		if pods[n].Labels[RevisionLabel] != t.revision {
			add(n, "outdated")
		} else if !inPlan[n] && (selected == nil || selected[n]) {
			plan.UpToDate = append(plan.UpToDate, n)
		}
	}
	return plan, nil
}

// selectedNodes returns the nodes Options.NodeSelector selects, or nil
// when it is empty.
func (r *Rollout) selectedNodes(ctx context.Context) (map[string]bool, error) {
	if r.opts.NodeSelector == "" {
		return nil, nil
	}
	sel, err := labels.Parse(r.opts.NodeSelector)
	if err != nil {
		return nil, refuse("", "node selector %q: %v", r.opts.NodeSelector, err)
	}
	nodes, err := r.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list the nodes of selector %q: %w", r.opts.NodeSelector, err)
	}
	out := make(map[string]bool, len(nodes.Items))
	for _, n := range nodes.Items {
		out[n.Name] = true
	}
	return out, nil
}

// taintedNodes returns the nodes fenced with this DaemonSet's taint, by
// name.
func (r *Rollout) taintedNodes(ctx context.Context) ([]string, error) {
	nodes, err := r.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	value := r.opts.taintValue()
	var out []string
	for _, n := range nodes.Items {
		if hasOurTaint(&n, value) {
			out = append(out, n.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// currentRevision returns the name and hash of ds's newest ControllerRevision.
func (r *Rollout) currentRevision(ctx context.Context, ds *appsv1.DaemonSet) (name, hash string, err error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return "", "", refuse("", "daemonset %s/%s: selector: %v", ds.Namespace, ds.Name, err)
	}
	list, err := r.Client.AppsV1().ControllerRevisions(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", "", fmt.Errorf("list controllerrevisions: %w", err)
	}
	var newest *appsv1.ControllerRevision
	for i := range list.Items {
		cr := &list.Items[i]
		if ref := metav1.GetControllerOf(cr); ref == nil || ref.UID != ds.UID {
			continue
		}
		if newest == nil || cr.Revision > newest.Revision {
			newest = cr
		}
	}
	if newest == nil {
		return "", "", refuse("Is kube-controller-manager running?", "daemonset %s/%s has no ControllerRevision yet", ds.Namespace, ds.Name)
	}
	hash = newest.Labels[RevisionLabel]
	if hash == "" {
		hash = strings.TrimPrefix(newest.Name, ds.Name+"-")
	}
	return newest.Name, hash, nil
}

// mountPods returns ds's pods by node; where a node has several (an old one
// terminating), the one not being deleted.
func (r *Rollout) mountPods(ctx context.Context, ds *appsv1.DaemonSet) (map[string]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := r.Client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list mount pods: %w", err)
	}
	byNode := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != ds.UID || p.Spec.NodeName == "" {
			continue
		}
		if cur := byNode[p.Spec.NodeName]; cur == nil || (cur.DeletionTimestamp != nil && p.DeletionTimestamp == nil) {
			byNode[p.Spec.NodeName] = p
		}
	}
	return byNode, nil
}

// taint is the taint fencing a node for this DaemonSet.
func (r *Rollout) taint() corev1.Taint {
	return corev1.Taint{Key: TaintKey, Value: r.opts.taintValue(), Effect: corev1.TaintEffectNoSchedule}
}

func taintString(t corev1.Taint) string {
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

func hasOurTaint(n *corev1.Node, value string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == TaintKey && t.Effect == corev1.TaintEffectNoSchedule && t.Value == value
	})
}
