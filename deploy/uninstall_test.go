package deploy_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
)

// TestUninstallMatchesOverlays: deploy/uninstall removes what the mount pod
// and CSI overlays place on a node: their plugins' registrations and
// scopes (the same directory and parent), the Flexvolume drivers and the
// shim where the overlays install them, and every node directory they
// write through a hostPath of their own (logs, secrets, exec batches),
// which must lie in one that `mountpod uninstall` removes.
func TestUninstallMatchesOverlays(t *testing.T) {
	u := daemonSet(t, "uninstall")
	if len(u.Spec.Template.Spec.InitContainers) != 1 {
		t.Fatalf("deploy/uninstall: want one init container, got %d", len(u.Spec.Template.Spec.InitContainers))
	}
	c := u.Spec.Template.Spec.InitContainers[0]
	env := func(name string) string {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
		return ""
	}
	if !slices.Equal(c.Args, []string{"uninstall"}) || !u.Spec.Template.Spec.HostPID || c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("deploy/uninstall: want `mountpod uninstall`, privileged, in the host's PID namespace: %+v", c)
	}
	// The node's root, with the node's mounts: one made after the pod
	// started is seen as one, one unmounted on the node is not held.
	hostRoot := env("MOUNTPOD_HOST_ROOT")
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == hostRoot && m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationHostToContainer &&
			slices.ContainsFunc(u.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
				return v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == "/"
			})
	}) {
		t.Errorf("deploy/uninstall: MOUNTPOD_HOST_ROOT=%q is not the node's / mounted with HostToContainer propagation", hostRoot)
	}
	plugins := strings.Split(env("MOUNTPOD_PLUGINS"), ",")
	removed := []string{hostinstall.DefaultRunDir, hostinstall.DefaultLogDir, env("MOUNTPOD_KUBELET_DIR")}
	for _, o := range mountPodOverlays {
		ds := daemonSet(t, o.overlay)
		if !slices.Contains(plugins, o.plugin) {
			t.Errorf("deploy/uninstall does not remove plugin %s (deploy/%s)", o.plugin, o.overlay)
		}
		for _, name := range []string{"MOUNTPOD_REGISTRATION_DIR", "MOUNTPOD_SCOPES", "MOUNTPOD_SCOPE_CGROUP_ROOT", "MOUNTPOD_SCOPE_PARENT"} {
			if got, want := env(name), envValue(ds, name); got != want {
				t.Errorf("deploy/uninstall: %s=%q, deploy/%s's is %q", name, got, o.overlay, want)
			}
		}
		if d := envValue(ds, hostinstall.EnvFlexvolumeDir); d != "" {
			if got := env(hostinstall.EnvFlexvolumeDir); got != d {
				t.Errorf("deploy/uninstall: %s=%q, deploy/%s installs into %q", hostinstall.EnvFlexvolumeDir, got, o.overlay, d)
			}
			driver := envValue(ds, hostinstall.EnvFlexvolumeDriver)
			if driver == "" {
				driver = "mountcontainers.io~glusterfs"
			}
			if !slices.Contains(hostinstall.DefaultDrivers, driver) {
				t.Errorf("mountpod uninstall does not remove the Flexvolume driver %s of deploy/%s", driver, o.overlay)
			}
		}
		if d := envValue(ds, "MOUNTPOD_INSTALL_SHIM_DIR"); d != "" && env("MOUNTPOD_INSTALL_SHIM_DIR") != d {
			t.Errorf("deploy/uninstall: MOUNTPOD_INSTALL_SHIM_DIR=%q, deploy/%s installs into %q", env("MOUNTPOD_INSTALL_SHIM_DIR"), o.overlay, d)
		}
		checkHostPaths(t, o.overlay, ds.Spec.Template.Spec.Volumes, removed)
	}
	for _, o := range csiOverlays {
		if !slices.Contains(hostinstall.DefaultCSIDrivers, o.fs+".mountcontainers.io") {
			t.Errorf("mountpod uninstall does not remove the sockets of the CSI driver of deploy/%s", o.overlay)
		}
		for _, obj := range render(t, o.overlay) {
			switch w := obj.(type) {
			case *appsv1.DaemonSet:
				checkHostPaths(t, o.overlay, w.Spec.Template.Spec.Volumes, removed)
			case *appsv1.Deployment:
				checkHostPaths(t, o.overlay, w.Spec.Template.Spec.Volumes, removed)
			}
		}
	}
}

// checkHostPaths fails for a hostPath of overlay's that the mount pod or
// driver writes under /var/log or /run (its own directories) and that no
// directory of removed holds.
func checkHostPaths(t *testing.T, overlay string, vols []corev1.Volume, removed []string) {
	t.Helper()
	for _, v := range vols {
		if v.HostPath == nil {
			continue
		}
		p := v.HostPath.Path
		if !strings.HasPrefix(p, "/var/log/") && !strings.HasPrefix(p, "/run/mountcontainers") {
			continue
		}
		if !slices.ContainsFunc(removed, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") }) {
			t.Errorf("deploy/%s writes %s on the node (volume %s), which mountpod uninstall does not remove", overlay, p, v.Name)
		}
	}
}
