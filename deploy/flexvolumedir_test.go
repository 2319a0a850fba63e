package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
)

// TestFlexvolumeDirComponents: each component of deploy/flexvolume-dir,
// on each overlay that installs a Flexvolume driver, moves the install
// directory, its mount in the pod and its host path together, to its
// platform's directory (and, on GKE, the shim's off the read-only root),
// as an overlay of a user's builds them. Only rendered here: neither
// platform runs in the tests.
func TestFlexvolumeDirComponents(t *testing.T) {
	deploy, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for component, want := range map[string]string{
		"gke":       "/home/kubernetes/flexvolume",
		"openshift": "/etc/kubernetes/kubelet-plugins/volume/exec",
	} {
		for _, overlay := range []string{"glusterfs", "cephfs"} {
			t.Run(component+"/"+overlay, func(t *testing.T) {
				dir := t.TempDir()
				// kustomize takes relative paths only, as a user's overlay
				// beside a checkout would write them.
				base, err1 := filepath.Rel(dir, filepath.Join(deploy, overlay))
				comp, err2 := filepath.Rel(dir, filepath.Join(deploy, "flexvolume-dir", component))
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				comps := comp
				if component == "gke" && overlay == "glusterfs" {
					shim, err := filepath.Rel(dir, filepath.Join(deploy, "flexvolume-dir", "gke-shim"))
					if err != nil {
						t.Fatal(err)
					}
					comps += ", " + shim
				}
				k := "resources: [" + base + "]\ncomponents: [" + comps + "]\n"
				if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
					t.Fatal(err)
				}
				ds := daemonSet(t, dir)
				if got := envValue(ds, hostinstall.EnvFlexvolumeDir); got != want {
					t.Errorf("%s = %q, want %q", hostinstall.EnvFlexvolumeDir, got, want)
				}
				var mount, host string
				for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
					if m.Name == "flexvolume-dir" {
						mount = m.MountPath
					}
				}
				for _, v := range ds.Spec.Template.Spec.Volumes {
					if v.Name == "flexvolume-dir" && v.HostPath != nil {
						host = v.HostPath.Path
					}
				}
				if mount != want || host != want {
					t.Errorf("flexvolume-dir mounted at %q from the host's %q, want both %q", mount, host, want)
				}
				// Container-Optimized OS's root is read-only: with
				// gke-shim, glusterfs's shim goes where the kubelet's own
				// files are. cephfs installs no shim.
				if overlay != "glusterfs" {
					return
				}
				wantShim := "/opt/mountcontainers/bin"
				if component == "gke" {
					wantShim = "/home/kubernetes/mountcontainers/bin"
				}
				if got := envValue(ds, "MOUNTPOD_INSTALL_SHIM_DIR"); got != wantShim {
					t.Errorf("MOUNTPOD_INSTALL_SHIM_DIR = %q, want %q", got, wantShim)
				}
				for _, v := range ds.Spec.Template.Spec.Volumes {
					if v.Name == "shim-dir" && (v.HostPath == nil || v.HostPath.Path != wantShim) {
						t.Errorf("shim-dir from %+v, want the host's %s", v.HostPath, wantShim)
					}
				}
			})
		}
	}
}
