package rollout_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mountcontainers/mountcontainers/internal/rollout"
	rt "github.com/mountcontainers/mountcontainers/internal/rollout/testing"
)

// The RBAC shipped for the rollout, as `kubectl apply -k deploy/rbac`
// creates it, and the ServiceAccount it binds.
const (
	rbacDir = "../../deploy/rbac"
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

// checkRBAC fails t for every action (an API call of a rollout) that
// deploy/rbac does not allow. Every scenario made with newEnv ends with it.
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
	}
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
