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
	root := []string{"rw", "user_id=0", "group_id=0"}
	user := []string{"rw", "user_id=1000", "group_id=1000", "allow_other"}
	for _, tc := range []struct {
		source, typ string
		super       []string
		m           fs.Mount
		want        bool
	}{
		{"192.0.2.10:/v", "fuse.glusterfs", root, gluster, true},
		{"192.0.2.10:/v", "glusterfs", nil, gluster, true},
		{"192.0.2.11:/v", "fuse.glusterfs", root, gluster, false},
		{"192.0.2.10:/w", "fuse.glusterfs", root, gluster, false},
		{"192.0.2.10:/v", "tmpfs", nil, gluster, false},
		{"192.0.2.10:/v", "fuse.glusterfs", user, gluster, false}, // a node user's fusermount
		{"ceph-fuse", "fuse.ceph-fuse", root, cephFuse, true},
		{"ceph-fuse", "fuse.ceph-fuse", user, cephFuse, false},
		{"ceph-fuse", "fuse.ceph-fuseX", root, cephFuse, false},
		{"ceph-fuse", "fuse.glusterfs", root, cephFuse, false},
		{"192.0.2.1:6789:/", "ceph", nil, cephKernel, true},
		{"192.0.2.1:6789:/", "fuse.ceph-fuse", root, cephKernel, false},
	} {
		if got := sameMount(tc.source, tc.typ, tc.super, tc.m); got != tc.want {
			t.Errorf("sameMount(%q, %q, %v, %s %s) = %v, want %v", tc.source, tc.typ, tc.super, tc.m.FSType, tc.m.Source, got, tc.want)
		}
	}
}
