package deploy_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

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
	if len(policy.Spec.Variables) != 1 || !strings.Contains(policy.Spec.Variables[0].Expression, "'mountcontainers.io/glusterfs'") {
		t.Errorf("policy does not name the driver: %+v", policy.Spec.Variables)
	}
}

// TestGlusterfsAllowedServers: the glusterfs overlay passes the
// administrator's allow-list to the driver, empty by default (the driver
// then refuses loopback, link-local and unspecified servers).
func TestGlusterfsAllowedServers(t *testing.T) {
	ds := render(t, "glusterfs")[0].(*appsv1.DaemonSet)
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

// TestMountPodHardening: in every overlay the mount pod carries no
// service-account token (mountpod never calls the API), tolerates every
// NoSchedule taint, and requests the memory it was measured to use: at
// least the peak, at most a quarter more.
func TestMountPodHardening(t *testing.T) {
	for _, overlay := range []string{"glusterfs", "rbd"} {
		t.Run(overlay, func(t *testing.T) {
			ds := render(t, overlay)[0].(*appsv1.DaemonSet)
			pod := ds.Spec.Template.Spec
			if a := pod.AutomountServiceAccountToken; a == nil || *a {
				t.Errorf("automountServiceAccountToken %v, want false", a)
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

// TestMountPodUsesNoAPI: the mount pod's binary links no Kubernetes API
// client, which is why it gets no token.
func TestMountPodUsesNoAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../cmd/mountpod").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/client-go/") {
			t.Fatalf("cmd/mountpod links %s: it may call the API and need a token", dep)
		}
	}
}
