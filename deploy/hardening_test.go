package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
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

// optOutLabel labels the namespaces the PV-only policies skip: an
// administrator's choice (deploy/README.md).
const optOutLabel = "mountcontainers.io/inline-flexvolume"

// TestFlexvolumePolicy: deploy/policy renders a ValidatingAdmissionPolicy
// on pod creation naming both drivers, and a binding that denies; every
// overlay that installs a Flexvolume driver ships the same policy, by
// default, for its own driver. Each binding skips the namespaces labelled
// mountcontainers.io/inline-flexvolume=allowed. Its effect is proven on the
// bed (test/e2e TestFlexvolumePVOnlyPolicy).
func TestFlexvolumePolicy(t *testing.T) {
	var all []string
	for _, o := range mountPodOverlays {
		if !installsFlexvolume(t, o.overlay) {
			continue
		}
		driver, err := boundary.FlexvolumeVolumeDriver(envValue(daemonSet(t, o.overlay), hostinstall.EnvFlexvolumeDriver))
		if err != nil {
			t.Fatalf("%s: %v", o.overlay, err)
		}
		all = append(all, driver)
		t.Run(o.overlay, func(t *testing.T) { checkPVOnlyPolicy(t, o.overlay, []string{driver}) })
	}
	if len(all) < 2 {
		t.Fatalf("only %v install a Flexvolume driver: the overlays changed", all)
	}
	t.Run("policy", func(t *testing.T) { checkPVOnlyPolicy(t, "policy", all) })
}

// checkPVOnlyPolicy checks the one PV-only policy and binding dir renders:
// the policy refuses pods naming drivers (exactly those) inline, the
// binding denies outside the opted-out namespaces.
func checkPVOnlyPolicy(t *testing.T, dir string, drivers []string) {
	t.Helper()
	var policy *admissionv1.ValidatingAdmissionPolicy
	var binding *admissionv1.ValidatingAdmissionPolicyBinding
	for _, o := range render(t, dir) {
		switch o := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			if policy != nil {
				t.Fatalf("%s renders two policies", dir)
			}
			policy = o
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			if binding != nil {
				t.Fatalf("%s renders two bindings", dir)
			}
			binding = o
		}
	}
	if policy == nil || binding == nil {
		t.Fatalf("%s renders no ValidatingAdmissionPolicy and binding", dir)
	}
	if !strings.HasSuffix(policy.Name, "mountcontainers-flexvolume-pv-only") {
		t.Errorf("policy %s: its refusals name it, and deploy/README.md names mountcontainers-flexvolume-pv-only", policy.Name)
	}
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %+v does not deny with policy %s", binding.Spec, policy.Name)
	}
	wantNS := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: optOutLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"allowed"}},
	}}
	if mr := binding.Spec.MatchResources; mr == nil || !reflect.DeepEqual(mr.NamespaceSelector, wantNS) || mr.ObjectSelector != nil || len(mr.ResourceRules) > 0 {
		t.Errorf("binding matches %+v, want every pod outside the namespaces labelled %s=allowed", mr, optOutLabel)
	}
	if fp := policy.Spec.FailurePolicy; fp == nil || *fp != admissionv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", fp)
	}
	rules := policy.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Contains(rules[0].Resources, "pods") || !slices.Contains(rules[0].Operations, admissionv1.Create) {
		t.Errorf("policy does not match pod creation: %+v", rules)
	}
	if got := stringList(t, variable(t, policy, "drivers")); !sameSet(got, drivers) {
		t.Errorf("policy %s refuses the drivers %v inline, want %v", policy.Name, got, drivers)
	}
}

// TestFlexvolumePolicyOptOut: the overlay deploy/README.md shows for
// running a Flexvolume overlay without its policy renders everything but
// the policy and its binding, for each overlay that ships one.
func TestFlexvolumePolicyOptOut(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var example string
	parts := strings.Split(string(readme), "```")
	for i := 1; i < len(parts); i += 2 { // the code blocks
		if strings.Contains(parts[i], "$patch: delete") {
			example = strings.TrimPrefix(parts[i], "yaml\n")
		}
	}
	const remote = "github.com/mountcontainers/mountcontainers/deploy/glusterfs?ref=<the commit you built from>"
	if !strings.Contains(example, remote) || !strings.Contains(example, "glusterfs-mountcontainers-flexvolume-pv-only") {
		t.Fatalf("README.md has no opt-out example on %s naming glusterfs-mountcontainers-flexvolume-pv-only:\n%s", remote, example)
	}
	for _, o := range mountPodOverlays {
		if !installsFlexvolume(t, o.overlay) {
			continue
		}
		t.Run(o.overlay, func(t *testing.T) {
			dir := t.TempDir()
			base, err := filepath.Abs(o.overlay)
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(dir, base)
			if err != nil {
				t.Fatal(err)
			}
			k := strings.ReplaceAll(strings.Replace(example, remote, rel, 1), "glusterfs-", o.overlay+"-")
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
				t.Fatal(err)
			}
			want := []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"}
			if got := kinds(render(t, dir)); !slices.Equal(got, want) {
				t.Errorf("the opt-out overlay renders %v, want %v", got, want)
			}
		})
	}
}

// TestCephfsAllowedServers: the cephfs overlay ships no allow-list of
// monitors but a placeholder the mount pod refuses, naming the variable,
// so that the administrator must choose the monitors; a real list passes.
func TestCephfsAllowedServers(t *testing.T) {
	ds := daemonSet(t, "cephfs")
	env := ds.Spec.Template.Spec.Containers[0].Env
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS" })
	if i != 12 {
		t.Fatalf("MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS is env/%d; README.md's overlay and test/e2e's patch env/12", i)
	}
	cfg := func(list string) hostinstall.Config {
		return hostinstall.Config{
			FlexvolumeDir:            envValue(ds, hostinstall.EnvFlexvolumeDir),
			FlexvolumeDriver:         envValue(ds, hostinstall.EnvFlexvolumeDriver),
			FlexvolumeSecretsDir:     envValue(ds, "MOUNTPOD_FLEXVOLUME_SECRETS_DIR"),
			FlexvolumeAllowedServers: strings.Split(list, ","), // as urfave/cli splits the variable
		}
	}
	err := cfg(env[i].Value).Validate()
	if err == nil || !strings.Contains(err.Error(), "MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS") {
		t.Errorf("the shipped value %q: %v; want the mount pod to refuse it, naming the variable", env[i].Value, err)
	}
	for _, list := range []string{"10.0.0.1,ceph-mon.example.com", "10.20.0.0/16", "0.0.0.0/0,::/0"} {
		if err := cfg(list).Validate(); err != nil {
			t.Errorf("%q refused: %v", list, err)
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

// TestMountPodHardening: in every overlay (mountPodOverlays) the mount pod
// runs in deploy/namespace's namespace, as a ServiceAccount that may create
// Events and nothing else (checked by TestMountPodRBAC), tolerates every
// NoSchedule taint, and requests the memory it was measured to use: at
// least the peak, at most a quarter more.
func TestMountPodHardening(t *testing.T) {
	for _, o := range mountPodOverlays {
		overlay := o.overlay
		t.Run(overlay, func(t *testing.T) {
			ds := daemonSet(t, overlay)
			pod := ds.Spec.Template.Spec
			// The namespace holds the mount pods alone (TestNamespace).
			if ns := mountNamespace(t); ds.Namespace != ns {
				t.Errorf("namespace %q, want deploy/namespace's %s", ds.Namespace, ns)
			}
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
	for _, o := range mountPodOverlays {
		overlay := o.overlay
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
				case *appsv1.DaemonSet, *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
				default:
					t.Errorf("unexpected %T in the overlay", o)
				}
			}
			if ns := mountNamespace(t); sa == nil || sa.Namespace != ns || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				t.Fatalf("ServiceAccount %+v; want one in %s that mounts no token by default", sa, ns)
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
// itself (internal/pod/kubeevents) and links no Kubernetes API client, which
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
