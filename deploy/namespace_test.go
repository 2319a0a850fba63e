package deploy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
)

// mountNamespace is the name of the namespace deploy/namespace renders.
func mountNamespace(t *testing.T) string {
	t.Helper()
	objs := render(t, "namespace")
	if len(objs) != 1 {
		t.Fatalf("deploy/namespace renders %d objects, want one Namespace", len(objs))
	}
	ns, ok := objs[0].(*corev1.Namespace)
	if !ok {
		t.Fatalf("deploy/namespace renders a %T, want a Namespace", objs[0])
	}
	return ns.Name
}

// TestNamespace: deploy/namespace is the namespace of every namespaced
// object deploy/ ships (the mount pods, their ServiceAccounts,
// mountpod-rollout's ServiceAccount and Role, the monitoring, the CSI
// drivers' pods and the provisioner's account), the one
// mountpod-rollout looks in by default, and its Pod Security admits the
// mount pods, which are privileged. No overlay ships the Namespace itself:
// deleting an overlay would delete it, and with it every plugin's mount
// pods.
func TestNamespace(t *testing.T) {
	ns := render(t, "namespace")[0].(*corev1.Namespace)
	if ns.Name != rollout.DefaultNamespace {
		t.Errorf("namespace %q; mountpod-rollout's --namespace defaults to %q", ns.Name, rollout.DefaultNamespace)
	}
	if ns.Name == metav1.NamespaceSystem || ns.Name == metav1.NamespaceDefault {
		t.Errorf("namespace %q is shared with other components: what deploy/rbac grants there would reach them", ns.Name)
	}
	// Privileged, host namespaces and hostPath volumes pass only the
	// privileged level (TestPluginOverlays checks the pods need it).
	for _, mode := range []string{"enforce", "audit", "warn"} {
		if got := ns.Labels["pod-security.kubernetes.io/"+mode]; got != "privileged" {
			t.Errorf("label pod-security.kubernetes.io/%s = %q, want privileged", mode, got)
		}
	}
	if v, ok := ns.Labels["pod-security.kubernetes.io/enforce-version"]; ok && v != "latest" {
		t.Errorf("enforce-version %q pins an older Pod Security", v)
	}

	dirs := []string{"rbac", "monitoring", "policy"}
	for _, o := range mountPodOverlays {
		dirs = append(dirs, o.overlay)
	}
	for _, o := range csiOverlays {
		dirs = append(dirs, o.overlay)
	}
	for _, dir := range dirs {
		for _, o := range renderResources(t, dir) {
			if o.GetKind() == "Namespace" {
				t.Errorf("deploy/%s ships the Namespace %s: deleting it would delete the namespace", dir, o.GetName())
			}
			if clusterScoped[o.GetKind()] {
				if o.GetNamespace() != "" {
					t.Errorf("deploy/%s: the cluster-scoped %s %s has namespace %q", dir, o.GetKind(), o.GetName(), o.GetNamespace())
				}
			} else if o.GetNamespace() != ns.Name {
				t.Errorf("deploy/%s: %s %s is in namespace %q, want %q", dir, o.GetKind(), o.GetName(), o.GetNamespace(), ns.Name)
			}
		}
	}
}

// clusterScoped are the cluster-scoped kinds deploy/ ships.
var clusterScoped = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
	"CSIDriver": true,
}
