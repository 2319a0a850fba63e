// Package known lists the file systems the node mounts through a mount
// pod (packages glusterfs and cephfs), for the front ends that pick one by
// name, and checks a mount's record against the allow-list of servers by
// the file system that made it. It runs in the node's volume hosts and, for
// the record's check, in the mount pod's recovery.
package known

import (
	"context"
	"fmt"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Filesystems are the file systems the node mounts, by name.
var Filesystems = map[string]fs.Filesystem{
	glusterfs.FS{}.Name(): glusterfs.FS{},
	cephfs.FS{}.Name():    cephfs.FS{},
}

// Named returns the file system called name.
func Named(name string) (fs.Filesystem, error) {
	f, ok := Filesystems[name]
	if !ok {
		return nil, fmt.Errorf("unknown file system %q (known: %s)", name, strings.Join(fs.SortedKeys(Filesystems), ", "))
	}
	return f, nil
}

// CheckRecordedMount reports why p does not allow a server that rec, the
// record of a mount made through the mount pod, connects to (nil when it
// allows them all). The mount pod asks before it makes a dead mount again
// (package recovery), so that a server the administrator removed from the
// allow-list since the mount was made is not connected to again; a later
// call, once the server is allowed again, passes.
//
// The servers are, for GlusterFS, those of [glusterfs.CheckRecorded]; for
// ceph-fuse (type fuse.ceph, as [cephfs.FS] mounts it), the monitors of
// [cephfs.CheckRecorded]. Records of other types name no server these
// packages know how to read, and pass. Each server is checked by
// [fs.ServerPolicy.CheckRecordedServer], which looks nothing up.
func CheckRecordedMount(ctx context.Context, p fs.ServerPolicy, rec mountrecord.Record) error {
	switch rec.FSType {
	case glusterfs.FSType:
		return glusterfs.CheckRecorded(ctx, p, rec)
	case cephfs.FuseType:
		return cephfs.CheckRecorded(ctx, p, rec)
	}
	return nil
}
