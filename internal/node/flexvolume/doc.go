// Package flexvolume is a Flexvolume driver for FUSE file systems
// (GlusterFS and CephFS) whose mount and unmount run through the Exec
// resolver ([mcexec.Resolver]): in the plugin's mount pod when it is
// registered and running, so that mount.glusterfs or ceph-fuse and their
// FUSE daemons live in that pod (in scopes of their own) and never on the
// node.
//
// # One skeleton, several file systems
//
// A file system (an [fs.Filesystem] such as [glusterfs.FS] or [cephfs.FS],
// each in a package of its own that a CSI driver can use as well) knows
// only which options a volume may give and the mount(8) call they make;
// the [Driver] keeps the call convention and hands the mount to package
// volume, which the CSI node plugin shares: the checks of the target, the
// bounds, where mount(8) runs, the check that the node sees the mount, the
// mount record (so that the mount pod can make the mount again), the
// secret file and the unmount. One binary serves every file system: the
// settings the mount pod writes next to it say which ([Settings].Filesystem,
// by default the one of the plugin: kubernetes.io/cephfs mounts cephfs).
//
// # Secrets
//
// A CephFS volume names the user's key with a secretRef; the kubelet passes
// the Secret's entry "key" to the driver base64-encoded, as the option
// kubernetes.io/secret/key. The driver writes it (package volume does)
// into a file readable by root only, named after the mount's target, in
// [Settings].SecretsDir (by
// default /run/mountcontainers/secrets, which the cephfs mount pod mounts at
// the same path), and gives ceph-fuse the file's path (ceph.keyfile). The
// directory must be on a tmpfs: the driver refuses to write a key anywhere
// a disk would keep it. The key is never in an argv (which `ps` on the node
// shows), an environment, a mount record or a log; the file is removed when
// the volume is unmounted or its mount fails, and stays while the mount
// lives, so that the mount pod can make the mount again after its ceph-fuse
// died, even from a new mount pod. An unmodified kubelet loads it from its volume plugin
// directory (Flexvolume is still in the kubelet; the in-tree glusterfs
// plugin is not) and finds it without a restart (its dynamic prober watches
// the directory).
//
// # Call convention
//
// The kubelet runs the driver as `<plugin dir>/<vendor>~<driver>/<driver>
// CALL ARGS...` and reads one JSON object from its standard output and
// standard error together:
//
//	init                   {"status":"Success","capabilities":{"attach":false,...}}
//	mount DIR OPTIONS      {"status":"Success"} or {"status":"Failure","message":"..."}
//	unmount DIR            {"status":"Success"} or {"status":"Failure","message":"..."}
//	anything else          {"status":"Not supported"}
//
// The exit code is 1 for Not supported and 0 otherwise, Failure included:
// the kubelet logs every argument of a call that exits non-zero, and
// OPTIONS holds the volume's secrets ([Status.ExitCode]). A reply's
// message never quotes a secret of the call's arguments, even where a
// mount utility's output does. OPTIONS is the JSON object
// of string values the kubelet builds from the volume's flexVolume.options
// plus its own kubernetes.io/* keys; see [glusterfs.ParseOptions] and
// [cephfs.FS] for the keys this driver reads and how they are checked. A bad option is a Failure whose
// message names the field; the kubelet puts it in the pod's events.
//
// # Why its own binary
//
// The driver is its own small binary (cmd/flexvolume-driver), not a
// personality of the multi-call kubelet-exec-shim:
//
//   - The shim picks its personality from the base name of argv[0] and runs
//     the utility of that name. The kubelet invokes this driver as
//     ".../glusterfs", which is the name of the real glusterfs FUSE client:
//     as a shim personality, "glusterfs" would have to mean two things.
//   - The contracts are opposite. The shim is transparent: the utility's
//     output and exit code, exactly. A Flexvolume driver owns its standard
//     output and error (the kubelet parses them as one JSON object, so not
//     a byte of a utility's output or of a log may leak there), maps every
//     outcome to Success, Failure or Not supported, and must validate
//     untrusted input (a pod author writes the options) before anything
//     runs.
//   - They are installed differently: the shim as links in a bin directory
//     with a tool mapping, the driver as one executable in a directory the
//     kubelet watches, where every extra file wakes the kubelet's prober.
//
// Both are built on the same [mcexec.Resolver], so where a command runs is
// decided identically; the driver's binary costs about as much as the shim's
// (both link the CRI client) and the image carries both.
//
// # Settings
//
// The kubelet runs the driver with its own environment and no flags, so the
// mount pod writes the settings next to the driver when it installs it
// ([Install]): the plugin whose registration to follow (default
// kubernetes.io/glusterfs), the registration directory, the CRI endpoint as
// the node sees it, the timeout of each mount or unmount, the exec mode
// (how mount and umount reach the mount pod: its exec socket or CRI
// ExecSync), an optional log file, the administrator's allow-list of
// servers (GlusterFS servers, Ceph monitors), the file system, the
// secrets directory and whether mounts are shared. See [Settings] and [LoadSettings] for how the
// environment overrides them. A key the settings do not have is an error,
// as in a volume's options: a misspelt allowedServers must not leave every
// server allowed.
//
// # Servers a volume may name
//
// The GlusterFS client runs as root, privileged, on the node's network, and
// the server's volume file decides what it does next; a pod author must not
// be able to point it at the node itself or at the cloud metadata service.
// Before anything runs, every server a volume names (server, servers,
// backup-volfile-servers) must be allowed by [Settings].AllowedServers, which
// the mount pod records from its DaemonSet (--flexvolume-allowed-servers,
// MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS). See [fs.ServerPolicy] for the rule;
// in short:
//
//   - unset, any server is allowed whose addresses are not loopback,
//     unspecified, link-local, multicast or broadcast (IPv4-mapped IPv6
//     forms count as the IPv4 address); a host name must resolve on the node;
//   - set, only the listed names, and names and addresses within the listed
//     addresses and CIDRs; special addresses only when an entry lies within
//     their range (0.0.0.0/0 does not allow 127.0.0.1);
//   - a name that is not listed is replaced by the address it was checked
//     by, so that a changing DNS answer cannot redirect the client after the
//     check; a listed name is used as it is.
//
// The mount pod applies the list, as it is then, again before it makes a
// dead mount again ([known.CheckRecordedMount]): a server removed
// from it is not connected to again.
//
// "Unset" is the administrator's empty list in the settings the mount pod
// writes. A driver with no settings file at all had no administrator
// choose, and refuses every server unless its environment lists some
// ([Settings.ServerPolicy]).
//
// A server whose name resolves to the node itself (a GlusterFS server on the
// node, as on this project's test bed) must therefore be listed by name.
// Server names are host names or dotted-quad IPv4 addresses: no ':' (ports,
// IPv6 and IPv4-mapped literals), no numeric last label (127.1 and
// 2130706433 are 127.0.0.1 to the C library). log-level TRACE and DEBUG are
// not accepted from a volume: the client's logs are on the node's disk.
// Pods that may name any server at all should not be able to use the driver
// inline: deploy/README.md shows a ValidatingAdmissionPolicy that limits it
// to PersistentVolumes, which only administrators create.
//
// # Diagnostics
//
// The kubelet reads the driver's standard output and error as its reply
// and shows a failure's message in the pod's events, but says nothing of a
// success. With a log file ([Settings].LogFile) the driver appends one JSON
// record per call (call, directory, reply) and one per placement decision
// (the mount pod's container or the node, and the path: exec socket or
// ExecSync). A successful mount's reply names the mount pod and the path.
// The log file must be a regular file: a symbolic link, a FIFO or a device
// there is refused without blocking, and the call goes on unlogged, its
// reply saying why.
//
// # Robustness
//
//   - Every mount and umount is bounded ([DefaultTimeout]); the kubelet puts
//     no bound on a driver call. The mount pod's glusterfs client
//     daemonizes and closes the exec's pipes, so the CRI ExecSync of a mount
//     returns as soon as the mount is made.
//   - The target directory is created if it is missing. A mount of a
//     directory that is already a mount point succeeds without mounting
//     again; an unmount of a directory that is not mounted (or does not
//     exist) succeeds without running anything.
//   - After mount(8) succeeded the driver checks, from the node, that the
//     directory is now a mount point: a mount made in a pod whose kubelet
//     directory is not Bidirectional would otherwise be reported mounted and
//     stay invisible to the workload. It is undone and reported.
//   - An unmount of a dead FUSE mount ("Transport endpoint is not
//     connected", left when the mount pod died) falls back to a lazy
//     unmount.
//   - Nothing goes through a shell: the options become argv elements of
//     mount(8) after server names, the volume name and each mount option
//     were checked against an allow list (mount.glusterfs itself is a shell
//     script, and options such as log-file would let a pod author write
//     files as root in the mount pod).
//
// # One mount per volume and node
//
// With [Settings].SharedMounts (which the mount pod records by default)
// the driver mounts a volume once per node, beneath the kubelet's
// directory ([SharedRoot]), and binds that mount at the directory of each
// pod of the same namespace that asks for the same mount (the same file
// system, source and options): see [volume.Shared]. Without it, each
// pod's volume directory is a mount of its own, with a FUSE daemon of its
// own. The mount pod's recovery brings the node's mount
// back and gives every bind of it the new one. A volume that needs a
// secret is mounted per pod regardless. An unmount handles a bind of a
// node's mount whatever the setting says now.
//
// # Caveats
//
// The FUSE daemon of a mount runs in a scope of its own (docs/scopes.md):
// it outlives the mount pod that started it, and one that dies anyway is
// brought back by the mount pod (docs/recovery.md). Without scopes, deleting
// or restarting the mount pod turns every volume of the node into "Transport
// endpoint is not connected"; that is why the mount pods' DaemonSet uses
// OnDelete and is upgraded with mountpod-rollout (docs/upgrade.md).
//
// [mcexec.Resolver]: github.com/mountcontainers/mountcontainers/pkg/exec.Resolver
// [volume.Shared]: github.com/mountcontainers/mountcontainers/internal/node/volume.Shared
// [fs.Filesystem]: github.com/mountcontainers/mountcontainers/internal/shared/fs.Filesystem
// [fs.ServerPolicy]: github.com/mountcontainers/mountcontainers/internal/shared/fs.ServerPolicy
// [glusterfs.FS]: github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs.FS
// [glusterfs.ParseOptions]: github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs.ParseOptions
// [cephfs.FS]: github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs.FS
// [known.CheckRecordedMount]: github.com/mountcontainers/mountcontainers/internal/shared/fs/known.CheckRecordedMount
package flexvolume
