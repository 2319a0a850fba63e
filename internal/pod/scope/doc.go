// Package scope moves the processes behind a mount into a cgroup of their
// own, a scope, outside the mount pod's container, so that ending the
// container does not end the mount: the analogue of the kubelet's
// `systemd-run --scope` (k8s.io/mount-utils) for mounts made through a mount
// pod.
//
// It runs in the mount pod. A mount made there through one of the image's
// mount helpers (mount.glusterfs, mount.fuse.ceph) runs the helper stand-in
// first (cmd/mount-scope, [RunHelper]): it places its own process in the
// scope of the mount target and then executes the real helper, so that the
// helper and the FUSE daemon it forks live in the scope; the recovery's
// remounts go through the same helpers. With the mount pod in the host's PID namespace (hostPID) and tini as
// subreaper, the daemon then survives its container.
//
// # Names
//
// Each plugin has a parent cgroup, Config.Parent/<plugin with "/" as "~">
// ("mountcontainers/kubernetes.io~glusterfs"), in which each mount target
// has a scope named by [Name], the target's mount key
// ([boundary.MountKey]): "mount-" and 16 hexadecimal digits of the SHA-256
// of the cleaned target. The same target always maps to the same scope, so
// a later mount pod finds the scopes of live mounts with [Manager.List].
// Plugin names are checked by [boundary.ValidatePluginName], the rule of the
// registration file names, and Parent as plain relative cgroup names, so
// nothing can reach outside the parent; [Manager.Remove] takes only names
// [boundary.ValidMountKey] accepts.
//
// # Backends
//
// The cgroupfs backend writes the cgroup file system under Config.CgroupRoot,
// whose layout [DetectLayout] reads: cgroup v2 (unified), or cgroup v1 with
// one directory per hierarchy, plus the cgroup2 hierarchy "unified" of a
// hybrid system. The scope is made in every hierarchy; in the v1 cpuset one
// each new level first gets its parent's cpuset.cpus and cpuset.mems (an
// empty cpuset takes no process). Config.MemoryLimit goes to the plugin's
// parent: memory.limit_in_bytes (v1) or memory.max (v2, after enabling the
// memory controller in the ancestors' cgroup.subtree_control). The PID is
// written to cgroup.procs in every hierarchy only once all are ready (a
// Remove that takes the scope away meanwhile can leave it in some of them
// until Place, under the lock, has written it again in every one).
// Removes of one plugin serialise on a flock(2) of the plugin's parent in
// the first hierarchy, across processes, and remove only empty scopes;
// Place writes the PID without it (the kernel does not remove a cgroup
// with a process) and takes it only to make a scope again that a Remove
// took away meanwhile (ENOENT, or ENODEV for one removed as it is
// written), writing every hierarchy again. Both also set the CPU
// weight of the plugin's parent to that of as many processes as it holds
// scopes, and of Config.Parent to that of all scopes below it (cpu.shares
// in v1, cpu.weight in v2; best effort), so that a scope does not change
// what its mount weighs when the CPU is contended (BENCHMARKS.md, "A node
// under load"). Kill never signals a PID read from cgroup.procs by number:
// it writes cgroup.kill (cgroup v2, Linux 5.14) and signals through pidfds
// the processes still in the scope once they are open, so a number reused
// by an unrelated process meanwhile is never signalled.
//
// The systemd backend asks systemd, over D-Bus (go-systemd), for a transient
// unit "<name>.scope" in the slice [SliceName] returns
// ("mountcontainers-kubernetes.io-glusterfs.slice"), with PIDs, Slice,
// Description and CollectMode=inactive-or-failed (systemd unloads it once
// its processes are gone), and waits for the job. It does not set Delegate:
// FUSE daemons make no cgroups of their own. A scope that exists already
// (the same target mounted again while its old daemon lives) is joined with
// AttachProcessesToUnit. The memory limit is MemoryMax= of the slice. On
// cgroup v1 nodes systemd moves the process only in the hierarchies of the
// controllers it manages; once the process is in the unit, the backend
// moves it to the root of every other v1 controller hierarchy where it was
// still in the caller's cgroup (systemd_v1.go), else the container's end
// would take it along.
// [New] picks systemd when one of Config.SystemdSockets exists and systemd
// answers there (its Version property), cgroupfs otherwise.
//
// # PIDs and namespaces
//
// A PID is read in the namespace of whoever reads it: the cgroupfs backend
// writes it in the caller's PID namespace, as the kernel expects, but
// systemd reads it in the host's. The systemd backend therefore needs the
// caller in the host's PID namespace (hostPID), except for PID 0, "the
// calling process", which systemd resolves from the connection's
// credentials (for StartTransientUnit; for AttachProcessesToUnit this is
// not verified here).
//
// # Cgroup namespaces
//
// Cgroup v2 checks a migration against the cgroup namespace of whoever
// opened cgroup.procs: with nsdelegate (systemd mounts cgroup2 with it), a
// process in a private cgroup namespace, as containers on cgroup v2 are,
// cannot move a process to a cgroup outside that namespace. So the cgroupfs
// backend runs its operations from the host's cgroup namespace when this
// process's is private (Config.CgroupNS auto: the namespace files differ;
// or, if the host's cannot be read, PID 1's cgroups show as "/.." paths).
// setns(2) with CLONE_NEWCGROUP changes only the calling thread, and unlike
// CLONE_NEWNS it works in a multithreaded process: the operations run on a
// locked OS thread that enters the namespace and leaves it afterwards. That
// thread-level switch is proven by the tests on the build machine; the
// refusal it avoids needs a cgroup2 mount with nsdelegate, which the build
// machine does not have, so it is not reproduced there. The cgroup root must
// be the host's file system either way: a cgroup namespace's own view
// cannot reach outside its root, and [DetectLayout] refuses one.
//
// # What is not done
//
// Place does not undo a partial placement: if writing cgroup.procs fails in
// one hierarchy after succeeding in others, the process stays split and the
// error says where. Remove leaves the plugin parents in place; they hold
// the memory limit. Lowering Config.MemoryLimit below what the plugin's
// processes use makes Place fail with EBUSY on cgroup v1.
package scope
