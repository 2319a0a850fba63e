package rollout

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/client-go/util/exec"
)

func TestDriversOf(t *testing.T) {
	const dir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"
	for _, tc := range []struct {
		name string
		c    corev1.Container
		want string
		warn string
	}{
		{"no install", corev1.Container{Env: []corev1.EnvVar{{Name: "MOUNTPOD_PLUGINS", Value: "kubernetes.io/glusterfs"}}}, "", ""},
		{"empty dir", corev1.Container{Env: []corev1.EnvVar{{Name: "MOUNTPOD_INSTALL_FLEXVOLUME_DIR"}}}, "", ""},
		{"default driver", corev1.Container{Env: []corev1.EnvVar{{Name: "MOUNTPOD_INSTALL_FLEXVOLUME_DIR", Value: dir}}}, "mountcontainers.io/glusterfs", ""},
		{"named driver", corev1.Container{Env: []corev1.EnvVar{
			{Name: "MOUNTPOD_INSTALL_FLEXVOLUME_DIR", Value: dir}, {Name: "MOUNTPOD_FLEXVOLUME_DRIVER", Value: "example.com~nfs"}}}, "example.com/nfs", ""},
		{"bad driver", corev1.Container{Env: []corev1.EnvVar{
			{Name: "MOUNTPOD_INSTALL_FLEXVOLUME_DIR", Value: dir}, {Name: "MOUNTPOD_FLEXVOLUME_DRIVER", Value: "nfs"}}}, "", "want <vendor>~<driver>"},
		{"from a reference", corev1.Container{Env: []corev1.EnvVar{
			{Name: "MOUNTPOD_INSTALL_FLEXVOLUME_DIR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "dir"}}}}}, "", "from a reference"},
		{"envFrom", corev1.Container{EnvFrom: []corev1.EnvFromSource{{Prefix: "X"}}}, "", "envFrom"},
		{"arguments", corev1.Container{Args: []string{"serve", "--install-flexvolume=" + dir}}, "", "arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Name = "mount"
			ds := &appsv1.DaemonSet{}
			ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "other"}, tc.c}
			drivers, warnings := driversOf(ds, "mount")
			if got := strings.Join(drivers, ","); got != tc.want {
				t.Errorf("drivers %q, want %q", got, tc.want)
			}
			if got := strings.Join(warnings, "\n"); (tc.warn == "") != (got == "") || !strings.Contains(got, tc.warn) {
				t.Errorf("warnings %q, want one containing %q", got, tc.warn)
			}
		})
	}
}

func TestPodUIDOf(t *testing.T) {
	for target, want := range map[string]string{
		"/var/lib/kubelet/pods/0c9f/volumes/mountcontainers.io~glusterfs/data": "0c9f",
		"/var/lib/kubelet/pods/0c9f/volume-subpaths/x":                         "",
		"/var/lib/kubelet/plugins/kubernetes.io/glusterfs/mounts/x":            "",
		"/var/lib/kubelet/pods/0c9f":                                           "",
	} {
		if got := podUIDOf(target); string(got) != want {
			t.Errorf("podUIDOf(%s) = %q, want %q", target, got, want)
		}
	}
}

// TestStatusOfOldImage: a mountpod without the status command is told
// from a failing one by its exit code and message (cli's unknown command).
func TestStatusOfOldImage(t *testing.T) {
	exit := func(code int) error { return utilexec.CodeExitError{Err: errors.New("command terminated"), Code: code} }
	for _, tc := range []struct {
		err  *ExecError
		want bool
	}{
		{&ExecError{ExitCode: 3, Stderr: "mountpod: No help topic for 'status'", Err: exit(3)}, true},
		{&ExecError{ExitCode: 1, Stderr: "mountpod: read mount table: permission denied", Err: exit(1)}, false},
		{&ExecError{ExitCode: -1, Err: errors.New("container not found")}, false},
	} {
		if got := unknownCommand(tc.err); got != tc.want {
			t.Errorf("unknownCommand(%v) = %v", tc.err, got)
		}
	}
	if r, err := DecodeStatus([]byte(`{"mounts":[{"target":"/k/pods/u/volumes/x~y/v","fstype":"fuse.glusterfs","daemons":[7],"scoped":false,"healthy":true}],"orphanScopes":null}`)); err != nil ||
		len(r.Mounts) != 1 || !servedByPod(r.Mounts[0]) {
		t.Errorf("DecodeStatus: %+v, %v", r, err)
	}
	if _, err := DecodeStatus([]byte("No help topic")); err == nil {
		t.Error("DecodeStatus accepted text")
	}
}
