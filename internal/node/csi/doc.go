// Package csi is a CSI driver (Identity, Node, and a Controller that
// provisions) for the file systems the mount pods mount: one binary,
// cmd/csi-driver, serves one driver per file system, such as
// glusterfs.mountcontainers.io. It runs on the node, as a volume host of
// the Exec resolver like the kubelet's Flexvolume drivers: it carries no
// storage tools, and every mount(8) and umount it needs runs in the
// plugin's mount pod, found through its registration ([mcexec.Resolver]).
// A volume is never mounted on the node itself: while the mount pod is not
// registered and live, Probe says not ready and the calls that mount fail
// with Unavailable, which the kubelet retries.
//
// # Node
//
// NodeStageVolume mounts the volume once per node at the staging path,
// through package volume (shared with the Flexvolume driver: the FUSE
// daemon in a scope of its own, the mount recorded so that the mount pod's
// recovery makes it again if the daemon dies, a secret in a root-only file
// on a tmpfs). The volume context holds the file system's options, checked
// as a Flexvolume's are (servers against the allow-list, mount options
// against the file system's list); a secret of the node-stage secrets is
// handed over as the kubelet hands a Flexvolume driver a secretRef's
// entry. NodePublishVolume binds the staged volume, or its directory
// ([KeySubdir]) resolved beneath the staging mount by descriptors without
// following a symbolic link, onto the target, read-only when asked.
// NodeGetVolumeStats reports usage, and Unavailable while the FUSE daemon
// is dead (CSI 1.13's Go bindings have no VolumeCondition) or hangs: no
// call waits on a daemon beyond its deadline and the driver's timeout
// (package volume's Mounter.ProbeStatfs).
//
// # Controller
//
// For GlusterFS the controller makes a volume a directory of an
// administrator's GlusterFS volume named by the StorageClass; it mounts
// that volume through the mount pod of its own node (so it carries no
// tools either). GlusterFS has no quota per directory: a volume's capacity
// is recorded, not enforced. CephFS has no controller yet: its volumes are
// static (a PersistentVolume naming the path).
package csi
