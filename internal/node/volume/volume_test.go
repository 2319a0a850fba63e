package volume

import (
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
)

// TestSameMount: what the node's mount table shows of the mounts mount(8)
// makes for each file system is taken as theirs, and another source or
// type is not.
func TestSameMount(t *testing.T) {
	gluster := fs.Mount{FSType: "glusterfs", Source: "192.0.2.10:/v"}
	cephFuse := fs.Mount{FSType: "fuse.ceph", Source: "none"}
	cephKernel := fs.Mount{FSType: "ceph", Source: "192.0.2.1:6789:/"}
	for _, tc := range []struct {
		source, typ string
		m           fs.Mount
		want        bool
	}{
		{"192.0.2.10:/v", "fuse.glusterfs", gluster, true},
		{"192.0.2.10:/v", "glusterfs", gluster, true},
		{"192.0.2.11:/v", "fuse.glusterfs", gluster, false},
		{"192.0.2.10:/w", "fuse.glusterfs", gluster, false},
		{"192.0.2.10:/v", "tmpfs", gluster, false},
		{"ceph-fuse", "fuse.ceph-fuse", cephFuse, true},
		{"ceph-fuse", "fuse.glusterfs", cephFuse, false},
		{"192.0.2.1:6789:/", "ceph", cephKernel, true},
		{"192.0.2.1:6789:/", "fuse.ceph-fuse", cephKernel, false},
	} {
		if got := sameMount(tc.source, tc.typ, tc.m); got != tc.want {
			t.Errorf("sameMount(%q, %q, %s %s) = %v, want %v", tc.source, tc.typ, tc.m.FSType, tc.m.Source, got, tc.want)
		}
	}
}
