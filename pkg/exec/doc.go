// Package exec runs a volume plugin's utilities where the MountContainers
// rule says: in the plugin's registered mount container when it is running,
// otherwise on the host. It is a drop-in k8s.io/utils/exec.Interface for
// volume hosts.
//
//	r := exec.NewResolver(exec.Options{})   // registration dir, CRI endpoint, host executor
//	defer r.Close()
//	e, err := r.For("kubernetes.io/glusterfs") // a utilexec.Interface
//	out, err := e.Command("mount", "-t", "glusterfs", src, dir).CombinedOutput()
//
// # Decision
//
// Every command is placed when it starts, never from a cached answer: the
// registration is read afresh ([registration.Read]) and, if there is one,
// the registered container's liveness is established by the first of these
// that can prove it:
//
//  1. The mount pod's exec socket (see "Exec fast path"), unless the exec
//     mode is [ModeCRI]: a process answering on the socket the registration
//     names, in a root-only directory, as root, whose Identity answer names
//     the registered pod UID, name, namespace and container, and which the
//     kernel places in a container of the registered pod (its cgroups,
//     below), is a running process of that container. The runtime is not
//     asked; the [Decision]'s ContainerID is the one the cgroup names, its
//     Endpoint is empty and its ViaReason ends with "runtime not asked".
//  2. Otherwise the runtime: ListContainers with the labels
//     io.kubernetes.pod.uid and io.kubernetes.container.name, state
//     RUNNING, whose pod name and namespace labels must match the
//     registration.
//
// The socket cannot prove liveness when the registration names no socket,
// the socket is missing, untrusted or refuses the connection (a stopped
// container), the service answers for another pod or container, the kernel
// puts the serving process elsewhere, or its cgroups cannot be told from
// the caller's namespaces: in each case the runtime decides, exactly as if
// there were no socket. kubelet-exec-shim applies the same rule in the same
// order, so a command is placed alike through the library and the shim.
//
//   - Running: the command runs in it, through the mount pod's exec socket
//     or CRI ExecSync (see "Exec fast path").
//   - No registration, or no running container (stopped, restarting, or the
//     pod was replaced and its successor has not registered yet): the host.
//   - Untrusted or invalid registration, or a pod name or namespace that does
//     not match ([ErrMismatch]): an error naming the file and the reason.
//   - The runtime cannot be asked while a registration exists: an error
//     naming the plugin and the endpoint ([ErrRuntimeUnavailable]), unless
//     [Options].FallbackOnRuntimeError is set.
//
// [Resolver.Resolve] returns the [Decision] (plugin, container or host,
// reason) for logs and status commands; [Cmd.Decision] tells where a command
// ran.
//
// # Container cache
//
// The registration is read and validated for every command (a few system
// calls). The ListContainers call is what costs (about a millisecond, a few
// per cent of an ExecSync), so a command reuses the container found for the
// same registration content, and the runtime itself confirms it: an exec in
// a container that is not running fails before anything starts (NotFound
// once removed; containerd's "container is in CONTAINER_EXITED state",
// CRI-O's "container is not created or running"), and then the entry is
// dropped and the decision taken afresh. This gives the same placement as
// asking every time: a pod runs at most one container of a name at a time,
// container labels never change, and any change of the registration (a new
// pod registering, a removal) misses the cache. [Resolver.Resolve] never
// uses the cache; [Options].NoContainerCache turns it off. With
// FallbackOnRuntimeError, a cached decision that meets an unreachable
// runtime is taken afresh too, so that the fallback applies.
//
// # Commands through ExecSync
//
// A command in a container that does not go through the exec socket (see
// "Exec fast path") is one ExecSync call, and that shapes it:
//
//   - It always has a timeout: the CommandContext deadline, else
//     [Options].Timeout ([DefaultTimeout], 2 minutes). containerd waits for
//     the exec's stdout and stderr to close, which a daemonising utility may
//     never do. The runtime gets the timeout in whole seconds, rounded up; the
//     gRPC call may last a little longer so that the runtime reports first. A
//     timeout is an error matching both [ErrTimeout] and
//     context.DeadlineExceeded.
//   - A non-zero exit is a utilexec.CodeExitError and a missing executable is
//     exactly utilexec.ErrExecutableNotFound, both unwrapped, because
//     k8s.io/mount-utils type-asserts and compares them. Output keeps stdout
//     and stderr apart; CombinedOutput returns all of stdout then all of
//     stderr (their interleaving is lost).
//   - There is no standard input: a reader that may hold data fails with
//     [ErrStdinUnsupported].
//   - SetDir and SetEnv wrap the command: /bin/sh -c 'cd -- "$1" ...' and
//     env -i -- NAME=VALUE... (SetEnv replaces the whole environment, as in
//     os/exec). A wrapped command that exits 127 (the shell's and env's "not
//     found") is reported as utilexec.ErrExecutableNotFound.
//   - SetStdout, SetStderr and the pipes get the output when the command has
//     finished. Start runs the call in a goroutine; Wait returns its result.
//   - Stop cancels the call. The process in the container runs on until it
//     exits or the runtime's timeout kills it: the CRI cannot kill an exec.
//   - If the container stops between the decision and the call (NotFound or
//     FailedPrecondition), the decision is taken once more.
//
// # Batches
//
// A runtime may start the execs of one container one at a time: the runc
// shim of containerd before 1.6.22 and 1.7.3 holds a lock across `runc
// exec`, about a second each on a loaded node, so a hundred mounts asked
// at once wait up to a hundred seconds for their turn. With
// [Options].BatchDir set and a registration that advertises a batch
// program (registration.Registration's ExecBatch, such as `mountpod`), the
// commands for one container that wait at once go in one ExecSync of that
// program (`PROGRAM exec-batch REQUEST...`, wire format: package
// execbatch), which runs them side by side. They meet through files in
// BatchDir/<container ID>, so callers in different processes (a
// Flexvolume driver is a process per call) share batches: at most four
// batches of a container are in flight, a command that finds them all
// busy waits and goes in the next one, and a command alone goes as it is.
// A caller that waits looks for its result and a free batch after 25 ms,
// then twice as long each time, up to every 200 ms: a hundred callers
// waiting a minute cost little CPU, a short wait stays short.
// Each caller gets its own command's result, as above. A command runs with
// what is left of its time when a batch takes it; one whose deadline
// passed while it waited never runs (withdrawn by its caller, or answered
// as timed out by the batch that claims it). The batch's ExecSync may take
// its longest command's time and 10 s more, so one slow command times out
// alone; its results come at its end, and its leader tells each caller when
// that is, so a caller whose command ended early waits for it rather than
// giving up at its own deadline. A batch whose program cannot start (missing, refusing) runs
// nothing, and each caller runs its command alone. A batched command's
// outputs keep their last 64 KiB each, and Stop does not reach it. BatchDir
// and its directories must belong to the caller's user, writable by
// nobody else, and not be symbolic links: their files are commands run as
// root, and their results. A caller that puts a secret in an argv (this
// project's volume hosts never do: keys go by file) should not set
// BatchDir: the argv would be in those files, as it is in the batch's
// process list.
//
// # Exec fast path
//
// A registration may advertise the mount pod's exec service (its client is
// package execclient) in its execSocket field. With [ModeAuto] (the default) a
// command goes through that socket when the socket itself proves the
// registered container live (step 1 above), or when the registration is live
// by the runtime's answer (step 2) AND the socket passes
// [execclient.CheckSocket] (root-owned, not group- or world-writable on the
// way, a socket) AND the service's Identity answer names the registered pod
// UID, container, name and namespace AND the process serving the socket
// is in the registered container (below); otherwise through ExecSync, and
// [Decision].Via and ViaReason say which and why. The answer is cached with
// the container, and every exec carries the expected pod UID and container,
// which the service checks before running anything, so a cached placement
// cannot run a command in another pod. A socket that has gone (the mount
// pod was killed) or answers for another pod before the command started
// makes the decision be taken afresh, once. [ModeCRI] always uses ExecSync;
// [ModeSocket] makes a live registration whose socket cannot be used an
// error ([ErrSocketUnavailable]).
//
// The Identity answer is what the service says of itself; the kernel says
// who serves the socket. The client takes the serving process's PID from
// SO_PEERCRED when it connects and reads its cgroups
// ([Options].ProcRoot/<pid>/cgroup, /proc by default): one cgroup path must
// contain the registered container's ID, as every CRI runtime names a
// container's cgroup (cgroupfs .../pod<UID>/<ID>, systemd
// ...cri-containerd-<ID>.scope, crio-<ID>.scope); for step 1, the cgroup
// right below the registered pod's (cgroupfs pod<UID>, systemd
// ...-pod<UID with _>.slice) must be a container's, whose 64-digit ID it
// names. A process elsewhere (in
// another container, on the node) makes the decision ExecSync, ViaReason
// naming its PID and cgroup ([ModeSocket]: an error). The check needs the
// serving process to be visible in the caller's PID namespace: it is from
// the node (the driver, the shim, the kubelet) and from a caller with
// hostPID. When it is not (SO_PEERCRED gives PID 0, no /proc entry, an
// unreadable one) or every cgroup path is "/" (the caller is inside that
// cgroup namespace), the check cannot be made: the socket proves nothing by
// itself (step 1 does not apply), and once the runtime has found the
// container running, the Identity answer decides alone, as it did before the
// check. ProcRoot must be the procfs of
// the caller's own PID namespace, or PIDs would name other processes.
//
// Through the socket a command costs a gRPC stream and a fork/exec (about
// 2 ms against about 30 ms for ExecSync; see BENCHMARKS.md), standard
// input is streamed, output streams to SetStdout, SetStderr and the pipes
// as it comes, SetEnv and SetDir are passed as such (no wrapper), Stop
// kills the command's process group, and a utility that leaves a daemon
// holding its output does not hold the call. Exit codes and errors are the
// ExecSync path's: a non-zero exit is a utilexec.CodeExitError (128+N for a
// signal, as containerd reports), a missing or non-executable file is
// utilexec.ErrExecutableNotFound, a directory that cannot be entered exits
// 126, a timeout wraps [ErrTimeout] and context.DeadlineExceeded. Output is
// capped at 16 MiB per stream, as ExecSync caps its response: past it the
// caller gets the first 16 MiB and an error wrapping [ErrOutputLimit] (or,
// for a command that failed anyway, its utilexec.CodeExitError naming the
// truncation). A busy exec service (all its command slots taken for 5 s)
// refuses the call before anything runs; the decision is taken afresh once,
// and if the service is still busy the command fails with an error saying
// so (nothing ran). The resolver keeps one client per socket in use, closing those
// of sockets that are gone (replaced mount pods) and all but the 8 most
// recently used idle ones.
//
// # Observing commands
//
// [Options].Observer, when set, is told of every command a [Cmd] runs, once,
// when its result is known: an [ExecEvent] with the plugin, the base name of
// the executable ([ToolName]: never the arguments, which may hold secrets),
// the [Path] it took (socket, cri, host, or none when no decision could be
// taken), the decision, the duration from the decision to the result, the
// exit code and the error, which [ExecEvent.Result] classifies in a few
// values fit for a metric label. Run, Output and CombinedOutput report when
// they return; Start and Wait when the command ends (through the exec socket
// and ExecSync) or at Wait (on the host). LookPath's probe is not a command
// and is not reported. The observer is called on the goroutine that learns
// the result and must not block. This package has no metrics dependency: a
// volume host connects the observer to its own metrics, and [LogObserver]
// logs one record per command (the Flexvolume driver and the shim use it).
//
// # Host
//
// On the host, commands are the host executor's: k8s.io/utils/exec by
// default, or [Nsenter] for a caller that runs in a container and reaches
// the host's mount namespace through the host's init process.
//
// # Mounts
//
// [Mounter] is a k8s.io/mount-utils mount.Interface whose Mount and Unmount
// run through a plugin's executor, so that
//
//	mount.SafeFormatAndMount{Interface: exec.NewMounter(e, nil), Exec: e}
//
// checks, formats and mounts entirely in the mount container. Mount-point
// queries are answered in the caller's mount namespace, which sees the mount
// container's mounts through mount propagation.
package exec
