// Package deploy_test renders every overlay of deploy/ with the kustomize
// API, decodes the result strictly into the Kubernetes API types and checks
// the invariants the mount pod depends on.
package deploy_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
)

// renderResources builds the kustomization in dir (kustomize build).
func renderResources(t *testing.T, dir string) []*resource.Resource {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return rm.Resources()
}

// render builds the kustomization in dir and decodes every object strictly
// (unknown or duplicate fields are errors).
func render(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var objs []runtime.Object
	for _, res := range renderResources(t, dir) {
		y, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := ser.Decode(y, nil, nil)
		if err != nil {
			t.Fatalf("%s: strict decode of %s/%s: %v", dir, res.GetKind(), res.GetName(), err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// daemonSet returns the DaemonSet an overlay renders.
func daemonSet(t *testing.T, dir string) *appsv1.DaemonSet {
	t.Helper()
	for _, o := range render(t, dir) {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			return ds
		}
	}
	t.Fatalf("%s renders no DaemonSet", dir)
	return nil
}

// mountPodOverlays are the overlays of deploy/ that run mount pods, with
// the volume plugin each registers for. Every test of a mount pod's
// properties iterates over them; TestEveryOverlayListed fails when a
// directory of deploy/ renders a DaemonSet and is not listed here.
var mountPodOverlays = []struct{ overlay, plugin string }{
	{"glusterfs", "kubernetes.io/glusterfs"},
	{"rbd", "kubernetes.io/rbd"},
	{"cephfs", "kubernetes.io/cephfs"},
}

// installsFlexvolume reports whether the overlay's mount pod installs a
// Flexvolume driver on the node.
func installsFlexvolume(t *testing.T, overlay string) bool {
	t.Helper()
	return envValue(daemonSet(t, overlay), hostinstall.EnvFlexvolumeDir) != ""
}

func TestPluginOverlays(t *testing.T) {
	for _, tc := range mountPodOverlays {
		t.Run(tc.overlay, func(t *testing.T) {
			// The DaemonSet, the Events RBAC of TestMountPodRBAC and, with a
			// Flexvolume driver, the policy of TestFlexvolumePolicy.
			want := []string{"ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"}
			if installsFlexvolume(t, tc.overlay) {
				want = append(want, "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
			}
			if got := kinds(render(t, tc.overlay)); !slices.Equal(got, want) {
				t.Errorf("renders %v, want %v", got, want)
			}
			checkDaemonSet(t, daemonSet(t, tc.overlay), tc.overlay, tc.plugin)
		})
	}
}

// kinds returns the sorted kinds of objs.
func kinds(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, reflect.TypeOf(o).Elem().Name())
	}
	slices.Sort(out)
	return out
}

// TestEveryOverlayListed: every kustomization of deploy/ that renders a
// DaemonSet is in mountPodOverlays, and every one of deploy/csi in
// csiOverlays, so that no overlay escapes the tests of the mount pod's or
// the CSI driver's properties.
func TestEveryOverlayListed(t *testing.T) {
	dirs, err := filepath.Glob("*/kustomization.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no kustomization in deploy/: %v", err)
	}
	csiDirs, err := filepath.Glob("csi/*/kustomization.yaml")
	if err != nil || len(csiDirs) == 0 {
		t.Fatalf("no kustomization in deploy/csi: %v", err)
	}
	for _, k := range append(dirs, csiDirs...) {
		dir := filepath.Dir(k)
		if dir == "base" || dir == "uninstall" {
			continue // rendered through the overlays; not a mount pod (uninstall_test.go)
		}
		if !slices.ContainsFunc(renderResources(t, dir), func(r *resource.Resource) bool { return r.GetKind() == "DaemonSet" }) {
			continue
		}
		if strings.HasPrefix(dir, "csi/") {
			if !slices.ContainsFunc(csiOverlays, func(o csiOverlay) bool { return o.overlay == dir }) {
				t.Errorf("deploy/%s renders a DaemonSet but is not in csiOverlays: the CSI tests do not see it", dir)
			}
			continue
		}
		if !slices.ContainsFunc(mountPodOverlays, func(o struct{ overlay, plugin string }) bool { return o.overlay == dir }) {
			t.Errorf("deploy/%s renders a DaemonSet but is not in mountPodOverlays: the mount pod tests do not see it", dir)
		}
	}
}

func checkDaemonSet(t *testing.T, ds *appsv1.DaemonSet, overlay, plugin string) {
	t.Helper()
	expect := func(cond bool, format string, args ...any) {
		t.Helper()
		if !cond {
			t.Errorf("%s: "+format, append([]any{ds.Name}, args...)...)
		}
	}
	expect(ds.Name == overlay+"-mountpod", "name, want %s-mountpod", overlay)
	expect(ds.Namespace == mountNamespace(t), "namespace %q, want deploy/namespace's %q", ds.Namespace, mountNamespace(t))
	expect(ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType, "update strategy %q, want OnDelete", ds.Spec.UpdateStrategy.Type)
	for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/part-of"} {
		expect(ds.Labels[l] != "", "label %s missing", l)
		expect(ds.Spec.Template.Labels[l] != "", "pod label %s missing", l)
	}
	expect(ds.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] == overlay+"-mountpod",
		"selector %v does not single out this overlay's pods", ds.Spec.Selector.MatchLabels)
	for k, v := range ds.Spec.Selector.MatchLabels {
		expect(ds.Spec.Template.Labels[k] == v, "selector %s=%s does not match the pod template", k, v)
	}

	pod := ds.Spec.Template.Spec
	expect(pod.HostNetwork, "not host network")
	// FUSE daemons in scopes outlive the pod only in the host's PID
	// namespace (docs/scopes.md).
	expect(pod.HostPID, "not host PID namespace: a FUSE daemon would die with the container")
	expect(pod.DNSPolicy == corev1.DNSClusterFirstWithHostNet, "dnsPolicy %q", pod.DNSPolicy)
	expect(pod.PriorityClassName == "system-node-critical", "priorityClassName %q", pod.PriorityClassName)
	expect(slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "mountcontainers.io/upgrading" && tol.Effect == corev1.TaintEffectNoSchedule &&
			tol.Operator == corev1.TolerationOpExists
	}), "does not tolerate the rollout taint: %+v", pod.Tolerations)

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	expect(c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged, "container not privileged")
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for name, field := range map[string]string{"MOUNTPOD_POD_NAMESPACE": "metadata.namespace", "MOUNTPOD_POD_NAME": "metadata.name", "MOUNTPOD_POD_UID": "metadata.uid"} {
		e := env[name]
		expect(e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field,
			"env %s is not the downward API field %s", name, field)
	}
	expect(env["MOUNTPOD_CONTAINER_NAME"].Value == c.Name, "MOUNTPOD_CONTAINER_NAME %q, container is %q", env["MOUNTPOD_CONTAINER_NAME"].Value, c.Name)
	expect(env["MOUNTPOD_PLUGINS"].Value == plugin, "MOUNTPOD_PLUGINS %q, want %q", env["MOUNTPOD_PLUGINS"].Value, plugin)
	regDir := env["MOUNTPOD_REGISTRATION_DIR"].Value
	// The image has no ceph-fuse for arm64 (images/Dockerfile): the cephfs
	// mount pod keeps off arm64 nodes, the others run on every node.
	offArm64 := false
	if a := pod.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		// Every term (they are alternatives) keeps off arm64.
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		offArm64 = len(terms) > 0 && !slices.ContainsFunc(terms, func(term corev1.NodeSelectorTerm) bool {
			return !slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
				return e.Key == corev1.LabelArchStable && e.Operator == corev1.NodeSelectorOpNotIn && slices.Equal(e.Values, []string{"arm64"})
			})
		})
	}
	expect(offArm64 == (plugin == "kubernetes.io/cephfs"), "%s mount pod: kept off arm64 nodes %t (affinity %+v)", plugin, offArm64, pod.Affinity)

	expect(c.ReadinessProbe != nil && c.ReadinessProbe.Exec != nil &&
		strings.HasSuffix(c.ReadinessProbe.Exec.Command[0], "mountpod") &&
		slices.Equal(c.ReadinessProbe.Exec.Command[1:], []string{"check"}),
		"readiness probe is not `mountpod check`: %+v", c.ReadinessProbe)
	expect(!c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero(), "no resource requests")

	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	mountPaths := map[string]bool{}
	for _, m := range c.VolumeMounts {
		expect(!mountPaths[m.MountPath], "%s mounted twice", m.MountPath)
		mountPaths[m.MountPath] = true
		mounts[m.Name] = m
		v, ok := vols[m.Name]
		expect(ok, "volume mount %s has no volume", m.Name)
		expect(ok && v.HostPath != nil, "volume %s is not a hostPath", m.Name)
	}
	kubelet := mounts["kubelet-dir"]
	expect(kubelet.MountPropagation != nil && *kubelet.MountPropagation == corev1.MountPropagationBidirectional,
		"kubelet directory mount is not Bidirectional")
	expect(vols["kubelet-dir"].HostPath != nil && vols["kubelet-dir"].HostPath.Path == kubelet.MountPath,
		"kubelet directory mounted at %s, host path differs: mount paths would not match", kubelet.MountPath)
	expect(strings.HasPrefix(regDir, kubelet.MountPath+"/"), "registration dir %s is not under the kubelet mount %s", regDir, kubelet.MountPath)
	expect(mounts["dev"].MountPath == "/dev", "/dev not mounted")
	cg := mounts["cgroup"]
	expect(cg.MountPath == "/sys/fs/cgroup" && !cg.ReadOnly && vols["cgroup"].HostPath != nil && vols["cgroup"].HostPath.Path == "/sys/fs/cgroup",
		"the host's cgroup file system is not mounted writable at /sys/fs/cgroup (%+v): scopes cannot be made", cg)
	expect(env["MOUNTPOD_SCOPES"].Value == "true" && env["MOUNTPOD_SCOPE_CGROUP_ROOT"].Value == cg.MountPath,
		"scopes not on, or their cgroup root %q is not the mounted one", env["MOUNTPOD_SCOPE_CGROUP_ROOT"].Value)
	expect(mounts["systemd-run"].MountPath == "/run/systemd" && vols["systemd-run"].HostPath != nil && vols["systemd-run"].HostPath.Path == "/run/systemd",
		"systemd's runtime directory is not mounted: on systemd hosts scopes could not be systemd units")
	if overlay == "glusterfs" {
		expect(mounts["glusterfs-log"].MountPath == "/var/log/glusterfs" && vols["glusterfs-log"].HostPath != nil,
			"the glusterfs client's logs are not on a hostPath: they would go with the container while its daemons live on")
	}
	if overlay == "cephfs" {
		// The driver writes the key file on the node; ceph-fuse reads it
		// here, by the same path.
		sec := mounts["secrets"]
		expect(sec.MountPath != "" && sec.MountPath == env["MOUNTPOD_FLEXVOLUME_SECRETS_DIR"].Value && vols["secrets"].HostPath != nil && vols["secrets"].HostPath.Path == sec.MountPath,
			"the secrets directory (%+v, env %q) is not a hostPath mounted at its node path", sec, env["MOUNTPOD_FLEXVOLUME_SECRETS_DIR"].Value)
		expect(strings.HasPrefix(sec.MountPath, "/run/"), "secrets directory %s is not under /run, the tmpfs of systemd nodes", sec.MountPath)
		expect(env["MOUNTPOD_FLEXVOLUME_DRIVER"].Value == "mountcontainers.io~cephfs", "driver %q", env["MOUNTPOD_FLEXVOLUME_DRIVER"].Value)
		expect(mounts["ceph-log"].MountPath == "/var/log/ceph" && vols["ceph-log"].HostPath != nil,
			"ceph-fuse's logs are not on a hostPath: they would go with the container while its daemons live on")
	}
	expect(mounts["lib-modules"].MountPath != "" && mounts["lib-modules"].ReadOnly, "lib-modules not mounted read-only")
	// `rbd map` writes /sys/bus/rbd; no other plugin may write /sys.
	sys := mounts["sys"]
	if overlay == "rbd" {
		expect(sys.MountPath == "/sys" && !sys.ReadOnly, "/sys not mounted writable (%+v): rbd map cannot write /sys/bus/rbd", sys)
	} else {
		expect(sys.MountPath == "/sys" && sys.ReadOnly, "/sys not mounted read-only (%+v)", sys)
	}
}

// TestStrictDecodeCatchesTypos guards the guard: a misspelled field must fail.
func TestStrictDecodeCatchesTypos(t *testing.T) {
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	y := []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  updateStrategi:\n    type: OnDelete\n")
	if _, _, err := ser.Decode(y, nil, nil); err == nil {
		t.Fatal("strict decoding accepted a misspelled field")
	} else if !bytes.Contains([]byte(fmt.Sprint(err)), []byte("updateStrategi")) {
		t.Fatalf("error does not name the field: %v", err)
	}
}
