package deploy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestGlusterfsInstallsHostBinaries checks what the glusterfs mount pod
// needs to install the Flexvolume driver and the shim: each directory is a
// hostPath mounted at the same path as on the node (the driver's settings
// and the shim's mapping name paths the node must understand), and the
// kubelet directory keeps the positions README.md's relocation overlay
// patches by index.
func TestGlusterfsInstallsHostBinaries(t *testing.T) {
	ds := daemonSet(t, "glusterfs")
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, tc := range []struct{ env, volume, path string }{
		{"MOUNTPOD_INSTALL_FLEXVOLUME_DIR", "flexvolume-dir", "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"},
		{"MOUNTPOD_INSTALL_SHIM_DIR", "shim-dir", "/opt/mountcontainers/bin"},
	} {
		if env[tc.env] != tc.path {
			t.Errorf("%s = %q, want %q", tc.env, env[tc.env], tc.path)
		}
		var mount *corev1.VolumeMount
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].Name == tc.volume {
				mount = &c.VolumeMounts[i]
			}
		}
		v := vols[tc.volume]
		switch {
		case mount == nil:
			t.Errorf("volume %s is not mounted", tc.volume)
		case mount.MountPath != env[tc.env]:
			t.Errorf("volume %s mounted at %s, but %s = %s", tc.volume, mount.MountPath, tc.env, env[tc.env])
		case mount.ReadOnly:
			t.Errorf("volume %s is read-only", tc.volume)
		case v.HostPath == nil || v.HostPath.Path != mount.MountPath:
			t.Errorf("volume %s: host path %+v differs from its mount path %s", tc.volume, v.HostPath, mount.MountPath)
		case v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate:
			t.Errorf("volume %s: host path type %v, want DirectoryOrCreate", tc.volume, v.HostPath.Type)
		}
	}
	if _, ok := env["MOUNTPOD_HOST_RUNTIME_ENDPOINT"]; !ok {
		t.Errorf("MOUNTPOD_HOST_RUNTIME_ENDPOINT is not set (empty is fine: it documents the setting)")
	}
	if c.Env[5].Name != "MOUNTPOD_REGISTRATION_DIR" || pod.Volumes[0].Name != "kubelet-dir" || c.VolumeMounts[0].Name != "kubelet-dir" {
		t.Errorf("env/5 %s, volumes/0 %s, volumeMounts/0 %s: README.md's relocation overlay patches these by index",
			c.Env[5].Name, pod.Volumes[0].Name, c.VolumeMounts[0].Name)
	}
}
