// Package registrar is the daemon of a mount pod: the pod side of the
// MountContainers registration contract.
//
// A mount pod is a DaemonSet pod whose image carries the utilities of one or
// more volume plugins (rbd, mount.glusterfs, mkfs.*, fsck.*). Its daemon
// checks that the utilities are really there, registers the pod for every
// configured plugin with [registration.Write], keeps those registrations in
// place while it runs, and removes them, if they still name this pod, when it
// is told to stop. [Check] is the readiness probe's view of the same state.
//
// # Start
//
// [Daemon.Run] first looks every required tool up in the search path and
// fails with a [MissingToolsError] naming the missing ones: a pod that cannot
// do the job must crash-loop visibly rather than register. It then writes
// every registration, overwriting leftovers of earlier pods. The pod cannot
// tell a leftover from a live competitor at this point, so it always takes
// over at start; the competitor yields (see below).
//
// # While running
//
// The daemon watches the registration directory and its parent with inotify
// and, for each plugin whose file may have changed, reads it again:
//   - names this pod: nothing to do (this is also how it sees its own writes);
//   - missing: it is written again;
//   - unreadable (malformed, invalid, a symbolic link, wrong mode...): it is
//     restored;
//   - names another pod: the daemon logs a warning naming that pod and stops
//     asserting the plugin (it yields). It never fights: a newer pod of the
//     same plugin, typically the replacement made by the DaemonSet, wins.
//     [Check] then reports the plugin as not ready.
//
// Yielding is not forever. While the other pod's registration is there,
// the daemon leaves it alone (an unreadable file too: its owner restores
// it). When it disappears, as when the other pod stops and unregisters, the
// daemon logs that and registers the plugin again, and defends it as
// before.
//
// A failed write is retried with exponential back-off. Every ResyncPeriod the
// daemon also re-reads all its registrations, in case an event was missed.
//
// # Storms
//
// The daemon does not use [registration.Watch]: fsnotify, under it, wakes the
// process for every inotify event, which costs several per cent of a core at
// a thousand writes a second. The daemon's own watch instead waits for the
// first event in poll(2), sleeps for Debounce while the kernel queues the
// rest of the burst, reads the whole queue at once, and, when the burst was
// large, sleeps until MaxDelay has passed before looking again. Under a
// storm it therefore wakes about once per MaxDelay (one second by default),
// reads each of its files once and restores each at most once, whatever the
// storm's rate; events for other files cost a map look-up. An overflowing
// kernel queue makes it re-read every file.
//
// # Stop
//
// When the context given to [Daemon.Run] ends (SIGTERM or SIGINT in the
// command), the daemon removes each registration with
// [registration.RemoveIfOwned], which under the directory's lock removes it
// only if it still names this pod: a replacement pod's registration survives
// the old pod's shutdown.
//
// # PID 1 and zombies
//
// The daemon must not be PID 1 of its container; tini is. Utilities run in
// the container by the volume host (through CRI ExecSync) are not children of
// the daemon, and some of them daemonize (the glusterfs FUSE client, rbd-nbd):
// their orphans are re-parented to PID 1 of the container's PID namespace.
// Only a PID 1 that reaps every child, as tini does, keeps those from piling
// up as zombies; the daemon waits only for its own children, and tini also
// forwards SIGTERM to it. [Daemon.Run] logs a warning when it finds itself
// running as PID 1.
//
// # Registration directory on a hostPath
//
// The directory is normally a hostPath volume. If it is deleted and created
// again on the node, the container keeps the old, deleted directory mounted
// and its registrations become invisible to the node. The daemon notices the
// link count of zero at its next resync and returns an error, so that the
// kubelet restarts the container with a fresh mount; [Check] reports it too.
package registrar
