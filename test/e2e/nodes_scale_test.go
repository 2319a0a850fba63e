//go:build e2e && e2e_nodes

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
)

// Scale of the plan measured against the bed's API server: Node objects
// with no kubelet behind them, and pods bound to them (a third of them
// using the plugin's volumes). Every run plans defaultScaleNodes nodes,
// which proves the plan; `make e2e-scale` (E2E_SCALE_NODES=500) measures
// the figures of BENCHMARKS.md.
const (
	defaultScaleNodes = 40
	scalePodsPerNode  = 30
)

// scaleNodesFromEnv returns E2E_SCALE_NODES, or defaultScaleNodes.
func scaleNodesFromEnv(t *testing.T) int {
	t.Helper()
	v := os.Getenv("E2E_SCALE_NODES")
	if v == "" {
		return defaultScaleNodes
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 5000 {
		t.Fatalf("E2E_SCALE_NODES=%q: want a number of nodes from 1 to 5000", v)
	}
	return n
}

// testPlanAtScale measures mountpod-rollout --dry-run (preflight and plan:
// every node's mount pod and the pods its drain would evict) against
// E2E_SCALE_NODES nodes (500 in BENCHMARKS.md) and 30 pods each: its time
// and its API requests by verb and resource. The DaemonSet controller gives
// every fake node its mount pod (Pending: no kubelet runs it); a new image
// makes them all outdated.
func (n *nodesEnv) testPlanAtScale(t *testing.T) {
	scaleNodes := scaleNodesFromEnv(t)
	ctx := context.Background()
	ns := n.bed.CreateNamespace(t, "scale")
	fill := *n.bed.Config
	fill.QPS, fill.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(&fill)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var names []string
	for i := range scaleNodes {
		names = append(names, fmt.Sprintf("scale-%04d", i))
	}
	t.Cleanup(func() {
		// Pods on nodes with no kubelet never finish a graceful deletion;
		// once their nodes are gone, the pod garbage collector deletes them
		// (and the namespace's deletion finishes) without this test waiting.
		start := time.Now()
		if err := parallel(16, names, func(name string) error {
			return client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		}); err != nil {
			t.Logf("delete the fake nodes: %v", err)
		}
		t.Logf("deleted the %d fake nodes in %s; the pod garbage collector deletes their pods", len(names), time.Since(start).Round(time.Millisecond))
	})
	// Ready, with room for pods, so that the scheduler binds the
	// DaemonSet's mount pods to them (no kubelet renews their status: the
	// node controller marks them unreachable after a while, a taint the
	// mount pods tolerate).
	if err := parallel(16, names, func(name string) error {
		node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "mountcontainers.io/scale": "true"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods: resource.MustParse("110")}
		// The node controller changes a new node at once (its taints).
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node.Status = corev1.NodeStatus{Capacity: room, Allocatable: room, Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ScaleTest",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
			_, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				if latest, gerr := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); gerr == nil {
					node = latest
				}
			}
			return err
		})
	}); err != nil {
		t.Fatalf("create nodes: %v", err)
	}
	var pods []string
	for _, node := range names {
		for j := range scalePodsPerNode {
			pods = append(pods, fmt.Sprintf("%s/%d", node, j))
		}
	}
	if err := parallel(32, pods, func(id string) error {
		node, num, _ := strings.Cut(id, "/")
		j, _ := strconv.Atoi(num)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%02d", node, j), Namespace: ns, Labels: map[string]string{"app": "scale"},
				// A controller owns them, as a drain wants.
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "scale", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr(true)}}},
			Spec: corev1.PodSpec{
				NodeName:                     node,
				AutomountServiceAccountToken: ptr(false),
				Containers:                   []corev1.Container{{Name: "main", Image: n.bed.Env.BaseImage}},
			},
		}
		if j%3 == 0 {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{
				Driver: glusterDriver, Options: map[string]string{"server": n.bed.Env.HostName, "volume": glusterVolume}}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}
		_, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("create pods: %v", err)
	}
	t.Logf("created %d nodes and %d pods in %s", scaleNodes, len(pods), time.Since(start).Round(time.Millisecond))

	// Every node's mount pod bound to it, then all of them outdated.
	err = pollCount(ctx, "mount pods bound to every node", 5*time.Minute, scaleNodes+len(n.bed.Env.Nodes), func() (int, error) {
		l, err := client.CoreV1().Pods(mountpodNS).List(ctx, metav1.ListOptions{LabelSelector: mountpodSelect})
		if err != nil {
			return 0, err
		}
		bound := 0
		for _, p := range l.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n.newImage(t)

	// The dry run, with the client mountpod-rollout makes (its rate limits
	// included), counting what it asks.
	counter := &requestCounter{byKind: map[string]int{}}
	cfg := rest.CopyConfig(n.bed.Config)
	cfg.QPS, cfg.Burst = 0, 0
	rollout.SetClientDefaults(cfg)
	cfg.Wrap(counter.wrap)
	rc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	exec := &rollout.PodExec{Config: cfg, Client: rc}
	r := &rollout.Rollout{Client: rc, Mounts: exec, Status: exec, Progress: discardProgress{}, Options: rollout.Options{
		Namespace: mountpodNS, Name: "glusterfs-mountpod", DryRun: true, DeleteEmptyDirData: true}}
	start = time.Now()
	plan, err := r.Run(ctx)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	evict := 0
	for _, np := range plan.Nodes {
		evict += len(np.Evict)
	}
	t.Logf("dry run over %d nodes and %d pods: %s, %d API requests %v; plan: %d nodes, %d pods to evict",
		scaleNodes+len(n.bed.Env.Nodes), len(pods), took.Round(time.Millisecond), counter.total.Load(), counter.sorted(), len(plan.Nodes), evict)
	if len(plan.Nodes) != scaleNodes+len(n.bed.Env.Nodes) {
		t.Errorf("the plan has %d nodes, want every node's (%d)", len(plan.Nodes), scaleNodes+len(n.bed.Env.Nodes))
	}
	// The drain of a fake node evicts its pods that use the volume.
	if want := scaleNodes * ((scalePodsPerNode + 2) / 3); evict < want {
		t.Errorf("the plan evicts %d pods, want at least %d (a third of every fake node's)", evict, want)
	}
}

// parallel runs f over items with at most workers at once and returns the
// first error.
func parallel(workers int, items []string, f func(string) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	ch := make(chan string)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := f(it); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%s: %w", it, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return first
}

func pollCount(ctx context.Context, what string, timeout time.Duration, want int, count func() (int, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := count()
		if err == nil && got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d after %s (%v)", what, got, want, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

func ptr[T any](v T) *T { return &v }

type discardProgress struct{}

func (discardProgress) Plan(*rollout.Plan)  {}
func (discardProgress) Event(rollout.Event) {}

// requestCounter counts the requests a client makes, by method and path
// kind (the resource, without names).
type requestCounter struct {
	total  atomic.Int64
	mu     sync.Mutex
	byKind map[string]int
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.total.Add(1)
		c.mu.Lock()
		c.byKind[req.Method+" "+resourceOf(req.URL.Path)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) sorted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, v := range c.byKind {
		out = append(out, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(out)
	return out
}

// resourceOf reduces an API path to its resource: /api/v1/namespaces/x/pods
// is "pods", /apis/apps/v1/namespaces/x/daemonsets/y is "daemonsets".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			return parts[i+2]
		}
	}
	if len(parts) >= 3 && parts[0] == "api" {
		return parts[2]
	}
	if len(parts) >= 4 && parts[0] == "apis" {
		return parts[3]
	}
	return path
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
