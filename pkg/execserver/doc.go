// Package execserver is the mount pod's exec service: a small gRPC service
// on a root-only unix socket through which the volume host runs a plugin's
// utilities in the mount pod directly, about a millisecond per command
// instead of the tens of milliseconds of a CRI ExecSync, with standard
// input, streamed output and no hang on utilities that daemonize.
//
// The mount pod's daemon ([Server]) is already a long-running process in
// exactly the right namespaces, so it can start the utilities itself. The
// volume host ([Client], used by package exec) finds the socket through the
// registration's execSocket field and uses it only after the service's
// [Client.Identity] names the registered pod and container.
//
// # The socket
//
// The socket lives under the registration directory, which the mount pod
// mounts at the same path as the node, in a directory of its own:
//
//	/var/lib/kubelet/plugin-containers/.exec/<pod UID>.sock
//
// [Listen] creates that directory with mode 0700 (an existing one must be a
// directory owned by the server's user and not accessible to group or
// others), removes a leftover at the socket's path only if it is a socket
// (anything else is an error, as in node-driver-registrar), and makes the
// socket mode 0600. Naming the socket after the pod UID means a pod never
// touches the socket of another pod, and a replaced pod's leftover socket
// can never be mistaken for its successor's: the registration names the
// successor's path, and even a wrong path is caught by the identity check.
// The dot-directory is invisible to the registration watchers and listers.
//
// # Peers
//
// The server accepts only peers whose SO_PEERCRED user is root (or the
// server's own user, which can do anything the server does anyway; in the
// mount pod that is root too). Others are disconnected at once, before any
// RPC. The client checks the other way round: every directory from the
// registration directory down to the socket must be owned by root (or the
// client's user) and not writable by group or others, the socket must be a
// socket of that owner, and the process serving it must run as root (or the
// client's user).
//
// # Commands
//
// Exec starts the command with its own process group, its standard output
// and error on pipes whose content is streamed back as it comes, and its
// standard input fed from the client's stream (or /dev/null). The call
// ends when the main process exits: a daemon it left behind that still holds
// the output pipes (the glusterfs FUSE client can) does not hold the call
// open; the server stops reading after [DefaultOutputGrace] and reports the
// output as abandoned. The main process is reaped by the server; orphans
// are re-parented to the container's PID 1 (tini in the image), which reaps
// them. A timeout, or the client cancelling the call, kills the command's
// process group with SIGKILL; a daemon that started its own session (as
// daemonizing utilities do) survives, as it must.
//
// Each Exec carries the pod UID and container the client expects; the server
// refuses (FAILED_PRECONDITION) before running anything if they are not its
// own, so a cached placement can never run a command in the wrong pod.
package execserver
