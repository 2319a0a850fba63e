package rollout_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	rt "github.com/mountcontainers/mountcontainers/internal/offnode/rollout/rollouttest"
)

// The RBAC shipped for the rollout, as `kubectl apply -k deploy/rbac`
// creates it, and the ServiceAccount it binds.
const (
	rbacDir = "../../../deploy/rbac"
	rbacSA  = "mountpod-rollout"
)

var (
	policyOnce sync.Once
	policy     *rt.Policy
	policyErr  error
)

func shippedPolicy(t *testing.T) *rt.Policy {
	t.Helper()
	policyOnce.Do(func() { policy, policyErr = rt.LoadPolicy(rbacDir, ns, rbacSA) })
	if policyErr != nil {
		t.Fatal(policyErr)
	}
	return policy
}

// checkShipped holds cs, the client of a rollout of c, to what deploy/rbac
// lets the rollout do. When the test ends, every API call cs made must be
// allowed by its RBAC (checkRBAC), and every node update must be one its
// admission policy admits (nodeUpdateRefusal).
func checkShipped(t *testing.T, c *rt.Cluster, cs *fake.Clientset) {
	t.Helper()
	var (
		mu      sync.Mutex
		refused []string
	)
	cs.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n, ok := a.(k8stesting.UpdateAction).GetObject().(*corev1.Node)
		if !ok || a.GetSubresource() != "" {
			return false, nil, nil
		}
		if old, err := c.Client.Tracker().Get(a.GetResource(), "", n.Name); err == nil {
			if why := nodeUpdateRefusal(old.(*corev1.Node), n); why != "" {
				mu.Lock()
				refused = append(refused, "update node "+n.Name+": "+why)
				mu.Unlock()
			}
		}
		return false, nil, nil
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range refused {
			t.Errorf("deploy/rbac/admission.yaml refuses the rollout's %s", r)
		}
		checkRBAC(t, cs.Actions())
	})
}

// nodeUpdateRefusal restates the rule deploy/rbac/admission.yaml enforces
// on the rollout's node updates ("" when old may become n): only NoSchedule
// taints of key TaintKey may come or go; every other taint, the rest of the
// spec, the labels, annotations, owner references and finalizers stay.
// (The policy's CEL is checked with the API server's evaluator and on the
// bed; here, that the rollout keeps to it in every scenario.)
func nodeUpdateRefusal(old, n *corev1.Node) string {
	others := func(n *corev1.Node) []corev1.Taint {
		return slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool {
			return t.Key == rollout.TaintKey && t.Effect == corev1.TaintEffectNoSchedule
		})
	}
	oldSpec, newSpec := old.Spec, n.Spec
	oldSpec.Taints, newSpec.Taints = nil, nil
	switch {
	case !apiequality.Semantic.DeepEqual(others(old), others(n)):
		return fmt.Sprintf("its other taints changed from %+v to %+v", others(old), others(n))
	case !apiequality.Semantic.DeepEqual(oldSpec, newSpec):
		return fmt.Sprintf("its spec changed from %+v to %+v", oldSpec, newSpec)
	case !maps.Equal(old.Labels, n.Labels) || !maps.Equal(old.Annotations, n.Annotations) ||
		!apiequality.Semantic.DeepEqual(old.OwnerReferences, n.OwnerReferences) || !slices.Equal(old.Finalizers, n.Finalizers):
		return "its labels, annotations, owner references or finalizers changed"
	}
	return ""
}

// The restated rule itself, on the cases deploy/rbac/admission.yaml's CEL
// was checked on: only the rollout's NoSchedule taint may come or go.
func TestNodeUpdateRefusal(t *testing.T) {
	base := func() *corev1.Node {
		n := rt.Node("n1")
		n.Labels = map[string]string{"kubernetes.io/hostname": "n1"}
		n.Spec.PodCIDR = "10.0.0.0/24"
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		return n
	}
	ours := corev1.Taint{Key: rollout.TaintKey, Value: ns + "." + dsName, Effect: corev1.TaintEffectNoSchedule}
	with := func(change func(n *corev1.Node)) *corev1.Node {
		n := base()
		change(n)
		return n
	}
	tainted := with(func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ours) })
	for _, tc := range []struct {
		name     string
		old, new *corev1.Node
		admitted bool
	}{
		{"taint", base(), tainted, true},
		{"untaint", tainted, base(), true},
		{"unchanged", base(), base(), true},
		{"NoExecute of the key", base(), with(func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: rollout.TaintKey, Effect: corev1.TaintEffectNoExecute})
		}), false},
		{"another taint removed", base(), with(func(n *corev1.Node) { n.Spec.Taints = nil }), false},
		{"cordoned", base(), with(func(n *corev1.Node) { n.Spec.Unschedulable = true }), false},
		{"podCIDR", base(), with(func(n *corev1.Node) { n.Spec.PodCIDR = "10.9.0.0/24" }), false},
		{"label", base(), with(func(n *corev1.Node) { n.Labels["x"] = "y" }), false},
		{"annotation", base(), with(func(n *corev1.Node) { n.Annotations = map[string]string{"x": "y"} }), false},
		{"owner", base(), with(func(n *corev1.Node) { n.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "p", UID: "u"}} }), false},
		{"finalizer", base(), with(func(n *corev1.Node) { n.Finalizers = []string{"x/y"} }), false},
		{"resourceVersion", base(), with(func(n *corev1.Node) { n.ResourceVersion = "7" }), true},
	} {
		if why := nodeUpdateRefusal(tc.old, tc.new); (why == "") != tc.admitted {
			t.Errorf("%s: refusal %q, want admitted %v", tc.name, why, tc.admitted)
		}
	}
}

// checkRBAC fails t for every action (an API call of a rollout) that
// deploy/rbac does not allow.
func checkRBAC(t *testing.T, actions []k8stesting.Action) {
	t.Helper()
	p := shippedPolicy(t)
	seen := map[string]bool{}
	for _, a := range actions {
		req, ok := rt.RequestOf(a)
		if !ok || seen[req.String()] {
			continue
		}
		seen[req.String()] = true
		if !p.Allows(req) {
			t.Errorf("deploy/rbac does not allow the rollout's call %s; rules there:\n%s", req, p.Rules(req.Namespace))
		}
		// RBAC cannot limit create by name; admission.yaml lets the rollout
		// create only the Leases the Role lets it update (deploy's
		// TestRolloutAdmission: the same names).
		if c, ok := a.(k8stesting.CreateAction); ok && req.Resource == "leases" && req.Subresource == "" {
			lease := req
			lease.Verb, lease.Name = "update", nameOf(c.GetObject())
			if !p.Allows(lease) {
				t.Errorf("deploy/rbac/admission.yaml refuses the rollout's creation of Lease %s -n %s", lease.Name, lease.Namespace)
			}
		}
	}
}

func nameOf(obj runtime.Object) string {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetName()
	}
	return ""
}

// The recording is not vacuous: a drain rollout and an in-place one, with
// a failure and a resume, make every kind of call the RBAC grants, and each
// is allowed.
func TestRBACCoversEveryKindOfCall(t *testing.T) {
	e := newEnv(t, nil, rt.PDB("app", "writer", map[string]string{"app": "writer"}, 0))
	if _, err := e.run(nil); err == nil {
		t.Fatal("the budget did not stop the rollout")
	}
	pdb := rt.PDB("app", "writer", map[string]string{"app": "writer"}, 1)
	if _, err := e.c.Client.PolicyV1().PodDisruptionBudgets("app").UpdateStatus(context.Background(), pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.run(func(o *rollout.Options) { o.Resume = true }); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, a := range e.rc.Actions() {
		if req, ok := rt.RequestOf(a); ok {
			req.Name = ""
			got[req.String()] = true
		}
	}
	for _, want := range []string{
		"get nodes", "list nodes", "update nodes",
		"list pods", "get pods -n app", "get pods -n " + ns, "delete pods -n " + ns, "create pods/eviction -n app",
		"get apps/daemonsets -n " + ns, "patch apps/daemonsets -n " + ns, "list apps/controllerrevisions -n " + ns,
		"create events -n " + ns,
		"get coordination.k8s.io/leases -n " + ns, "create coordination.k8s.io/leases -n " + ns, "update coordination.k8s.io/leases -n " + ns,
	} {
		if !got[want] {
			t.Errorf("the rollout never made %q", want)
		}
	}
	if t.Failed() {
		var all []string
		for k := range got {
			all = append(all, k)
		}
		sort.Strings(all)
		t.Logf("calls made:\n  %s", strings.Join(all, "\n  "))
	}
}

// PodExec reads the mount pod through pods/exec, a call outside the
// clientset's typed API: record the requests it sends to an API server and
// check them against deploy/rbac as the API server authorizes them.
func TestRBACAllowsPodExec(t *testing.T) {
	var (
		mu   sync.Mutex
		reqs []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.Path)
		mu.Unlock()
		http.Error(w, "recorded", http.StatusBadRequest)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := rt.MountPod(ns, dsName, "uid-ds", "mp-n1", "n1", "old", true)
	if _, err := (&rollout.PodExec{Config: cfg, Client: client}).Mounts(context.Background(), pod, "mount"); err == nil {
		t.Fatal("exec against the recording server succeeded")
	}
	p := shippedPolicy(t)
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) == 0 {
		t.Fatal("PodExec sent no request")
	}
	for _, r := range reqs {
		method, path, _ := strings.Cut(r, " ")
		if path != "/api/v1/namespaces/"+ns+"/pods/mp-n1/exec" {
			t.Errorf("PodExec requested %s", r)
			continue
		}
		// A WebSocket exec (GET) is authorized as get and, since
		// AuthorizePodWebsocketUpgradeCreatePermission, as create too;
		// SPDY (POST) as create.
		verbs := []string{"create"}
		if method == http.MethodGet {
			verbs = append(verbs, "get")
		}
		for _, v := range verbs {
			req := rt.Request{Verb: v, Resource: "pods", Subresource: "exec", Namespace: ns, Name: "mp-n1"}
			if !p.Allows(req) {
				t.Errorf("%s: deploy/rbac does not allow %s", r, req)
			}
		}
	}
	t.Logf("PodExec sent: %v", reqs)
}

// What the rollout never does is not granted: the rules are no longer
// close to cluster-admin.
func TestRBACGrantsNothingElse(t *testing.T) {
	p := shippedPolicy(t)
	for _, req := range []rt.Request{
		{Verb: "delete", Resource: "pods", Namespace: "app", Name: "writer"}, // bypassing PodDisruptionBudgets
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "app", Name: "writer"},
		{Verb: "patch", APIGroup: "apps", Resource: "daemonsets", Namespace: ns, Name: "kube-proxy"},
		{Verb: "update", APIGroup: "apps", Resource: "daemonsets", Namespace: ns, Name: dsName},
		{Verb: "patch", APIGroup: "apps", Resource: "daemonsets", Namespace: "app", Name: dsName},
		{Verb: "update", APIGroup: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "kube-controller-manager"},
		{Verb: "delete", Resource: "nodes", Name: "n1"},
		{Verb: "patch", Resource: "nodes", Name: "n1"},
		{Verb: "watch", Resource: "pods"},
		{Verb: "get", Resource: "secrets", Namespace: ns, Name: "x"},
		{Verb: "create", Resource: "events", Namespace: "app"},
		{Verb: "create", Resource: "pods", Namespace: ns},
	} {
		if p.Allows(req) {
			t.Errorf("deploy/rbac allows %s, which the rollout never does", req)
		}
	}
}

// The evaluator itself: what it allows and refuses on a few rules.
func TestPolicyAllows(t *testing.T) {
	p := shippedPolicy(t)
	for _, tc := range []struct {
		req  rt.Request
		want bool
	}{
		{rt.Request{Verb: "get", APIGroup: "apps", Resource: "daemonsets", Namespace: ns, Name: dsName}, true},
		{rt.Request{Verb: "get", APIGroup: "apps", Resource: "daemonsets", Namespace: ns}, false}, // resourceNames need a name
		{rt.Request{Verb: "list", APIGroup: "apps", Resource: "daemonsets", Namespace: ns}, false},
		{rt.Request{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "app", Name: "w"}, true},
		{rt.Request{Verb: "create", Resource: "pods", Namespace: "app"}, false}, // the subresource is not the resource
		{rt.Request{Verb: "update", Resource: "nodes", Name: "n1"}, true},
		{rt.Request{Verb: "delete", Resource: "pods", Namespace: ns, Name: "mp-n1"}, true},
	} {
		if got := p.Allows(tc.req); got != tc.want {
			t.Errorf("Allows(%s) = %v, want %v", tc.req, got, tc.want)
		}
	}
	if got := slices.Collect(func(yield func(string) bool) {
		for _, a := range []k8stesting.Action{
			k8stesting.NewRootGetAction(corev1.SchemeGroupVersion.WithResource("nodes"), "n1"),
			k8stesting.NewGetAction(corev1.SchemeGroupVersion.WithResource("pods"), "app", "w"),
		} {
			r, _ := rt.RequestOf(a)
			if !yield(r.String()) {
				return
			}
		}
	}); !slices.Equal(got, []string{"get nodes n1", "get pods w -n app"}) {
		t.Errorf("RequestOf: %v", got)
	}
}
