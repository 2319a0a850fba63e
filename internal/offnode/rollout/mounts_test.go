package rollout

import (
	"testing"
)

func TestParseMountInfo(t *testing.T) {
	in := `22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/a
36 22 8:1 /var/lib/kubelet /var/lib/kubelet rw shared:1 - ext4 /dev/sda1 rw
90 36 0:50 / /var/lib/kubelet/pods/u1/volumes/mountcontainers.io~glusterfs/my\040vol rw,relatime shared:40 - fuse.glusterfs host:/vol rw,user_id=0
`
	ms, err := ParseMountInfo([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("%d mounts: %+v", len(ms), ms)
	}
	want := Mount{Target: "/var/lib/kubelet/pods/u1/volumes/mountcontainers.io~glusterfs/my vol", FSType: "fuse.glusterfs", Source: "host:/vol"}
	if ms[2] != want {
		t.Errorf("got %+v, want %+v", ms[2], want)
	}
	if _, err := ParseMountInfo([]byte("1 2 3\n")); err == nil {
		t.Error("malformed line accepted")
	}
}

func TestMountMatcher(t *testing.T) {
	m, err := NewMountMatcher([]string{"kubernetes.io/rbd"}, []string{"mountcontainers.io/glusterfs"}, []string{"fuse.sshfs"}, []string{`^/mnt/gluster/`})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m    Mount
		want bool
	}{
		{Mount{Target: "/var/lib/kubelet/pods/u/volumes/mountcontainers.io~glusterfs/v", FSType: "fuse.glusterfs"}, true},
		{Mount{Target: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~rbd/v", FSType: "ext4"}, true},
		{Mount{Target: "/var/lib/kubelet/plugins/kubernetes.io/rbd/mounts/pool-image", FSType: "ext4"}, true},
		{Mount{Target: "/var/lib/kubelet/plugins/kubernetes.io/csi/mountcontainers.io/glusterfs/x/globalmount", FSType: "fuse"}, true},
		{Mount{Target: "/var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared/0123abcd", FSType: "fuse.glusterfs"}, true},
		{Mount{Target: "/var/lib/kubelet/plugins/mountcontainers.io~cephfs/shared/0123abcd", FSType: "fuse.ceph-fuse"}, false},
		{Mount{Target: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/v", FSType: "tmpfs"}, false},
		{Mount{Target: "/var/lib/kubelet/pods/u/volumes/kubernetes.io~rbdx/v", FSType: "ext4"}, false},
		{Mount{Target: "/home/x", FSType: "fuse.sshfs"}, true},
		{Mount{Target: "/mnt/gluster/a", FSType: "xfs"}, true},
		{Mount{Target: "/", FSType: "overlay"}, false},
	} {
		if got := m.Match(tc.m); got != tc.want {
			t.Errorf("Match(%+v) = %v, want %v", tc.m, got, tc.want)
		}
	}
	if _, err := NewMountMatcher(nil, nil, nil, []string{"("}); err == nil {
		t.Error("bad pattern accepted")
	}
}

func TestTaintValue(t *testing.T) {
	o := Options{Namespace: "kube-system", Name: "glusterfs-mountpod"}
	if got := o.taintValue(); got != "kube-system.glusterfs-mountpod" {
		t.Errorf("taint value %q", got)
	}
	long := Options{Namespace: "a-rather-long-namespace-name-indeed", Name: "and-an-even-longer-daemonset-name-too"}
	if v := long.taintValue(); len(v) > 63 || v == (Options{Namespace: long.Namespace, Name: long.Name + "x"}).taintValue() {
		t.Errorf("long taint value %q (%d)", v, len(v))
	}
}
