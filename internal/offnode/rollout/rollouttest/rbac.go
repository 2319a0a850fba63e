package rollouttest

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Request is what the RBAC authorizer sees of a resource request.
type Request struct {
	Verb, APIGroup, Resource, Subresource, Namespace, Name string
}

// String renders r as `verb group/resource/subresource name -n namespace`.
func (r Request) String() string {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if r.APIGroup != "" {
		res = r.APIGroup + "/" + res
	}
	s := r.Verb + " " + res
	if r.Name != "" {
		s += " " + r.Name
	}
	if r.Namespace != "" {
		s += " -n " + r.Namespace
	}
	return s
}

// RequestOf returns the request a fake clientset's action stands for. It
// returns false for the fake discovery's actions (the discovery documents
// are non-resource URLs every authenticated user may read, through the
// system:discovery ClusterRole).
func RequestOf(a k8stesting.Action) (Request, bool) {
	gvr := a.GetResource()
	if gvr.Group == "" && gvr.Version == "" && slices.Contains([]string{"resource", "group", "version"}, gvr.Resource) {
		return Request{}, false
	}
	r := Request{Verb: a.GetVerb(), APIGroup: gvr.Group, Resource: gvr.Resource, Subresource: a.GetSubresource(), Namespace: a.GetNamespace()}
	// Get, delete and patch actions name their object; update and create
	// actions carry it. A create names it for RBAC only when it creates a
	// subresource of it (pods/NAME/eviction).
	if named, ok := a.(interface{ GetName() string }); ok {
		r.Name = named.GetName()
	} else if o, ok := a.(k8stesting.CreateAction); ok && (r.Verb == "update" || r.Subresource != "") {
		r.Name = nameOf(o.GetObject())
	}
	return r, true
}

func nameOf(obj any) string {
	if o, ok := obj.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}

// Policy is what a set of RBAC objects grants one ServiceAccount.
type Policy struct {
	// cluster rules apply everywhere, namespaced ones in their namespace.
	cluster    []rbacv1.PolicyRule
	namespaced map[string][]rbacv1.PolicyRule
}

// LoadPolicy renders the kustomization in dir (kustomize build) and
// returns what its roles grant, through its bindings, to the
// ServiceAccount namespace/name.
func LoadPolicy(dir, namespace, name string) (*Policy, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var (
		clusterRoles = map[string]*rbacv1.ClusterRole{}
		roles        = map[string]*rbacv1.Role{} // by namespace/name
		crbs         []*rbacv1.ClusterRoleBinding
		rbs          []*rbacv1.RoleBinding
	)
	for _, res := range rm.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			return nil, err
		}
		obj, _, err := ser.Decode(y, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: decode %s/%s: %w", dir, res.GetKind(), res.GetName(), err)
		}
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[o.Name] = o
		case *rbacv1.Role:
			roles[o.Namespace+"/"+o.Name] = o
		case *rbacv1.ClusterRoleBinding:
			crbs = append(crbs, o)
		case *rbacv1.RoleBinding:
			rbs = append(rbs, o)
		}
	}
	subject := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace && s.Name == name
		})
	}
	p := &Policy{namespaced: map[string][]rbacv1.PolicyRule{}}
	for _, b := range crbs {
		if cr := clusterRoles[b.RoleRef.Name]; cr != nil && b.RoleRef.Kind == "ClusterRole" && subject(b.Subjects) {
			p.cluster = append(p.cluster, cr.Rules...)
		}
	}
	for _, b := range rbs {
		if !subject(b.Subjects) {
			continue
		}
		switch b.RoleRef.Kind {
		case "Role":
			if r := roles[b.Namespace+"/"+b.RoleRef.Name]; r != nil {
				p.namespaced[b.Namespace] = append(p.namespaced[b.Namespace], r.Rules...)
			}
		case "ClusterRole":
			if cr := clusterRoles[b.RoleRef.Name]; cr != nil {
				p.namespaced[b.Namespace] = append(p.namespaced[b.Namespace], cr.Rules...)
			}
		}
	}
	if len(p.cluster) == 0 && len(p.namespaced) == 0 {
		return nil, fmt.Errorf("%s grants ServiceAccount %s/%s nothing", dir, namespace, name)
	}
	return p, nil
}

// Allows reports whether the policy allows r, as the RBAC authorizer
// decides: a rule matches when it names the verb, the API group, the
// resource (with its subresource) and, if it lists resourceNames, the
// request's name.
func (p *Policy) Allows(r Request) bool {
	if slices.ContainsFunc(p.cluster, r.matches) {
		return true
	}
	return r.Namespace != "" && slices.ContainsFunc(p.namespaced[r.Namespace], r.matches)
}

func (r Request) matches(rule rbacv1.PolicyRule) bool {
	has := func(list []string, v string) bool {
		return slices.Contains(list, v) || slices.Contains(list, "*")
	}
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	resOK := slices.Contains(rule.Resources, res) || slices.Contains(rule.Resources, "*") ||
		(r.Subresource != "" && slices.Contains(rule.Resources, "*/"+r.Subresource))
	if !has(rule.Verbs, r.Verb) || !has(rule.APIGroups, r.APIGroup) || !resOK {
		return false
	}
	return len(rule.ResourceNames) == 0 || (r.Name != "" && slices.Contains(rule.ResourceNames, r.Name))
}

// Rules renders the rules that apply in namespace ("" for cluster-scoped
// requests), for a failure message.
func (p *Policy) Rules(namespace string) string {
	var b strings.Builder
	rules := slices.Clone(p.cluster)
	if namespace != "" {
		rules = append(rules, p.namespaced[namespace]...)
	}
	for _, r := range rules {
		fmt.Fprintf(&b, "  %v %v %v %v\n", r.Verbs, r.APIGroups, r.Resources, r.ResourceNames)
	}
	return b.String()
}
