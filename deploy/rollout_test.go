package deploy_test

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
)

// rolloutObjects is what deploy/rbac renders.
type rolloutObjects struct {
	sa       *corev1.ServiceAccount
	crole    *rbacv1.ClusterRole
	role     *rbacv1.Role
	crb      *rbacv1.ClusterRoleBinding
	rb       *rbacv1.RoleBinding
	policies []*admissionv1.ValidatingAdmissionPolicy
	bindings []*admissionv1.ValidatingAdmissionPolicyBinding
}

func renderRollout(t *testing.T) rolloutObjects {
	t.Helper()
	var r rolloutObjects
	for _, o := range render(t, "rbac") {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			r.sa = o
		case *rbacv1.ClusterRole:
			r.crole = o
		case *rbacv1.Role:
			r.role = o
		case *rbacv1.ClusterRoleBinding:
			r.crb = o
		case *rbacv1.RoleBinding:
			r.rb = o
		case *admissionv1.ValidatingAdmissionPolicy:
			r.policies = append(r.policies, o)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			r.bindings = append(r.bindings, o)
		default:
			t.Fatalf("deploy/rbac renders an unexpected %T", o)
		}
	}
	if r.sa == nil || r.crole == nil || r.role == nil || r.crb == nil || r.rb == nil {
		t.Fatal("deploy/rbac does not render a ServiceAccount, a ClusterRole, a Role and their bindings")
	}
	return r
}

// TestRolloutRBAC checks the shape of deploy/rbac's RBAC: a ServiceAccount
// in the mount pods' namespace, a ClusterRole bound cluster-wide that only
// reads, fences nodes and evicts, and a Role bound in that namespace for
// the rest. Which calls each grants is internal/offnode/rollout's rbac_test.go
// (every API call of the rollout's scenarios) and the end-to-end rollout
// tests (run as this ServiceAccount).
func TestRolloutRBAC(t *testing.T) {
	r := renderRollout(t)
	ns := mountNamespace(t)
	if r.sa.Namespace != ns || r.role.Namespace != ns || r.rb.Namespace != ns {
		t.Errorf("namespaces: ServiceAccount %q, Role %q, RoleBinding %q; want deploy/namespace's %s", r.sa.Namespace, r.role.Namespace, r.rb.Namespace, ns)
	}
	binds := func(ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name string) bool {
		return ref.Kind == kind && ref.Name == name && len(subjects) == 1 && subjects[0].Kind == rbacv1.ServiceAccountKind &&
			subjects[0].Name == r.sa.Name && subjects[0].Namespace == r.sa.Namespace
	}
	if !binds(r.crb.RoleRef, r.crb.Subjects, "ClusterRole", r.crole.Name) || !binds(r.rb.RoleRef, r.rb.Subjects, "Role", r.role.Name) {
		t.Errorf("bindings %+v, %+v do not bind the roles to %s/%s", r.crb, r.rb, r.sa.Namespace, r.sa.Name)
	}
	// Cluster-wide: no wildcard, no writes but node updates and evictions.
	for _, rule := range r.crole.Rules {
		for _, v := range rule.Verbs {
			for _, res := range rule.Resources {
				ok := v == "get" || v == "list" || (res == "nodes" && v == "update") || (res == "pods/eviction" && v == "create")
				if !ok || slices.Contains(rule.APIGroups, "*") || res == "*" {
					t.Errorf("the ClusterRole grants %s on %s %v cluster-wide", v, res, rule.APIGroups)
				}
			}
		}
	}
}

// TestRolloutAdmission checks the shape of deploy/rbac's admission
// policies, which narrow what RBAC cannot: node updates (only the
// rollout's taint may change) and Lease creation (only the DaemonSets'
// names). Each policy is bound to deny, fails closed, and applies to the
// rollout's ServiceAccount alone, named as the API server names it. What
// the expressions admit and refuse was checked with the API server's own
// CEL evaluator (k8s.io/apiserver is not a dependency of this module); the
// end-to-end rollout tests run under them.
func TestRolloutAdmission(t *testing.T) {
	r := renderRollout(t)
	user := "system:serviceaccount:" + r.sa.Namespace + ":" + r.sa.Name
	byResource := map[string]*admissionv1.ValidatingAdmissionPolicy{}
	for _, p := range r.policies {
		if fp := p.Spec.FailurePolicy; fp == nil || *fp != admissionv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail", p.Name, fp)
		}
		if p.Spec.ParamKind != nil {
			t.Errorf("%s has a paramKind: test/framework's RBACKubeconfig copies no parameters", p.Name)
		}
		want := []admissionv1.MatchCondition{{Name: "mountpod-rollout", Expression: "request.userInfo.username == '" + user + "'"}}
		if !slices.Equal(p.Spec.MatchConditions, want) {
			t.Errorf("%s: matchConditions %+v, want %+v: the policy must apply to the ServiceAccount of rbac.yaml alone", p.Name, p.Spec.MatchConditions, want)
		}
		rules := p.Spec.MatchConstraints.ResourceRules
		if len(rules) != 1 || len(rules[0].Resources) != 1 || len(rules[0].Operations) != 1 {
			t.Errorf("%s: resource rules %+v, want one resource and one operation", p.Name, rules)
			continue
		}
		byResource[rules[0].Resources[0]+" "+string(rules[0].Operations[0])] = p
		n := 0
		for _, b := range r.bindings {
			if b.Spec.PolicyName == p.Name {
				n++
				if !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) || b.Spec.MatchResources != nil || b.Spec.ParamRef != nil {
					t.Errorf("binding %s: %+v, want Deny, everywhere", b.Name, b.Spec)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s has %d bindings, want 1", p.Name, n)
		}
	}
	if len(r.policies) != 3 || len(r.bindings) != 3 {
		t.Errorf("%d policies, %d bindings; want three each (nodes, Leases, DaemonSets)", len(r.policies), len(r.bindings))
	}

	ds := byResource["daemonsets UPDATE"]
	if ds == nil {
		t.Fatalf("no policy on DaemonSet updates: %v", byResource)
	}
	if got := variable(t, ds, "recordKey"); got != "'"+rollout.RecordAnnotation+"'" {
		t.Errorf("%s: recordKey %s, the rollout's record is the annotation %s", ds.Name, got, rollout.RecordAnnotation)
	}

	nodes := byResource["nodes UPDATE"]
	if nodes == nil {
		t.Fatalf("no policy on node updates: %v", byResource)
	}
	if got := variable(t, nodes, "taintKey"); got != "'"+rollout.TaintKey+"'" {
		t.Errorf("%s: taintKey %s, the rollout's taint is %s", nodes.Name, got, rollout.TaintKey)
	}

	leases := byResource["leases CREATE"]
	if leases == nil {
		t.Fatalf("no policy on Lease creation: %v", byResource)
	}
	names := stringList(t, variable(t, leases, "names"))
	var dsNames []string
	for _, o := range mountPodOverlays {
		dsNames = append(dsNames, daemonSet(t, o.overlay).Name)
	}
	var leaseNames, dsRuleNames []string
	for _, rule := range r.role.Rules {
		switch {
		case slices.Contains(rule.Resources, "leases") && len(rule.ResourceNames) > 0:
			leaseNames = rule.ResourceNames
		case slices.Contains(rule.Resources, "daemonsets"):
			dsRuleNames = rule.ResourceNames
		}
	}
	for what, list := range map[string][]string{
		"the Role's Lease names":     leaseNames,
		"the Role's DaemonSet names": dsRuleNames,
		"the overlays' DaemonSets":   dsNames,
	} {
		if !sameSet(names, list) {
			t.Errorf("%s lets the rollout create the Leases %v; %s are %v", leases.Name, names, what, list)
		}
	}
}

// variable returns the expression of the policy's variable name.
func variable(t *testing.T, p *admissionv1.ValidatingAdmissionPolicy, name string) string {
	t.Helper()
	i := slices.IndexFunc(p.Spec.Variables, func(v admissionv1.Variable) bool { return v.Name == name })
	if i < 0 {
		t.Fatalf("%s has no variable %s", p.Name, name)
	}
	return p.Spec.Variables[i].Expression
}

// stringList parses a CEL list of string literals, such as ['a', 'b'].
func stringList(t *testing.T, expr string) []string {
	t.Helper()
	inner, okPrefix := strings.CutPrefix(strings.TrimSpace(expr), "[")
	inner, okSuffix := strings.CutSuffix(inner, "]")
	if !okPrefix || !okSuffix {
		t.Fatalf("%q is not a list literal", expr)
	}
	var out []string
	for _, e := range strings.Split(inner, ",") {
		e = strings.TrimSpace(e)
		if len(e) < 2 || e[0] != '\'' || e[len(e)-1] != '\'' || strings.ContainsAny(e[1:len(e)-1], `'\`) {
			t.Fatalf("%q: %q is not a plain string literal", expr, e)
		}
		out = append(out, e[1:len(e)-1])
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
