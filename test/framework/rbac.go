package framework

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// ServiceAccountKubeconfig is a kubeconfig that authenticates as a
// ServiceAccount bound to the RBAC of a kustomization of the repository.
type ServiceAccountKubeconfig struct {
	// Path is the kubeconfig file.
	Path string
	// Namespace and Name are the ServiceAccount's; User is the user name
	// the API server sees (system:serviceaccount:<namespace>:<name>).
	Namespace, Name, User string
	// Policies are the ValidatingAdmissionPolicies that apply to it.
	Policies []string
	// Client is a clientset that authenticates as it.
	Client kubernetes.Interface
}

// Can reports whether the ServiceAccount may do verb on resource (with
// subresource, "" for none) of group, named name ("" for any) in namespace
// ("" for cluster-scoped), as the API server decides
// (SelfSubjectAccessReview).
func (k *ServiceAccountKubeconfig) Can(t testing.TB, verb, group, resource, subresource, namespace, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := k.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Subresource: subresource, Namespace: namespace, Name: name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("access review as %s: %v", k.User, err)
	}
	return r.Status.Allowed
}

// RBACKubeconfig creates exactly the RBAC objects and admission policies
// that `kubectl apply -k <repo>/<dir>` creates, with changes that leave
// every rule as it is: the namespaced objects (the ServiceAccount, Roles,
// RoleBindings, and the ServiceAccount in the bindings' subjects) move to
// namespace, every name gets suffix (a policy binding's policy name too),
// so that tests do not share them, and the matchConditions of the
// ValidatingAdmissionPolicies, which single out the shipped ServiceAccount
// by its user name, name this one instead (a policy that names no
// ServiceAccount is refused: its copy would apply to every test). It
// returns a kubeconfig for that ServiceAccount (there must be exactly one)
// with a token from the TokenRequest API (an hour), not the bed's
// administrator. Everything is deleted when the test ends.
//
// The API server loads new policies asynchronously: a caller that must
// not act before they apply probes for one of their refusals.
//
// For deploy/rbac in the mount pods' namespace, the shipped one:
//
//	sa := bed.RBACKubeconfig(t, "deploy/rbac", "mountcontainers", "-e2e")
//	cmd.Env = append(os.Environ(), "KUBECONFIG="+sa.Path)
func (b *Bed) RBACKubeconfig(t testing.TB, dir, namespace, suffix string) *ServiceAccountKubeconfig {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs := renderKustomization(t, filepath.Join(root, dir))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The admission policies name the shipped ServiceAccount: find it first.
	var shipped *corev1.ServiceAccount
	for _, obj := range objs {
		if s, ok := obj.(*corev1.ServiceAccount); ok {
			if shipped != nil {
				t.Fatalf("%s has more than one ServiceAccount", dir)
			}
			shipped = s
		}
	}
	if shipped == nil {
		t.Fatalf("%s has no ServiceAccount", dir)
	}
	shippedUser := "'" + serviceAccountUser(shipped.Namespace, shipped.Name) + "'"
	testUser := "'" + serviceAccountUser(namespace, shipped.Name+suffix) + "'"

	var sa *corev1.ServiceAccount
	var policies []string
	var created []func(context.Context) error
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := len(created) - 1; i >= 0; i-- {
			if err := created[i](ctx); err != nil {
				t.Logf("delete RBAC of %s: %v", dir, err)
			}
		}
	})
	subjects := func(ss []rbacv1.Subject) []rbacv1.Subject {
		out := make([]rbacv1.Subject, len(ss))
		for i, s := range ss {
			if s.Kind == rbacv1.ServiceAccountKind {
				s.Name += suffix
				s.Namespace = namespace
			}
			out[i] = s
		}
		return out
	}
	rbac := b.Client.RbacV1()
	for _, obj := range objs {
		meta := metav1.ObjectMeta{Name: obj.(metav1.Object).GetName() + suffix, Labels: obj.(metav1.Object).GetLabels()}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			meta.Namespace = namespace
			s, err := b.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create ServiceAccount: %v", err)
			}
			sa = s
			created = append(created, func(ctx context.Context) error {
				return b.Client.CoreV1().ServiceAccounts(namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.ClusterRole:
			if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: o.Rules}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create ClusterRole: %v", err)
			}
			created = append(created, func(ctx context.Context) error {
				return rbac.ClusterRoles().Delete(ctx, meta.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.Role:
			meta.Namespace = namespace
			if _, err := rbac.Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: o.Rules}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create Role: %v", err)
			}
			created = append(created, func(ctx context.Context) error {
				return rbac.Roles(namespace).Delete(ctx, meta.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.ClusterRoleBinding:
			ref := o.RoleRef
			ref.Name += suffix
			if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects(o.Subjects)}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create ClusterRoleBinding: %v", err)
			}
			created = append(created, func(ctx context.Context) error {
				return rbac.ClusterRoleBindings().Delete(ctx, meta.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.RoleBinding:
			meta.Namespace = namespace
			ref := o.RoleRef
			ref.Name += suffix
			if _, err := rbac.RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects(o.Subjects)}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create RoleBinding: %v", err)
			}
			created = append(created, func(ctx context.Context) error {
				return rbac.RoleBindings(namespace).Delete(ctx, meta.Name, metav1.DeleteOptions{})
			})
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			spec := *o.Spec.DeepCopy()
			if spec.ParamKind != nil {
				t.Fatalf("%s: ValidatingAdmissionPolicy %s has parameters, which are not copied", dir, o.Name)
			}
			named := false
			for i, mc := range spec.MatchConditions {
				if strings.Contains(mc.Expression, shippedUser) {
					spec.MatchConditions[i].Expression = strings.ReplaceAll(mc.Expression, shippedUser, testUser)
					named = true
				}
			}
			if !named {
				t.Fatalf("%s: no matchCondition of ValidatingAdmissionPolicy %s names %s: its copy would apply to every test's requests", dir, o.Name, shippedUser)
			}
			vaps := b.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies()
			if _, err := vaps.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create ValidatingAdmissionPolicy: %v", err)
			}
			policies = append(policies, meta.Name)
			created = append(created, func(ctx context.Context) error {
				return vaps.Delete(ctx, meta.Name, metav1.DeleteOptions{})
			})
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			spec := *o.Spec.DeepCopy()
			if spec.ParamRef != nil {
				t.Fatalf("%s: ValidatingAdmissionPolicyBinding %s has parameters, which are not copied", dir, o.Name)
			}
			spec.PolicyName += suffix
			bindings := b.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
			if _, err := bindings.Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta, Spec: spec}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create ValidatingAdmissionPolicyBinding: %v", err)
			}
			created = append(created, func(ctx context.Context) error {
				return bindings.Delete(ctx, meta.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("%s: unexpected %T", dir, obj)
		}
	}
	exp := int64(3600)
	tok, err := b.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, sa.Name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bed"] = &clientcmdapi.Cluster{Server: b.Config.Host, CertificateAuthority: b.Config.CAFile, CertificateAuthorityData: b.Config.CAData}
	cfg.AuthInfos[sa.Name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts[sa.Name] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: sa.Name, Namespace: namespace}
	cfg.CurrentContext = sa.Name
	path := filepath.Join(t.TempDir(), "kubeconfig-"+sa.Name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	who, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("who am I with the token of %s/%s: %v", namespace, sa.Name, err)
	}
	k := &ServiceAccountKubeconfig{Path: path, Namespace: namespace, Name: sa.Name, User: who.Status.UserInfo.Username, Policies: policies, Client: client}
	if want := serviceAccountUser(namespace, sa.Name); k.User != want {
		t.Fatalf("the token authenticates as %q, want %q", k.User, want)
	}
	return k
}

// serviceAccountUser is the user name the API server gives the
// ServiceAccount namespace/name.
func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// renderKustomization builds the kustomization in dir (kustomize build)
// and decodes every object strictly.
func renderKustomization(t testing.TB, dir string) []runtime.Object {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var objs []runtime.Object
	for _, res := range rm.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := ser.Decode(y, nil, nil)
		if err != nil {
			t.Fatalf("%s: decode %s/%s: %v", dir, res.GetKind(), res.GetName(), err)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		t.Fatalf("%s renders nothing", dir)
	}
	return objs
}
