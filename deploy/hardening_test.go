package deploy_test

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/mountcontainers/mountcontainers/internal/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/hostinstall"
)

// envValue is the value of the mount container's variable name, "" when
// the DaemonSet does not set it.
func envValue(ds *appsv1.DaemonSet, name string) string {
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestFlexvolumePolicy: deploy/policy renders a ValidatingAdmissionPolicy
// on pod creation and a binding that denies. Its effect is proven on the
// bed (test/e2e TestFlexvolumePVOnlyPolicy).
func TestFlexvolumePolicy(t *testing.T) {
	var policy *admissionv1.ValidatingAdmissionPolicy
	var binding *admissionv1.ValidatingAdmissionPolicyBinding
	for _, o := range render(t, "policy") {
		switch o := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			policy = o
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			binding = o
		default:
			t.Errorf("unexpected %T", o)
		}
	}
	if policy == nil || binding == nil {
		t.Fatal("want a ValidatingAdmissionPolicy and its binding")
	}
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %+v does not deny with policy %s", binding.Spec, policy.Name)
	}
	if fp := policy.Spec.FailurePolicy; fp == nil || *fp != admissionv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", fp)
	}
	rules := policy.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Contains(rules[0].Resources, "pods") || !slices.Contains(rules[0].Operations, admissionv1.Create) {
		t.Errorf("policy does not match pod creation: %+v", rules)
	}
	// Every driver an overlay installs is named.
	i := slices.IndexFunc(policy.Spec.Variables, func(v admissionv1.Variable) bool { return v.Name == "drivers" })
	if i < 0 {
		t.Fatalf("policy has no variable drivers: %+v", policy.Spec.Variables)
	}
	for _, overlay := range []string{"glusterfs", "cephfs"} {
		driver, err := flexvolume.VolumeDriver(envValue(daemonSet(t, overlay), hostinstall.EnvFlexvolumeDriver))
		if err != nil {
			t.Fatalf("%s: %v", overlay, err)
		}
		if !strings.Contains(policy.Spec.Variables[i].Expression, "'"+driver+"'") {
			t.Errorf("policy's drivers %s do not name %s's driver %q", policy.Spec.Variables[i].Expression, overlay, driver)
		}
	}
}

// TestGlusterfsAllowedServers: the glusterfs overlay passes the
// administrator's allow-list to the driver, empty by default (the driver
// then refuses loopback, link-local and unspecified servers).
func TestGlusterfsAllowedServers(t *testing.T) {
	ds := daemonSet(t, "glusterfs")
	env := ds.Spec.Template.Spec.Containers[0].Env
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS" })
	if i < 0 {
		t.Fatal("no MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS in the glusterfs overlay")
	}
	if i != 12 || env[i].Value != "" {
		t.Errorf("MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS is env/%d = %q; test/demo/manifests.sh patches env/12, and the default is empty", i, env[i].Value)
	}
}

// measuredPeak is the mount container's peak memory use measured on the bed
// (BENCHMARKS.md, "Mount pod memory"): memory.max_usage_in_bytes of its
// cgroup after registering, installing the driver and shim, serving a
// GlusterFS mount through the exec socket and three `mountpod status`.
const measuredPeak = 38976 << 10

// TestMountPodHardening: in every overlay the mount pod runs as a
// ServiceAccount that may create Events and nothing else (checked by
// TestMountPodRBAC), tolerates every NoSchedule taint, and requests the
// memory it was measured to use: at least the peak, at most a quarter more.
func TestMountPodHardening(t *testing.T) {
	for _, overlay := range []string{"glusterfs", "rbd"} {
		t.Run(overlay, func(t *testing.T) {
			ds := daemonSet(t, overlay)
			pod := ds.Spec.Template.Spec
			if pod.ServiceAccountName != overlay+"-mountpod" {
				t.Errorf("serviceAccountName %q, want %s-mountpod", pod.ServiceAccountName, overlay)
			}
			if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
				return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule
			}) {
				t.Errorf("no toleration of every NoSchedule taint: %+v", pod.Tolerations)
			}
			for _, tol := range pod.Tolerations {
				if tol.TolerationSeconds != nil {
					t.Errorf("toleration %+v is bounded: the mount pod would be evicted", tol)
				}
			}
			mem := pod.Containers[0].Resources.Requests.Memory().Value()
			if mem < measuredPeak || mem > measuredPeak*5/4 {
				t.Errorf("memory request %d bytes; measured peak %d: want between it and a quarter more", mem, int64(measuredPeak))
			}
			if lim := pod.Containers[0].Resources.Limits.Memory(); !lim.IsZero() {
				t.Errorf("memory limit %v: an OOM kill there breaks workloads' volumes", lim)
			}
		})
	}
}

// TestMountPodRBAC: the mount pod's ServiceAccount is bound to one
// ClusterRole, whose one rule is to create core Events; the account mounts
// no token in other pods.
func TestMountPodRBAC(t *testing.T) {
	for _, overlay := range []string{"glusterfs", "rbd"} {
		t.Run(overlay, func(t *testing.T) {
			var sa *corev1.ServiceAccount
			var roles []*rbacv1.ClusterRole
			var bindings []*rbacv1.ClusterRoleBinding
			for _, o := range render(t, overlay) {
				switch o := o.(type) {
				case *corev1.ServiceAccount:
					sa = o
				case *rbacv1.ClusterRole:
					roles = append(roles, o)
				case *rbacv1.ClusterRoleBinding:
					bindings = append(bindings, o)
				case *appsv1.DaemonSet:
				default:
					t.Errorf("unexpected %T in the overlay", o)
				}
			}
			if sa == nil || sa.Namespace != "kube-system" || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Fatalf("ServiceAccount %+v; want one in kube-system that mounts no token by default", sa)
			}
			if len(roles) != 1 || len(bindings) != 1 {
				t.Fatalf("%d ClusterRoles, %d bindings; want one each", len(roles), len(bindings))
			}
			want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}}
			if !reflect.DeepEqual(roles[0].Rules, want) {
				t.Errorf("rules %+v, want %+v", roles[0].Rules, want)
			}
			b := bindings[0]
			if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != roles[0].Name || len(b.Subjects) != 1 ||
				b.Subjects[0].Kind != rbacv1.ServiceAccountKind || b.Subjects[0].Name != sa.Name || b.Subjects[0].Namespace != sa.Namespace {
				t.Errorf("binding %+v does not bind %s to %s/%s", b, roles[0].Name, sa.Namespace, sa.Name)
			}
			if got := daemonSet(t, overlay).Spec.Template.Spec.ServiceAccountName; got != sa.Name {
				t.Errorf("the DaemonSet runs as %q, not %q", got, sa.Name)
			}
		})
	}
}

// TestMountPodLinksNoAPIClient: the mount pod's binary posts its Events
// itself (internal/kubeevents) and links no Kubernetes API client, which
// would nearly triple its size and weigh on its memory.
func TestMountPodLinksNoAPIClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../cmd/mountpod").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/client-go/") || strings.HasPrefix(dep, "k8s.io/api/") {
			t.Fatalf("cmd/mountpod links %s", dep)
		}
	}
}
