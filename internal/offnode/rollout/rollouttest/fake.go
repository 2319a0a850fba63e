// Package rollouttest fakes what a rollout needs from a cluster and that
// client-go's fake clientset lacks: the Eviction API with
// PodDisruptionBudgets, discovery of the eviction subresource, a DaemonSet
// controller that replaces a deleted mount pod, and the mount table and
// live-mount report a mount pod shows, fed by the pods that use a volume
// driver, whose FUSE daemons die with the mount pod unless scoped.
package rollouttest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/boundary/livestatus"
	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
)

var (
	podsGVR = corev1.SchemeGroupVersion.WithResource("pods")
	pdbGVR  = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	pdbGVK  = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")
	crGVR   = appsv1.SchemeGroupVersion.WithResource("controllerrevisions")
	crGVK   = appsv1.SchemeGroupVersion.WithKind("ControllerRevision")
	podsGVK = corev1.SchemeGroupVersion.WithKind("Pod")
)

// Cluster is a fake clientset with the reactors a rollout relies on.
type Cluster struct {
	Client *fake.Clientset

	mu sync.Mutex
	// notReady: replacement mount pods on these nodes never become Ready.
	notReady map[string]bool
	// evictions counts successful evictions per pod (namespace/name).
	evictions map[string]int
	// replaced counts replacement mount pods created.
	replaced int
	seq      int
	// slowGets: a DaemonSet's pod deleted on these nodes stays, terminating,
	// until it has been read this many times (a runtime slow to stop its
	// containers); terminating counts the reads left per namespace/name.
	slowGets    map[string]int
	terminating map[string]int
}

// NewCluster returns a Cluster holding objs.
func NewCluster(objs ...runtime.Object) *Cluster {
	c := &Cluster{
		Client:      fake.NewClientset(objs...),
		notReady:    map[string]bool{},
		evictions:   map[string]int{},
		slowGets:    map[string]int{},
		terminating: map[string]int{},
	}
	c.Client.Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "pods", Kind: "Pod", Namespaced: true},
			{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1", Namespaced: true},
		},
	}}
	c.Client.PrependReactor("create", "pods", c.evict)
	c.Client.PrependReactor("delete", "pods", c.deletePod)
	c.Client.PrependReactor("get", "pods", c.getPod)
	return c
}

// NewClient returns another clientset on the objects of c, with the same
// reactors (the Eviction API, the DaemonSet controller) and discovery, that
// records its own actions: give it to the code under test, so that its
// Actions are that code's API calls alone, and add reactors to it to fake
// what one client sees (an API server that stops answering).
func (c *Cluster) NewClient() *fake.Clientset {
	cs := fake.NewClientset()
	tr := c.Client.Tracker()
	cs.ReactionChain = nil
	cs.WatchReactionChain = nil
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(tr))
	cs.AddWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := tr.Watch(action.GetResource(), action.GetNamespace())
		return true, w, err
	})
	cs.Resources = c.Client.Resources
	cs.PrependReactor("create", "pods", c.evict)
	cs.PrependReactor("delete", "pods", c.deletePod)
	cs.PrependReactor("get", "pods", c.getPod)
	return cs
}

// SetReplacementReady decides whether the mount pods the fake DaemonSet
// controller creates on node become Ready.
func (c *Cluster) SetReplacementReady(node string, ready bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notReady[node] = !ready
}

// SetSlowDeletion makes a DaemonSet's pod deleted on node stay,
// terminating, until it has been read gets times (0: gone at once).
func (c *Cluster) SetSlowDeletion(node string, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slowGets[node] = gets
}

// Evictions returns how often the pod namespace/name was evicted.
func (c *Cluster) Evictions(pod string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evictions[pod]
}

// Replaced returns how many replacement mount pods were created.
func (c *Cluster) Replaced() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replaced
}

// evict implements the Eviction API: 429 when a PodDisruptionBudget
// selecting the pod allows no disruption, otherwise the pod is deleted and
// the budget's allowance decremented.
func (c *Cluster) evict(action k8stesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev, ok := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	if !ok {
		return true, nil, fmt.Errorf("eviction of type %T", action.(k8stesting.CreateAction).GetObject())
	}
	tr := c.Client.Tracker()
	obj, err := tr.Get(podsGVR, ev.Namespace, ev.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	list, err := tr.List(pdbGVR, pdbGVK, ev.Namespace)
	if err != nil {
		return true, nil, err
	}
	for _, pdb := range list.(*policyv1.PodDisruptionBudgetList).Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed < 1 {
			return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    429,
				Reason:  metav1.StatusReasonTooManyRequests,
				Message: "Cannot evict pod as it would violate the pod's disruption budget.",
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
					Type:    "DisruptionBudget",
					Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy),
				}}},
			}}
		}
		pdb.Status.DisruptionsAllowed--
		if err := tr.Update(pdbGVR, &pdb, pdb.Namespace); err != nil {
			return true, nil, err
		}
	}
	if err := tr.Delete(podsGVR, ev.Namespace, ev.Name); err != nil {
		return true, nil, err
	}
	c.mu.Lock()
	c.evictions[ev.Namespace+"/"+ev.Name]++
	c.mu.Unlock()
	return true, nil, nil
}

// deletePod deletes a pod and, for a DaemonSet's pod, creates its
// replacement from the DaemonSet's newest ControllerRevision, as the
// DaemonSet controller does for OnDelete; a DaemonSet's pod on a node set
// with SetSlowDeletion only gets a deletion timestamp, and goes on its
// last read.
func (c *Cluster) deletePod(action k8stesting.Action) (bool, runtime.Object, error) {
	da := action.(k8stesting.DeleteAction)
	tr := c.Client.Tracker()
	obj, err := tr.Get(podsGVR, da.GetNamespace(), da.GetName())
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod)
	if pre := da.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil && *pre.UID != pod.UID {
		return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), pod.Name, fmt.Errorf("precondition UID %s, have %s", *pre.UID, pod.UID))
	}
	ref := metav1.GetControllerOf(pod)
	c.mu.Lock()
	gets := c.slowGets[pod.Spec.NodeName]
	_, already := c.terminating[pod.Namespace+"/"+pod.Name]
	c.mu.Unlock()
	switch {
	case already:
		return true, nil, nil
	case gets > 0 && ref != nil && ref.Kind == "DaemonSet":
		now := metav1.Now()
		pod.DeletionTimestamp = &now
		c.mu.Lock()
		c.terminating[pod.Namespace+"/"+pod.Name] = gets
		c.mu.Unlock()
		return true, nil, tr.Update(podsGVR, pod, pod.Namespace)
	}
	return true, nil, c.remove(pod)
}

// getPod counts the reads of a terminating pod and removes it, as
// deletePod would have, at the last.
func (c *Cluster) getPod(action k8stesting.Action) (bool, runtime.Object, error) {
	key := action.GetNamespace() + "/" + action.(k8stesting.GetAction).GetName()
	c.mu.Lock()
	left, ok := c.terminating[key]
	if ok {
		left--
		c.terminating[key] = left
		if left <= 0 {
			delete(c.terminating, key)
		}
	}
	c.mu.Unlock()
	if !ok || left > 0 {
		return false, nil, nil
	}
	obj, err := c.Client.Tracker().Get(podsGVR, action.GetNamespace(), action.(k8stesting.GetAction).GetName())
	if err != nil {
		return true, nil, err
	}
	if err := c.remove(obj.(*corev1.Pod)); err != nil {
		return true, nil, err
	}
	return true, nil, apierrors.NewNotFound(podsGVR.GroupResource(), obj.(*corev1.Pod).Name)
}

// remove deletes pod and, for a DaemonSet's pod, creates its replacement
// from the DaemonSet's newest ControllerRevision.
func (c *Cluster) remove(pod *corev1.Pod) error {
	tr := c.Client.Tracker()
	if err := tr.Delete(podsGVR, pod.Namespace, pod.Name); err != nil {
		return err
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return nil
	}
	list, err := tr.List(crGVR, crGVK, pod.Namespace)
	if err != nil {
		return err
	}
	var newest *appsv1.ControllerRevision
	for i, cr := range list.(*appsv1.ControllerRevisionList).Items {
		if o := metav1.GetControllerOf(&cr); o != nil && o.UID == ref.UID && (newest == nil || cr.Revision > newest.Revision) {
			newest = &list.(*appsv1.ControllerRevisionList).Items[i]
		}
	}
	if newest == nil {
		return nil
	}
	c.mu.Lock()
	c.seq++
	c.replaced++
	ready := !c.notReady[pod.Spec.NodeName]
	name := fmt.Sprintf("%s-r%d", ref.Name, c.seq)
	c.mu.Unlock()
	repl := MountPod(pod.Namespace, ref.Name, ref.UID, name, pod.Spec.NodeName, newest.Labels[rollout.RevisionLabel], ready)
	repl.Labels = map[string]string{}
	for k, v := range pod.Labels {
		repl.Labels[k] = v
	}
	repl.Labels[rollout.RevisionLabel] = newest.Labels[rollout.RevisionLabel]
	return tr.Create(podsGVR, repl, pod.Namespace)
}

// DaemonSet returns a mount-pod DaemonSet: OnDelete, tolerating the
// rollout's taint, selecting app=<name>, serving plugins.
func DaemonSet(ns, name, plugins string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Key: rollout.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "mount", Image: "mountpod:v1",
						Env: []corev1.EnvVar{{Name: "MOUNTPOD_PLUGINS", Value: plugins}},
					}},
				},
			},
		},
		Status: appsv1.DaemonSetStatus{ObservedGeneration: 1},
	}
}

// Revision returns ds's ControllerRevision number rev with hash.
func Revision(ds *appsv1.DaemonSet, hash string, rev int64) *appsv1.ControllerRevision {
	t := true
	l := map[string]string{rollout.RevisionLabel: hash}
	for k, v := range ds.Spec.Selector.MatchLabels {
		l[k] = v
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ds.Namespace, Name: ds.Name + "-" + hash, Labels: l,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: &t}},
		},
		Revision: rev,
	}
}

// MountPod returns a running pod of the DaemonSet dsName (UID dsUID) on node,
// of revision hash.
func MountPod(ns, dsName string, dsUID types.UID, name, node, hash string, ready bool) *corev1.Pod {
	t := true
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	cs := corev1.ContainerStatus{Name: "mount", Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if !ready {
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting failed container"}}
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "missing tools: no-such-tool"}
		cs.RestartCount = 3
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels:          map[string]string{"app": dsName, rollout.RevisionLabel: hash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: dsName, UID: dsUID, Controller: &t}},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "mount"}}},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			ContainerStatuses: []corev1.ContainerStatus{cs},
		},
	}
}

// Node returns a node.
func Node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// Workload returns a running pod of a ReplicaSet on node with a flexVolume
// volume of driver ("" for none) and labels.
func Workload(ns, name, node, driver string, lbls map[string]string) *corev1.Pod {
	t := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: lbls,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-rs", UID: "uid-rs", Controller: &t}},
		},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if driver != "" {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: driver}}}}
	}
	return p
}

// PDB returns a PodDisruptionBudget selecting lbls that allows allowed
// disruptions.
func PDB(ns, name string, lbls map[string]string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: lbls}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, DesiredHealthy: 1, CurrentHealthy: 1},
	}
}

// Mounts is a [rollout.MountLister] and [rollout.StatusReader] over a
// Cluster. A node's mount table shows one fuse.glusterfs mount per
// flexVolume volume of each pod on it, which survives the pod for Lag
// observations of the table (the kubelet unmounts late), the FUSE mounts
// added with AddFUSE, and the Stuck mounts (in the table only). Each FUSE
// mount has a daemon, started by the node's mount pod of the time: unless
// the mount is scoped, the daemon dies with that pod, and the mount, still
// in the table, answers no more. The live-mount report (Status) shows the
// FUSE mounts as `mountpod status -o json` does. Make it with [NewMounts].
type Mounts struct {
	cluster *Cluster
	lag     int

	mu sync.Mutex
	// Stuck mounts never go.
	stuck []rollout.Mount
	err   error
	// statusErr fails Status only; noStatus makes it answer as a mount pod
	// that predates `mountpod status`.
	statusErr error
	noStatus  bool
	// scoped: the nodes whose new workload mounts are scoped.
	scoped map[string]bool
	// mounts by target.
	mounts      map[string]*fakeMount
	calls       int
	statusAsked []string
	pid         int
}

type fakeMount struct {
	node, fstype string
	// workload: the mount of a pod's volume, which goes lag observations
	// after the pod (after counts them); otherwise it never goes.
	workload bool
	after    int
	// pid is the daemon's, started by the mount pod owner.
	pid   int
	owner types.UID
	// scoped: the daemon runs in the mount's scope and survives owner,
	// unless fragile (the scope does not keep it alive).
	scoped, fragile bool
	// busy: how many more reports of a mount pod other than owner find
	// the mount's check without an answer (a loaded node).
	busy int
}

var (
	_ rollout.MountLister  = (*Mounts)(nil)
	_ rollout.StatusReader = (*Mounts)(nil)
)

// NewMounts returns the mount tables of c's nodes, starting with a mount
// for every flexVolume volume of the pods c holds now.
func NewMounts(c *Cluster, lag int) *Mounts {
	m := &Mounts{cluster: c, lag: lag, mounts: map[string]*fakeMount{}, scoped: map[string]bool{}, pid: 1000}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.live()
	return m
}

// SetStuck sets mounts that never go.
func (m *Mounts) SetStuck(ms ...rollout.Mount) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stuck = ms
}

// SetErr makes every observation fail with err (nil: succeed).
func (m *Mounts) SetErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// SetStatusErr makes every live-mount report fail with err (nil: succeed).
func (m *Mounts) SetStatusErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.statusErr = err
}

// SetNoStatus makes the mount pods answer as images that predate
// `mountpod status` do.
func (m *Mounts) SetNoStatus(no bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noStatus = no
}

// SetScoped decides whether the daemons of node's workload mounts, present
// and future, run in their scopes.
func (m *Mounts) SetScoped(node string, scoped bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scoped[node] = scoped
	for _, fm := range m.mounts {
		if fm.node == node && fm.workload {
			fm.scoped = scoped
		}
	}
}

// AddFUSE adds a FUSE mount of fstype at target on node, served by a
// daemon of node's mount pod, in the mount's scope if scoped. It never goes.
func (m *Mounts) AddFUSE(node, target, fstype string, scoped bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	owners, _ := m.mountPods()
	m.pid++
	m.mounts[target] = &fakeMount{node: node, fstype: fstype, pid: m.pid, owner: owners[node], scoped: scoped}
}

// SetFragile makes the scoped mount at target die with its mount pod all
// the same, as when the scope does not keep the daemon alive (the pod not
// in the host's PID namespace).
func (m *Mounts) SetFragile(target string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fm := m.mounts[target]; fm != nil {
		fm.fragile = true
	}
}

// SetBusy makes the next n live-mount reports of a mount pod other than
// the one that mounted target find target's check without an answer, as
// on a loaded node; the reports after them find it healthy.
func (m *Mounts) SetBusy(target string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fm := m.mounts[target]; fm != nil {
		fm.busy = n
	}
}

// Calls returns how many times a mount table was read.
func (m *Mounts) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// StatusAsked returns the pods asked for their live-mount report, in order.
func (m *Mounts) StatusAsked() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.statusAsked)
}

// mountPods returns the UID of each node's mount pod (a pod with a
// revision label) and the UIDs of every pod.
func (m *Mounts) mountPods() (byNode map[string]types.UID, all map[types.UID]bool) {
	byNode, all = map[string]types.UID{}, map[types.UID]bool{}
	list, err := m.cluster.Client.Tracker().List(podsGVR, podsGVK, "")
	if err != nil {
		return byNode, all
	}
	for _, p := range list.(*corev1.PodList).Items {
		all[p.UID] = true
		if _, ok := p.Labels[rollout.RevisionLabel]; ok {
			byNode[p.Spec.NodeName] = p.UID
		}
	}
	return byNode, all
}

// live records the mounts of the pods present now and returns their
// targets.
func (m *Mounts) live() (map[string]bool, error) {
	list, err := m.cluster.Client.Tracker().List(podsGVR, podsGVK, "")
	if err != nil {
		return nil, err
	}
	owners, _ := m.mountPods()
	live := map[string]bool{}
	for _, p := range list.(*corev1.PodList).Items {
		for _, v := range p.Spec.Volumes {
			if v.FlexVolume == nil {
				continue
			}
			t := target(&p, v)
			live[t] = true
			if fm := m.mounts[t]; fm != nil {
				fm.after = 0
				continue
			}
			m.pid++
			m.mounts[t] = &fakeMount{node: p.Spec.NodeName, fstype: "fuse.glusterfs", workload: true,
				pid: m.pid, owner: owners[p.Spec.NodeName], scoped: m.scoped[p.Spec.NodeName]}
		}
	}
	return live, nil
}

// Mounts implements [rollout.MountLister].
func (m *Mounts) Mounts(ctx context.Context, pod *corev1.Pod, container string) ([]rollout.Mount, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.err != nil {
		return nil, m.err
	}
	out := append([]rollout.Mount{
		{Target: "/", FSType: "overlay", Source: "overlay"},
		{Target: "/var/lib/kubelet", FSType: "ext4", Source: "/dev/sda1"},
	}, m.stuck...)
	live, err := m.live()
	if err != nil {
		return nil, err
	}
	for t, fm := range m.mounts {
		if fm.node != pod.Spec.NodeName {
			continue
		}
		if fm.workload && !live[t] {
			if fm.after >= m.lag {
				delete(m.mounts, t)
				continue
			}
			fm.after++
		}
		out = append(out, rollout.Mount{Target: t, FSType: fm.fstype, Source: "server:/vol"})
	}
	return out, nil
}

// Status implements [rollout.StatusReader]: the FUSE mounts of pod's node,
// as its mount table shows them now (reading the report does not count as
// an observation of the table).
func (m *Mounts) Status(ctx context.Context, pod *corev1.Pod, container string) (*livestatus.Report, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.statusAsked = append(m.statusAsked, pod.Name)
	switch {
	case m.err != nil:
		return nil, m.err
	case m.statusErr != nil:
		return nil, m.statusErr
	case m.noStatus:
		return nil, fmt.Errorf("%w: exec in %s: command terminated with exit code 3 (stderr: mountpod: No help topic for 'status')", rollout.ErrNoStatus, pod.Name)
	}
	if _, err := m.live(); err != nil {
		return nil, err
	}
	_, pods := m.mountPods()
	r := &livestatus.Report{Mounts: []livestatus.Mount{}, Orphans: []livestatus.Scope{}}
	for t, fm := range m.mounts {
		if fm.node != pod.Spec.NodeName {
			continue
		}
		lm := livestatus.Mount{Target: t, Source: "server:/vol", FSType: fm.fstype}
		dead := fm.owner != "" && !pods[fm.owner] && (!fm.scoped || fm.fragile)
		if fm.scoped {
			lm.Plugin, lm.Scope = "kubernetes.io/glusterfs", boundary.MountKey(t)
		}
		switch {
		case dead:
			lm.Error = "stat " + t + ": transport endpoint is not connected"
		case fm.busy > 0 && pod.UID != fm.owner:
			fm.busy--
			lm.Daemons = []int{fm.pid}
			lm.Scoped = fm.scoped
			lm.Error = "stat " + t + ": no answer within 2s"
		default:
			lm.Daemons = []int{fm.pid}
			lm.Scoped = fm.scoped
			lm.Healthy = true
		}
		r.Mounts = append(r.Mounts, lm)
	}
	sort.Slice(r.Mounts, func(i, j int) bool { return r.Mounts[i].Target < r.Mounts[j].Target })
	return r, nil
}

func target(p *corev1.Pod, v corev1.Volume) string {
	return "/var/lib/kubelet/pods/" + string(p.UID) + "/volumes/" + boundary.EscapePluginName(v.FlexVolume.Driver) + "/" + v.Name
}

// Clock is a clock for records and progress that advances a millisecond
// per reading, so that elapsed times are positive and deterministic enough.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time and advances it.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	c.now = c.now.Add(time.Millisecond)
	return c.now
}
