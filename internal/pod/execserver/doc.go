// Package execserver is the server side of the mount pod's exec service
// (the client and the socket's rules are in pkg/execclient): the
// mount pod's daemon is already a long-running process in exactly the right
// namespaces, so it can start the volume host's utilities itself, about a
// millisecond per command instead of the tens of milliseconds of a CRI
// ExecSync.
//
// [Listen] prepares the socket and [Server.Serve] serves the Identity and
// Exec calls of exec.proto on it.
//
// # The socket
//
// [Listen] creates the socket's directory
// (<registration dir>/.exec, see execserver.SocketName) with mode 0700 (an
// existing one must be a directory owned by the server's user and not
// accessible to group or others), removes a leftover at the socket's path
// only if it is a socket (anything else is an error, as in
// node-driver-registrar), and makes the socket mode 0600. A path longer
// than a unix socket address holds is an error.
//
// # Peers
//
// The server accepts only peers whose SO_PEERCRED user is root (or the
// server's own user, which can do anything the server does anyway; in the
// mount pod that is root too): execserver.TrustedUID. Others are
// disconnected at once, before any RPC.
//
// # Commands
//
// Exec starts the command with its own process group, its standard output
// and error on pipes whose content is streamed back as it comes, and its
// standard input fed from the client's stream (or /dev/null). The call
// ends when the main process exits: a daemon it left behind that still holds
// the output pipes (the glusterfs FUSE client can) does not hold the call
// open. [DefaultOutputGrace] after the main process exited, the server
// sends what the pipes hold without waiting for more, and reports the output
// as abandoned if a pipe still has a writer: what the command wrote before
// it exited is always sent, however late the server runs after the exit.
// The main process is reaped by the server; orphans are re-parented to the
// container's PID 1 (tini in the image), which reaps them. A timeout, or the client cancelling the call, kills the command's
// process group with SIGKILL; a daemon that started its own session (as
// daemonizing utilities do) survives, as it must.
//
// # Bounds
//
// A volume host's command must not be able to exhaust the mount pod, nor
// the service its caller:
//
//   - Every command has a timeout: the call's, else [DefaultCommandTimeout]
//     (2 minutes); a call asking for more than [DefaultMaxTimeout] (an hour)
//     is refused (INVALID_ARGUMENT) before anything runs.
//   - At most [DefaultMaxConcurrent] (32) commands run at once; a further
//     call waits for one to end, as long as its caller waits (its deadline)
//     and at most [DefaultQueueWait] (2 minutes), then is refused
//     (RESOURCE_EXHAUSTED, "exec service busy"), nothing run. At most
//     [DefaultMaxQueued] (1024) calls wait; a further one is refused at
//     once. A node mounting 100 volumes at once queues them here
//     (test/e2e TestLoad).
//   - Each output stream carries at most execserver.MaxOutput (16 MiB, as
//     CRI ExecSync); the rest is read and dropped, so the command never
//     blocks on a full pipe, and the Exit says which stream was truncated.
//   - Standard input is fed only while the main process runs: a daemon it
//     left holding the pipe without reading cannot hold the feeding
//     goroutine or its descriptor once the command has exited.
//
// Each Exec carries the pod UID and container the client expects; the server
// refuses (FAILED_PRECONDITION) before running anything if they are not its
// own ([Config].Identity), so a cached placement can never run a command in
// the wrong pod.
package execserver
