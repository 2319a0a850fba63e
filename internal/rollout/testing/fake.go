// Package rollouttesting fakes what a rollout needs from a cluster and that
// client-go's fake clientset lacks: the Eviction API with
// PodDisruptionBudgets, discovery of the eviction subresource, a DaemonSet
// controller that replaces a deleted mount pod, and the mount table a mount
// pod shows, fed by the pods that use a volume driver.
package rollouttesting

import (
	"context"
	"fmt"
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
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mountcontainers/mountcontainers/internal/rollout"
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
}

// NewCluster returns a Cluster holding objs.
func NewCluster(objs ...runtime.Object) *Cluster {
	c := &Cluster{
		Client:    fake.NewClientset(objs...),
		notReady:  map[string]bool{},
		evictions: map[string]int{},
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
	return c
}

// SetReplacementReady decides whether the mount pods the fake DaemonSet
// controller creates on node become Ready.
func (c *Cluster) SetReplacementReady(node string, ready bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notReady[node] = !ready
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
// DaemonSet controller does for OnDelete.
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
	if err := tr.Delete(podsGVR, pod.Namespace, pod.Name); err != nil {
		return true, nil, err
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return true, nil, nil
	}
	list, err := tr.List(crGVR, crGVK, pod.Namespace)
	if err != nil {
		return true, nil, err
	}
	var newest *appsv1.ControllerRevision
	for i, cr := range list.(*appsv1.ControllerRevisionList).Items {
		if o := metav1.GetControllerOf(&cr); o != nil && o.UID == ref.UID && (newest == nil || cr.Revision > newest.Revision) {
			newest = &list.(*appsv1.ControllerRevisionList).Items[i]
		}
	}
	if newest == nil {
		return true, nil, nil
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
	return true, nil, tr.Create(podsGVR, repl, pod.Namespace)
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

// Mounts is a [rollout.MountLister] over a Cluster: a node shows one
// fuse.glusterfs mount per flexVolume volume of each pod on it, which
// survives the pod for Lag observations (the kubelet unmounts late), plus
// Stuck mounts forever. Make it with [NewMounts].
type Mounts struct {
	cluster *Cluster
	lag     int

	mu sync.Mutex
	// Stuck mounts never go.
	stuck []rollout.Mount
	err   error
	// mounts: target -> node and observations since its pod went.
	mounts map[string]*fakeMount
	calls  int
}

type fakeMount struct {
	node  string
	after int
}

var _ rollout.MountLister = (*Mounts)(nil)

// NewMounts returns the mount tables of c's nodes, starting with a mount
// for every flexVolume volume of the pods c holds now.
func NewMounts(c *Cluster, lag int) *Mounts {
	m := &Mounts{cluster: c, lag: lag, mounts: map[string]*fakeMount{}}
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

// Calls returns how many observations were made.
func (m *Mounts) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// live records the mounts of the pods present now and returns their
// targets.
func (m *Mounts) live() (map[string]bool, error) {
	list, err := m.cluster.Client.Tracker().List(podsGVR, podsGVK, "")
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, p := range list.(*corev1.PodList).Items {
		for _, v := range p.Spec.Volumes {
			if v.FlexVolume != nil {
				t := target(&p, v)
				live[t] = true
				m.mounts[t] = &fakeMount{node: p.Spec.NodeName}
			}
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
		if !live[t] {
			if fm.after >= m.lag {
				delete(m.mounts, t)
				continue
			}
			fm.after++
		}
		out = append(out, rollout.Mount{Target: t, FSType: "fuse.glusterfs", Source: "server:/vol"})
	}
	return out, nil
}

func target(p *corev1.Pod, v corev1.Volume) string {
	driver := v.FlexVolume.Driver
	for i := range driver {
		if driver[i] == '/' {
			driver = driver[:i] + "~" + driver[i+1:]
		}
	}
	return "/var/lib/kubelet/pods/" + string(p.UID) + "/volumes/" + driver + "/" + v.Name
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
