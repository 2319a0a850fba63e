package glusterfs_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// goodOpts are a volume's options as the kubelet passes them.
const goodOpts = `{"server":"gluster-1.example.com","volume":"gv0","mountOptions":"log-level=WARNING","kubernetes.io/fsType":"","kubernetes.io/readwrite":"rw","kubernetes.io/pod.name":"web","kubernetes.io/pod.namespace":"default","kubernetes.io/pod.uid":"0f1e","kubernetes.io/pvOrVolumeName":"data","kubernetes.io/serviceAccount.name":"default"}`

func TestMountArgs(t *testing.T) {
	for _, tc := range []struct {
		name, opts string
		want       string
	}{
		{"minimal", `{"server":"10.0.0.7","volume":"gv0"}`, "-t glusterfs 10.0.0.7:/gv0 DIR"},
		{"read-only", `{"server":"h","volume":"v","kubernetes.io/readwrite":"ro"}`, "-t glusterfs -o ro h:/v DIR"},
		{"read-only over rw", `{"server":"h","volume":"v","mountOptions":"rw,acl","kubernetes.io/readwrite":"ro"}`, "-t glusterfs -o acl,ro h:/v DIR"},
		{"backups", `{"servers":"a.example, b.example,c","volume":"v","mountOptions":" acl , ,noatime"}`,
			"-t glusterfs -o acl,noatime,backup-volfile-servers=b.example:c a.example:/v DIR"},
		{"backup option", `{"server":"a","volume":"v_1-x","mountOptions":"backup-volfile-servers=b:10.1.2.3,transport=tcp"}`,
			"-t glusterfs -o backup-volfile-servers=b:10.1.2.3,transport=tcp a:/v_1-x DIR"},
		{"fsType glusterfs", `{"server":"a","volume":"v","kubernetes.io/fsType":"glusterfs","kubernetes.io/secret/key":"c2VjcmV0"}`, "-t glusterfs a:/v DIR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := glusterfs.ParseOptions([]byte(tc.opts))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(o.MountArgs("DIR"), " "); got != tc.want {
				t.Fatalf("args %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPodOfOptions: the kubelet's pod keys name the pod in the options,
// which a mount record keeps for the recovery's Events; invalid or partial
// ones name none and do not fail the mount.
func TestPodOfOptions(t *testing.T) {
	for opts, want := range map[string]*mountrecord.Pod{
		goodOpts:                      {Namespace: "default", Name: "web", UID: "0f1e"},
		`{"server":"h","volume":"v"}`: nil,
		`{"server":"h","volume":"v","kubernetes.io/pod.name":"web","kubernetes.io/pod.uid":"0f1e"}`:                                         nil,
		`{"server":"h","volume":"v","kubernetes.io/pod.name":"Web","kubernetes.io/pod.namespace":"default","kubernetes.io/pod.uid":"0f1e"}`: nil,
		`{"server":"h","volume":"v","kubernetes.io/pod.name":"web","kubernetes.io/pod.namespace":"a/b","kubernetes.io/pod.uid":"0f1e"}`:     nil,
		`{"server":"h","volume":"v","kubernetes.io/pod.name":"w.1","kubernetes.io/pod.namespace":"ns","kubernetes.io/pod.uid":"0f1e-2"}`:    {Namespace: "ns", Name: "w.1", UID: "0f1e-2"},
	} {
		o, err := glusterfs.ParseOptions([]byte(opts))
		if err != nil {
			t.Fatalf("%s: %v", opts, err)
		}
		if !reflect.DeepEqual(o.Pod, want) {
			t.Errorf("%s: pod %+v, want %+v", opts, o.Pod, want)
		}
	}
}
