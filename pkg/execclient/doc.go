// Package execclient is the client side of the mount pod's exec service: a
// small gRPC service on a root-only unix socket through which the volume
// host runs a plugin's utilities in the mount pod directly, about a
// millisecond per command instead of the tens of milliseconds of a CRI
// ExecSync, with standard input, streamed output and no hang on utilities
// that daemonize.
//
// The mount pod's daemon serves it (package internal/pod/execserver, run by
// `mountpod serve`). The volume host ([Client], used by package exec) finds
// the socket through the registration's execSocket field, checks it with
// [CheckSocket], and uses it only after the service's [Client.Identity]
// names the registered pod and container. The wire protocol is package
// execapi (exec.proto).
//
// # The socket
//
// The socket lives under the registration directory, which the mount pod
// mounts at the same path as the node, in a directory of its own:
//
//	/var/lib/kubelet/plugin-containers/.exec/<pod UID>.sock
//
// ([SocketName]). Naming the socket after the pod UID means a pod never
// touches the socket of another pod, and a replaced pod's leftover socket
// can never be mistaken for its successor's: the registration names the
// successor's path, and even a wrong path is caught by the identity check.
// The dot-directory is invisible to the registration watchers and listers.
// The service makes the directory mode 0700 and the socket mode 0600. A
// socket path longer than a unix socket address holds ([MaxSocketPath]) is
// an error on both sides, never silently shortened.
//
// # Peers
//
// Both sides check the other with SO_PEERCRED ([PeerCredentials]) and trust
// only root or their own effective user ([TrustedUID]). The service
// disconnects any other peer before any RPC. The client checks the socket
// before it connects ([CheckSocket]): every directory from the registration
// directory down to the socket must be owned by root (or the client's user)
// and not writable by group or others, and the socket must be a socket of
// that owner; and on every connection, the process serving it must run as
// root (or the client's user), else [ErrUntrustedSocket].
//
// # Commands
//
// [Client.Start] runs a [Command] in the mount pod with its own process
// group, its standard output and error streamed back as they come, and its
// standard input fed from the Command's reader (or /dev/null). The call
// ends when the main process exits: a daemon it left behind that still holds
// the output pipes (the glusterfs FUSE client can) does not hold the call
// open; the service stops reading after a short grace and the [Result] says
// the output was abandoned. A timeout, or cancelling the call, kills the
// command's process group with SIGKILL; a daemon that started its own
// session (as daemonizing utilities do) survives, as it must.
//
// A Command may carry the pod UID and container the client expects; the
// service refuses (FAILED_PRECONDITION, and Start's error wraps
// [ErrNotStarted]) before running anything if they are not its own, so a
// cached placement can never run a command in the wrong pod.
package execclient
