// Package flexvolume is a Flexvolume driver for GlusterFS whose mount and
// unmount run through the Exec resolver ([mcexec.Resolver]): in the
// glusterfs mount pod when it is registered and running, so that
// mount.glusterfs and the glusterfs FUSE daemon live in that pod and never
// on the node. An unmodified kubelet loads it from its volume plugin
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
// The exit code is 0 for Success and 1 otherwise. OPTIONS is the JSON object
// of string values the kubelet builds from the volume's flexVolume.options
// plus its own kubernetes.io/* keys; see [ParseOptions] for the keys this
// driver reads and how they are checked. A bad option is a Failure whose
// message names the field; the kubelet puts it in the pod's events.
//
// # Why its own binary
//
// The driver is its own small binary (cmd/glusterfs-flexvolume), not a
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
// ExecSync), an optional log file and the administrator's allow-list of
// GlusterFS servers. See [Settings] and [LoadSettings] for how the
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
// MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS). See [ServerPolicy] for the rule; in
// short:
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
// # Caveats
//
// The FUSE daemon of a mount lives in the mount pod: deleting or restarting
// that pod turns every glusterfs volume of the node into "Transport endpoint
// is not connected" until the workloads are restarted. That is why the mount
// pods' DaemonSet uses OnDelete and is upgraded only after draining the node.
//
// [mcexec.Resolver]: github.com/mountcontainers/mountcontainers/pkg/exec.Resolver
package flexvolume
