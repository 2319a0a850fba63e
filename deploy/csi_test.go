package deploy_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
	"github.com/mountcontainers/mountcontainers/pkg/cri"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// csiOverlay is an overlay of deploy/csi: the file system its driver
// mounts, and whether it runs the controller with the external-provisioner.
type csiOverlay struct {
	overlay, fs string
	controller  bool
}

// csiOverlays are the overlays of deploy/csi. TestEveryOverlayListed fails
// when a kustomization there renders a DaemonSet and is not listed here.
var csiOverlays = []csiOverlay{
	{"csi/glusterfs", "glusterfs", true},
	{"csi/cephfs", "cephfs", true},
}

const (
	// driverContainer is the name of the csi-driver container, the only
	// privileged one (images/csi-driver/Dockerfile and the manifests say
	// why).
	driverContainer      = "csi-driver"
	provisionerContainer = "csi-provisioner"
	provisionerImage     = "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0"
	csiImage             = "localhost/mountcontainers/csi-driver:dev"
	tokenPath            = "/var/run/secrets/kubernetes.io/serviceaccount"
)

func (o csiOverlay) driverName() string { return o.fs + ".mountcontainers.io" }

// csiObjects renders the overlay and returns its objects by kind.
type csiObjects struct {
	all         []runtime.Object
	driver      *storagev1.CSIDriver
	node        *appsv1.DaemonSet
	controller  *appsv1.Deployment
	sa          *corev1.ServiceAccount
	clusterRole *rbacv1.ClusterRole
	crb         *rbacv1.ClusterRoleBinding
	role        *rbacv1.Role
	rb          *rbacv1.RoleBinding
}

func renderCSI(t *testing.T, dir string) csiObjects {
	t.Helper()
	var c csiObjects
	c.all = render(t, dir)
	for _, o := range c.all {
		switch o := o.(type) {
		case *storagev1.CSIDriver:
			c.driver = o
		case *appsv1.DaemonSet:
			c.node = o
		case *appsv1.Deployment:
			c.controller = o
		case *corev1.ServiceAccount:
			c.sa = o
		case *rbacv1.ClusterRole:
			c.clusterRole = o
		case *rbacv1.ClusterRoleBinding:
			c.crb = o
		case *rbacv1.Role:
			c.role = o
		case *rbacv1.RoleBinding:
			c.rb = o
		}
	}
	return c
}

// podTemplates are the overlay's pod templates by workload name.
func (c csiObjects) podTemplates() map[string]corev1.PodSpec {
	m := map[string]corev1.PodSpec{}
	if c.node != nil {
		m[c.node.Name] = c.node.Spec.Template.Spec
	}
	if c.controller != nil {
		m[c.controller.Name] = c.controller.Spec.Template.Spec
	}
	return m
}

func container(pod corev1.PodSpec, name string) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	return nil
}

// TestCSIOverlays: each overlay of deploy/csi renders exactly its objects,
// every namespaced one in deploy/namespace's namespace, with the CSIDriver
// of its file system, and the driver's image as the images: entry names it.
func TestCSIOverlays(t *testing.T) {
	for _, o := range csiOverlays {
		t.Run(o.overlay, func(t *testing.T) {
			c := renderCSI(t, o.overlay)
			want := []string{"CSIDriver", "DaemonSet"}
			if o.controller {
				want = append(want, "ClusterRole", "ClusterRoleBinding", "Deployment", "Role", "RoleBinding", "ServiceAccount")
				slices.Sort(want)
			}
			if got := kinds(c.all); !slices.Equal(got, want) {
				t.Errorf("renders %v, want %v", got, want)
			}
			if c.driver == nil || c.driver.Name != o.driverName() {
				t.Fatalf("CSIDriver %+v, want %s", c.driver, o.driverName())
			}
			if c.driver.Spec.AttachRequired == nil || *c.driver.Spec.AttachRequired ||
				!slices.Equal(c.driver.Spec.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
				t.Errorf("CSIDriver %s: attachRequired %v, modes %v; want no attach, Persistent only", c.driver.Name, c.driver.Spec.AttachRequired, c.driver.Spec.VolumeLifecycleModes)
			}
			for name, pod := range c.podTemplates() {
				d := container(pod, driverContainer)
				if d == nil {
					t.Errorf("%s: no %s container", name, driverContainer)
					continue
				}
				if d.Image != csiImage {
					t.Errorf("%s: image %q, want the images: entry's %q", name, d.Image, csiImage)
				}
				if p := container(pod, provisionerContainer); p != nil && p.Image != provisionerImage {
					t.Errorf("%s: provisioner image %q, want %q", name, p.Image, provisionerImage)
				}
			}
		})
	}
}

// TestCSINodePlugin: the node DaemonSet runs the driver of its file system,
// registering itself, on every node whatever its taints, without the API,
// with the kubelet's directory at its node path and Bidirectional (the
// registration directories and sockets below it, and nothing mounted
// below it on its own), the CRI socket's directory read-only, and for
// CephFS the secrets directory at its node path.
func TestCSINodePlugin(t *testing.T) {
	for _, o := range csiOverlays {
		t.Run(o.overlay, func(t *testing.T) {
			ds := renderCSI(t, o.overlay).node
			if ds == nil {
				t.Fatal("no DaemonSet")
			}
			expect := func(cond bool, format string, args ...any) {
				t.Helper()
				if !cond {
					t.Errorf("%s: "+format, append([]any{ds.Name}, args...)...)
				}
			}
			expect(ds.Name == "csi-"+o.fs+"-node", "name, want csi-%s-node", o.fs)
			expect(ds.Namespace == mountNamespace(t), "namespace %q, want %q", ds.Namespace, mountNamespace(t))
			us := ds.Spec.UpdateStrategy
			expect(us.Type == appsv1.RollingUpdateDaemonSetStrategyType && us.RollingUpdate != nil &&
				us.RollingUpdate.MaxUnavailable != nil && us.RollingUpdate.MaxUnavailable.IntValue() == 1,
				"update strategy %+v, want RollingUpdate with maxUnavailable 1", us)
			pod := ds.Spec.Template.Spec
			expect(pod.PriorityClassName == "system-node-critical", "priorityClassName %q", pod.PriorityClassName)
			expect(pod.TerminationGracePeriodSeconds != nil && *pod.TerminationGracePeriodSeconds >= 30,
				"terminationGracePeriodSeconds %v", pod.TerminationGracePeriodSeconds)
			// hostPID: the exec socket's peer check (pkg/exec) sees the
			// mount pod's process only in the node's PID namespace.
			expect(!pod.HostNetwork && pod.HostPID && !pod.HostIPC, "host namespaces: network %v, PID %v (want the node's), IPC %v", pod.HostNetwork, pod.HostPID, pod.HostIPC)
			expect(slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
				return tol.Key == "" && tol.Operator == corev1.TolerationOpExists && tol.Effect == "" && tol.TolerationSeconds == nil
			}), "does not tolerate every taint: %+v", pod.Tolerations)
			for _, tol := range pod.Tolerations {
				expect(tol.TolerationSeconds == nil, "toleration %+v is bounded", tol)
			}
			expect(pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken, "mounts a token: the node plugin asks nothing of the API")
			if len(pod.Containers) != 1 || pod.Containers[0].Name != driverContainer {
				t.Fatalf("containers %v, want %s alone (it registers itself: no node-driver-registrar)", pod.Containers, driverContainer)
			}
			c := pod.Containers[0]
			args := parseArgs(t, c.Args)
			expect(args["filesystem"] == o.fs, "--filesystem=%q", args["filesystem"])
			expect(args["register"] == "true", "does not --register with the kubelet (%q)", args["register"])
			_, ctl := args["controller"]
			expect(!ctl, "the node plugin serves the controller")
			expect(c.LivenessProbe == nil, "liveness probe %+v: the driver serves no health endpoint", c.LivenessProbe)
			env := map[string]corev1.EnvVar{}
			for _, e := range c.Env {
				env[e.Name] = e
			}
			nn := env["CSI_DRIVER_NODE_ID"]
			expect(nn.ValueFrom != nil && nn.ValueFrom.FieldRef != nil && nn.ValueFrom.FieldRef.FieldPath == "spec.nodeName",
				"CSI_DRIVER_NODE_ID is not the downward API's spec.nodeName: %+v", nn)

			mounts := checkDriverMounts(t, ds.Name, pod, c, args)
			secrets := mounts[cmpOr(args["secrets-dir"], volume.DefaultSecretsDir)]
			if o.fs == "cephfs" {
				expect(secrets != nil && !secrets.ReadOnly, "the secrets directory %s is not mounted writable at its node path", cmpOr(args["secrets-dir"], volume.DefaultSecretsDir))
			} else {
				expect(secrets == nil, "mounts the secrets directory: %s volumes have no secrets", o.fs)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseArgs returns the driver's flags by name ("true" for a bare
// boolean); it fails on an argument that is not --name or --name=value.
func parseArgs(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			t.Errorf("argument %q is not a flag", a)
			continue
		}
		name, value, found := strings.Cut(name, "=")
		if !found {
			value = "true"
		}
		m[name] = value
	}
	return m
}

// checkDriverMounts checks the mounts a driver container needs, node
// plugin or controller alike, and returns them by path: the kubelet's
// directory at its node path and Bidirectional, with the plugin
// registration, the driver's socket and the mount pods' registrations
// below it; nothing below it mounted on its own (it would propagate to the
// node); the CRI socket's directory read-only and HostToContainer; every
// hostPath at its node path.
func checkDriverMounts(t *testing.T, name string, pod corev1.PodSpec, c corev1.Container, args map[string]string) map[string]*corev1.VolumeMount {
	t.Helper()
	expect := func(cond bool, format string, args ...any) {
		t.Helper()
		if !cond {
			t.Errorf("%s: "+format, append([]any{name}, args...)...)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]*corev1.VolumeMount{}
	for i, m := range c.VolumeMounts {
		mounts[m.MountPath] = &c.VolumeMounts[i]
		v, ok := vols[m.Name]
		expect(ok, "volume mount %s has no volume", m.Name)
		if v.HostPath != nil {
			expect(v.HostPath.Path == m.MountPath, "hostPath %s mounted at %s: the paths the kubelet and the mount pod use would not match", v.HostPath.Path, m.MountPath)
		}
	}
	kubelet := cmpOr(args["kubelet-dir"], "/var/lib/kubelet")
	km := mounts[kubelet]
	expect(km != nil && vols[km.Name].HostPath != nil && km.MountPropagation != nil && *km.MountPropagation == corev1.MountPropagationBidirectional && !km.ReadOnly,
		"the kubelet directory %s is not a hostPath mounted writable and Bidirectional: %+v", kubelet, km)
	dirs := []string{
		filepath.Join(kubelet, "plugins_registry"),
		filepath.Join(kubelet, "plugins"),
		cmpOr(args["registration-dir"], registration.DefaultDir),
		cmpOr(args["work-dir"], kubelet),
	}
	if e := args["endpoint"]; e != "" {
		dirs = append(dirs, filepath.Dir(e))
	}
	for _, p := range dirs {
		if !strings.HasPrefix(p+"/", kubelet+"/") && mounts[p] == nil {
			expect(false, "%s is neither below the kubelet directory nor mounted", p)
		}
	}
	for _, m := range c.VolumeMounts {
		for _, b := range c.VolumeMounts {
			if b.MountPropagation != nil && *b.MountPropagation == corev1.MountPropagationBidirectional && strings.HasPrefix(m.MountPath, b.MountPath+"/") {
				expect(false, "%s is mounted below the Bidirectional %s: the mount would propagate to the node", m.MountPath, b.MountPath)
			}
		}
	}
	// The exec batch directory: the node's, writable, so that the calls
	// through CRI meet there (with the Flexvolume driver's).
	if b := cmpOr(args["exec-batch-dir"], mcexec.DefaultBatchDir); b != "none" {
		m := mounts[b]
		expect(m != nil && vols[m.Name].HostPath != nil && !m.ReadOnly,
			"the exec batch directory %s is not the node's, mounted writable: %+v", b, m)
	}
	var criDirs []string
	for _, e := range append([]string{args["runtime-endpoint"]}, cri.DefaultEndpoints...) {
		if e == "" {
			continue
		}
		p, err := cri.SocketPath(e)
		if err != nil {
			t.Fatal(err)
		}
		criDirs = append(criDirs, filepath.Dir(p))
	}
	found := false
	for _, d := range criDirs {
		if m := mounts[d]; m != nil {
			found = true
			expect(m.ReadOnly && m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationHostToContainer,
				"the CRI socket's directory %s is not read-only and HostToContainer: %+v", d, m)
		}
	}
	expect(found, "none of the CRI sockets' directories %v is mounted", criDirs)
	return mounts
}

// TestCSIController: each overlay's controller runs one driver in
// --controller mode, not registered with the kubelet, serving its socket
// in an emptyDir the external-provisioner alone shares, on a node of its
// file system's mount pod, never two at once; the cephfs one with the
// secrets directory for the provisioner secret's key.
func TestCSIController(t *testing.T) {
	for _, o := range csiOverlays {
		t.Run(o.overlay, func(t *testing.T) {
			d := renderCSI(t, o.overlay).controller
			if !o.controller {
				if d != nil {
					t.Fatalf("renders the controller %s, but the %s driver provisions nothing", d.Name, o.fs)
				}
				return
			}
			if d == nil {
				t.Fatal("no controller Deployment")
			}
			expect := func(cond bool, format string, args ...any) {
				t.Helper()
				if !cond {
					t.Errorf("%s: "+format, append([]any{d.Name}, args...)...)
				}
			}
			expect(d.Name == "csi-"+o.fs+"-controller", "name, want csi-%s-controller", o.fs)
			expect(d.Spec.Replicas != nil && *d.Spec.Replicas == 1, "replicas %v, want 1", d.Spec.Replicas)
			expect(d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType, "strategy %q: a starting controller detaches its work directory's mounts, a running one's among them", d.Spec.Strategy.Type)
			pod := d.Spec.Template.Spec
			expect(!pod.HostNetwork && pod.HostPID && !pod.HostIPC, "host namespaces: network %v, PID %v (want the node's), IPC %v", pod.HostNetwork, pod.HostPID, pod.HostIPC)
			if len(pod.Containers) != 2 {
				t.Fatalf("%d containers, want the driver and the provisioner", len(pod.Containers))
			}
			drv, prov := container(pod, driverContainer), container(pod, provisionerContainer)
			if drv == nil || prov == nil {
				t.Fatalf("containers %s and %s missing", driverContainer, provisionerContainer)
			}
			args := parseArgs(t, drv.Args)
			expect(args["filesystem"] == o.fs && args["controller"] == "true" && args["register"] == "false",
				"driver args %v: want --filesystem=%s --controller --register=false", drv.Args, o.fs)
			mounts := checkDriverMounts(t, d.Name, pod, *drv, args)
			secrets := mounts[cmpOr(args["secrets-dir"], volume.DefaultSecretsDir)]
			if o.fs == "cephfs" {
				expect(secrets != nil && !secrets.ReadOnly, "the secrets directory %s is not mounted writable at its node path", cmpOr(args["secrets-dir"], volume.DefaultSecretsDir))
			} else {
				expect(secrets == nil, "mounts the secrets directory: %s volumes have no secrets", o.fs)
			}
			nn := slices.IndexFunc(drv.Env, func(e corev1.EnvVar) bool {
				return e.Name == "CSI_DRIVER_NODE_ID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			})
			expect(nn >= 0, "no CSI_DRIVER_NODE_ID from spec.nodeName (--node-id is required)")

			// The socket: the driver's --endpoint is the provisioner's
			// --csi-address, in an emptyDir both mount at the same path.
			pargs := parseArgs(t, prov.Args)
			sock := args["endpoint"]
			expect(sock != "" && pargs["csi-address"] == sock, "driver --endpoint %q, provisioner --csi-address %q", sock, pargs["csi-address"])
			expect(pargs["leader-election"] == "true", "provisioner --leader-election=%q", pargs["leader-election"])
			expect(pargs["timeout"] != "", "provisioner without --timeout: its 10s default cancels mounts in progress")
			// Not root: the driver gives its socket to the provisioner's
			// group (--socket-group), the one right the sidecar needs.
			psc := prov.SecurityContext
			expect(psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot && psc.RunAsUser != nil && *psc.RunAsUser != 0 &&
				psc.RunAsGroup != nil && *psc.RunAsGroup != 0 && args["socket-group"] == fmt.Sprint(*psc.RunAsGroup),
				"the provisioner must run as a user and group that are not root's, and the driver's --socket-group (%q) must be that group: %+v", args["socket-group"], psc)
			shared := func(c *corev1.Container) string {
				for _, m := range c.VolumeMounts {
					if strings.HasPrefix(sock, m.MountPath+"/") {
						return m.Name
					}
				}
				return ""
			}
			sv := shared(drv)
			expect(sv != "" && sv == shared(prov) && slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == sv && v.EmptyDir != nil }),
				"the socket %s is not in an emptyDir both containers mount", sock)

			// On a node of the file system's mount pod, by the labels
			// deploy/<fs> gives its pods.
			mp := daemonSet(t, o.fs).Spec.Template
			aff := pod.Affinity
			ok := aff != nil && aff.PodAffinity != nil && len(aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 1
			if ok {
				term := aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
				ok = term.TopologyKey == corev1.LabelHostname && term.LabelSelector != nil && len(term.LabelSelector.MatchLabels) > 0 &&
					(len(term.Namespaces) == 0 && d.Namespace == mp.Namespace || slices.Equal(term.Namespaces, []string{mountNamespace(t)}))
				for k, v := range term.LabelSelector.MatchLabels {
					ok = ok && mp.Labels[k] == v
				}
			}
			expect(ok, "not required on a node of the %s mount pod (its labels %v): %+v", o.fs, mp.Labels, aff)
		})
	}
}

// TestCSIContainersHardening: every CSI container has requests and a
// memory limit and adds no capability; only the driver containers are
// privileged (a Bidirectional mount and its binds need it; the Dockerfile
// says why root), with a read-only root; the provisioner is not
// privileged, cannot gain privileges, drops every capability and has a
// read-only root. A pod mounts the API token only into the provisioner.
func TestCSIContainersHardening(t *testing.T) {
	for _, o := range csiOverlays {
		t.Run(o.overlay, func(t *testing.T) {
			c := renderCSI(t, o.overlay)
			for name, pod := range c.podTemplates() {
				if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
					t.Errorf("%s: the pod mounts its token into every container", name)
				}
				if pod.SecurityContext != nil && (len(pod.SecurityContext.Sysctls) > 0 || pod.SecurityContext.SupplementalGroups != nil) {
					t.Errorf("%s: pod security context %+v", name, pod.SecurityContext)
				}
				if len(pod.InitContainers) > 0 || len(pod.EphemeralContainers) > 0 {
					t.Errorf("%s: init or ephemeral containers", name)
				}
				for _, ctr := range pod.Containers {
					r := ctr.Resources
					if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
						t.Errorf("%s/%s: resources %+v, want cpu and memory requests and a memory limit", name, ctr.Name, r)
					}
					sc := ctr.SecurityContext
					if sc == nil {
						t.Errorf("%s/%s: no security context", name, ctr.Name)
						continue
					}
					if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
						t.Errorf("%s/%s: adds capabilities %v", name, ctr.Name, sc.Capabilities.Add)
					}
					if len(ctr.Ports) > 0 {
						t.Errorf("%s/%s: ports %v: it serves unix sockets only", name, ctr.Name, ctr.Ports)
					}
					privileged := sc.Privileged != nil && *sc.Privileged
					if privileged != (ctr.Name == driverContainer) {
						t.Errorf("%s/%s: privileged %v; only the driver containers are", name, ctr.Name, privileged)
					}
					if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
						t.Errorf("%s/%s: root file system writable", name, ctr.Name)
					}
					tokenMounted := slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == tokenPath })
					if tokenMounted != (ctr.Name == provisionerContainer) {
						t.Errorf("%s/%s: API token mounted %v; the provisioner's alone", name, ctr.Name, tokenMounted)
					}
					if ctr.Name != provisionerContainer {
						continue
					}
					if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
						t.Errorf("%s/%s: may gain privileges", name, ctr.Name)
					}
					if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
						t.Errorf("%s/%s: capabilities %+v, want every one dropped", name, ctr.Name, sc.Capabilities)
					}
					if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
						t.Errorf("%s/%s: seccomp %+v, want RuntimeDefault", name, ctr.Name, sc.SeccompProfile)
					}
				}
				for _, v := range pod.Volumes {
					if v.Projected == nil {
						continue
					}
					for _, s := range v.Projected.Sources {
						if s.ServiceAccountToken != nil && (s.ServiceAccountToken.Audience != "" || s.ServiceAccountToken.ExpirationSeconds == nil || *s.ServiceAccountToken.ExpirationSeconds > 3607) {
							t.Errorf("%s: token %+v: want the API server's audience, bound as automount's (3607 s)", name, s.ServiceAccountToken)
						}
					}
				}
			}
		})
	}
}

// TestCSIProvisionerRBAC: the provisioner's account has exactly the
// external-provisioner's standard rules (and, for cephfs, reading the
// provisioner secrets StorageClasses name), cluster-wide and (its leader
// election's Lease) in its namespace, bound to it alone, and mounts no
// token by default.
func TestCSIProvisionerRBAC(t *testing.T) {
	for _, o := range csiOverlays {
		if !o.controller {
			continue
		}
		t.Run(o.overlay, func(t *testing.T) {
			c := renderCSI(t, o.overlay)
			if c.sa == nil || c.clusterRole == nil || c.crb == nil || c.role == nil || c.rb == nil {
				t.Fatalf("ServiceAccount, ClusterRole, ClusterRoleBinding, Role and RoleBinding: %v", kinds(c.all))
			}
			rule := func(group, resource string, verbs ...string) rbacv1.PolicyRule {
				return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
			}
			want := []rbacv1.PolicyRule{
				rule("", "persistentvolumes", "get", "list", "watch", "create", "delete", "patch"),
				rule("", "persistentvolumeclaims", "get", "list", "watch", "update"),
				rule("storage.k8s.io", "storageclasses", "get", "list", "watch"),
				rule("", "events", "list", "watch", "create", "update", "patch"),
				rule("storage.k8s.io", "csinodes", "get", "list", "watch"),
				rule("", "nodes", "get", "list", "watch"),
				rule("storage.k8s.io", "volumeattachments", "get", "list", "watch"),
			}
			if o.fs == "cephfs" {
				want = append(want, rule("", "secrets", "get"))
			}
			if !reflect.DeepEqual(c.clusterRole.Rules, want) {
				t.Errorf("ClusterRole rules\n%+v\nwant exactly\n%+v", c.clusterRole.Rules, want)
			}
			wantNS := []rbacv1.PolicyRule{rule("coordination.k8s.io", "leases", "get", "watch", "list", "delete", "update", "create")}
			if !reflect.DeepEqual(c.role.Rules, wantNS) {
				t.Errorf("Role rules\n%+v\nwant exactly\n%+v", c.role.Rules, wantNS)
			}
			if ns := mountNamespace(t); c.sa.Namespace != ns || c.role.Namespace != ns || c.rb.Namespace != ns {
				t.Errorf("ServiceAccount, Role, RoleBinding in %s, %s, %s; want %s", c.sa.Namespace, c.role.Namespace, c.rb.Namespace, ns)
			}
			if c.sa.AutomountServiceAccountToken == nil || *c.sa.AutomountServiceAccountToken {
				t.Errorf("ServiceAccount %s mounts its token by default", c.sa.Name)
			}
			only := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: c.sa.Name, Namespace: c.sa.Namespace}}
			if c.crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: c.clusterRole.Name}) || !reflect.DeepEqual(c.crb.Subjects, only) {
				t.Errorf("ClusterRoleBinding %+v does not bind %s to %v alone", c.crb, c.clusterRole.Name, only)
			}
			if c.rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: c.role.Name}) || !reflect.DeepEqual(c.rb.Subjects, only) {
				t.Errorf("RoleBinding %+v does not bind %s to %v alone", c.rb, c.role.Name, only)
			}
			if c.controller == nil || c.controller.Spec.Template.Spec.ServiceAccountName != c.sa.Name {
				t.Errorf("the controller does not run as %s", c.sa.Name)
			}
			if c.node != nil && c.node.Spec.Template.Spec.ServiceAccountName == c.sa.Name {
				t.Errorf("the node plugin runs as the provisioner's account")
			}
		})
	}
}

// driverFlags returns the flag names cmd/csi-driver defines: the Name of
// every cli flag literal in its main.go, and the logging package's.
func driverFlags(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../cmd/csi-driver/main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Flag") {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "cli" {
			return true
		}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Name" {
				continue
			}
			bl, ok := kv.Value.(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING {
				t.Fatalf("a flag of cmd/csi-driver is named by %T, not a string literal: teach driverFlags", kv.Value)
			}
			s, err := strconv.Unquote(bl.Value)
			if err != nil {
				t.Fatal(err)
			}
			names[s] = true
		}
		return true
	})
	for _, fl := range logging.Flags("") {
		for _, n := range fl.Names() {
			names[n] = true
		}
	}
	// The parse is right if it finds the flags the manifests rely on.
	for _, n := range []string{"filesystem", "register", "controller", "endpoint", "allowed-servers", "log-level"} {
		if !names[n] {
			t.Fatalf("cmd/csi-driver defines no --%s, or driverFlags no longer finds the flags (found %v)", n, names)
		}
	}
	return names
}

// TestCSIDriverArgs: every argument of a driver container names a flag
// cmd/csi-driver defines, with a value it accepts.
func TestCSIDriverArgs(t *testing.T) {
	flags := driverFlags(t)
	for _, o := range csiOverlays {
		t.Run(o.overlay, func(t *testing.T) {
			for name, pod := range renderCSI(t, o.overlay).podTemplates() {
				d := container(pod, driverContainer)
				if d == nil {
					t.Fatalf("%s: no %s container", name, driverContainer)
				}
				if len(d.Command) > 0 {
					t.Errorf("%s: command %v replaces the image's entry point", name, d.Command)
				}
				for flag, value := range parseArgs(t, d.Args) {
					if !flags[flag] {
						t.Errorf("%s: --%s is not a flag of cmd/csi-driver", name, flag)
					}
					if flag == "filesystem" && value != o.fs {
						t.Errorf("%s: --filesystem=%s in the %s overlay", name, value, o.fs)
					}
				}
			}
		})
	}
}

// TestCSIAllowedServers: the allow-list is the argument an overlay of
// yours replaces by index (deploy/README.md): in glusterfs empty by
// default, the same in the node plugin and the controller; in cephfs a
// placeholder the driver refuses, so that the monitors must be named.
func TestCSIAllowedServers(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range csiOverlays {
		t.Run(o.overlay, func(t *testing.T) {
			c := renderCSI(t, o.overlay)
			wantIndex := map[string]int{"csi-" + o.fs + "-node": 2, "csi-" + o.fs + "-controller": 4}
			var values []string
			for name, pod := range c.podTemplates() {
				args := container(pod, driverContainer).Args
				i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--allowed-servers=") })
				if i != wantIndex[name] {
					t.Errorf("%s: --allowed-servers is args/%d, want args/%d (deploy/README.md's overlay patches it there)", name, i, wantIndex[name])
					continue
				}
				values = append(values, strings.TrimPrefix(args[i], "--allowed-servers="))
			}
			for _, v := range values {
				if v != values[0] {
					t.Errorf("allow-lists differ: %q", values)
				}
			}
			_, err := fs.ParseAllowedServers(strings.Split(values[0], ","))
			switch o.fs {
			case "cephfs":
				if err == nil {
					t.Errorf("the shipped --allowed-servers=%s is accepted: the monitors would not have to be named", values[0])
				}
			default:
				if err != nil || values[0] != "" {
					t.Errorf("--allowed-servers=%q (%v), want empty by default", values[0], err)
				}
			}
			checkAllowedServersExample(t, string(readme), o)
		})
	}
}

// checkAllowedServersExample builds README.md's overlay of o that sets the
// allow-list, on the overlay in this tree: it must apply (its test
// operations pass) and give every driver container of o the same list, one
// the driver accepts.
func checkAllowedServersExample(t *testing.T, readme string, o csiOverlay) {
	t.Helper()
	remote := "github.com/mountcontainers/mountcontainers/deploy/" + o.overlay + "?ref=<the commit you built from>"
	var example string
	parts := strings.Split(readme, "```")
	for i := 1; i < len(parts); i += 2 {
		if strings.Contains(parts[i], remote) && strings.Contains(parts[i], "--allowed-servers=") {
			example = strings.TrimPrefix(parts[i], "yaml\n")
		}
	}
	if example == "" {
		t.Fatalf("README.md has no overlay on %s setting --allowed-servers", remote)
	}
	dir := t.TempDir()
	base, err := filepath.Abs(o.overlay)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(strings.Replace(example, remote, rel, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := renderCSI(t, dir)
	var lists []string
	for name, pod := range c.podTemplates() {
		for _, a := range container(pod, driverContainer).Args {
			if v, ok := strings.CutPrefix(a, "--allowed-servers="); ok {
				if _, err := fs.ParseAllowedServers(strings.Split(v, ",")); err != nil || v == "" {
					t.Errorf("README.md's overlay: %s --allowed-servers=%q (%v), want a list the driver accepts", name, v, err)
				}
				lists = append(lists, v)
			}
		}
	}
	if len(lists) != len(c.podTemplates()) || slices.ContainsFunc(lists, func(l string) bool { return l != lists[0] }) {
		t.Errorf("README.md's overlay sets the lists %q, want one in each of %d pods, the same", lists, len(c.podTemplates()))
	}
}

// TestCSIExamples: the examples beside the overlays decode strictly, are
// not part of them, and name their driver: the StorageClass with exactly
// the parameters CreateVolume reads, the static PersistentVolume with a
// node-stage secret for the key.
func TestCSIExamples(t *testing.T) {
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	decode := func(path string) []runtime.Object {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []runtime.Object
		for _, doc := range strings.Split(string(b), "\n---\n") {
			o, _, err := ser.Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, o)
		}
		return out
	}
	for _, tc := range []struct{ overlay, file string }{
		{"csi/glusterfs", "storageclass-example.yaml"},
		{"csi/cephfs", "storageclass-example.yaml"},
		{"csi/cephfs", "persistentvolume-example.yaml"},
	} {
		k, err := os.ReadFile(filepath.Join(tc.overlay, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var kust struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(k, &kust); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(kust.Resources, tc.file) {
			t.Errorf("%s lists %s: an example is applied by hand", tc.overlay, tc.file)
		}
		var o csiOverlay
		for _, c := range csiOverlays {
			if c.overlay == tc.overlay {
				o = c
			}
		}
		for _, obj := range decode(filepath.Join(tc.overlay, tc.file)) {
			switch obj := obj.(type) {
			case *storagev1.StorageClass:
				if obj.Provisioner != o.driverName() {
					t.Errorf("StorageClass %s: provisioner %s, want %s", obj.Name, obj.Provisioner, o.driverName())
				}
				known := []string{glusterfs.KeyServer, glusterfs.KeyServers, glusterfs.KeyVolume, glusterfs.KeyMountOptions}
				named := obj.Parameters[glusterfs.KeyVolume] != "" && obj.Parameters[glusterfs.KeyServer]+obj.Parameters[glusterfs.KeyServers] != ""
				if o.fs == "cephfs" {
					// And the secrets the external-provisioner hands
					// CreateVolume and the kubelet NodeStage.
					known = []string{cephfs.KeyMonitors, cephfs.KeyFS, cephfs.KeySubvolumeGroup, cephfs.KeyUser, cephfs.KeyMountOptions,
						"csi.storage.k8s.io/provisioner-secret-name", "csi.storage.k8s.io/provisioner-secret-namespace",
						"csi.storage.k8s.io/node-stage-secret-name", "csi.storage.k8s.io/node-stage-secret-namespace"}
					named = obj.Parameters[cephfs.KeyMonitors] != "" && obj.Parameters[cephfs.KeyFS] != "" &&
						obj.Parameters["csi.storage.k8s.io/provisioner-secret-name"] != "" && obj.Parameters["csi.storage.k8s.io/node-stage-secret-name"] != ""
				}
				for k := range obj.Parameters {
					if !slices.Contains(known, k) {
						t.Errorf("StorageClass %s: parameter %q is not one CreateVolume reads (%v)", obj.Name, k, known)
					}
				}
				if !named {
					t.Errorf("StorageClass %s does not name the administrator's volume and its secrets: %v", obj.Name, obj.Parameters)
				}
			case *corev1.PersistentVolume:
				s := obj.Spec.CSI
				if s == nil || s.Driver != o.driverName() || s.NodeStageSecretRef == nil || s.VolumeAttributes["monitors"] == "" {
					t.Errorf("PersistentVolume %s: %+v, want %s with monitors and a node-stage secret", obj.Name, s, o.driverName())
				}
			case *corev1.PersistentVolumeClaim:
			default:
				t.Errorf("%s: unexpected %T", tc.file, obj)
			}
		}
	}
}

// TestCSIImage: images/csi-driver/Dockerfile builds cmd/csi-driver static
// and copies it alone onto an empty image, where the manifests' entry
// point (the image's) finds it.
func TestCSIImage(t *testing.T) {
	b, err := os.ReadFile("../images/csi-driver/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := string(b)
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/csi-driver", "\nFROM --platform=${TARGETPLATFORM} scratch\n", `ENTRYPOINT ["/usr/local/bin/csi-driver"]`} {
		if !strings.Contains(d, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if n := strings.Count(d, "\nCOPY --from="); n != 1 {
		t.Errorf("%d COPY --from: the final image holds the driver alone", n)
	}
}
