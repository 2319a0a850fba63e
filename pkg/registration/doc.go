// Package registration implements the MountContainers registration contract.
//
// A mount pod announces that it carries the utilities of a volume plugin by
// writing a small JSON file into a well-known directory on the node:
//
//	/var/lib/kubelet/plugin-containers/<plugin name with / replaced by ~>.json
//
// containing
//
//	{"podNamespace":"kube-system","podName":"gluster-mount-x7k2p",
//	 "podUID":"0c9f...","containerName":"mount"}
//
// Volume hosts read the file and, when the named container is running, run the
// plugin's utilities inside it instead of on the host.
//
// # Writing
//
// [Write] is atomic and durable: the content goes to a temporary file whose
// name starts with a dot (watchers ignore dotfiles) in the same directory, is
// synced, renamed over the target and the directory is synced. A crash leaves
// either the old file or the new one, never a partial one; leftover temporary
// files are removed by the next write of the same plugin.
//
// Writers and [RemoveIfOwned] of this package serialise on an advisory lock
// (flock(2) on the dotfile ".mountcontainers.lock" in the directory), so that
// a mount pod shutting down never removes a registration that a newer pod has
// just written. Readers take no lock: rename(2) is atomic. Other
// implementations of the contract that do not take the lock stay compatible;
// they only lose that protection.
//
// # Reading
//
// Registrations are trusted by code that runs as root on every node, so
// [Read] is paranoid: the file is opened with O_NOFOLLOW|O_NONBLOCK (a
// symlink is refused and a FIFO cannot block), must be a regular file of at
// most [MaxFileSize] bytes, owned by root or by the reader's effective UID,
// and neither the file nor the directory may be writable by group or others.
// The directory and each of its ancestors up to / are walked without
// following a symbolic link: each must be a real directory owned by root or
// that UID, and an ancestor may be writable by others only when it is
// root's and sticky (as /tmp is). A missing file is not an error: the plugin is simply not registered.
// Unknown JSON fields are ignored so that the contract can grow; the known
// ones are validated.
//
// # Watching
//
// [Watch] reports which plugins' registrations may have changed. It watches
// the directory (never the files, whose watches an atomic rename would drop)
// and its parent (to survive the directory being removed and created again),
// coalesces bursts and limits the rate under a storm of changes. When the
// kernel's event queue overflows it reports every plugin it knows of.
//
// During a burst the watcher sleeps a debounce period at a time and takes
// what queued up meanwhile, so it reports at most once per MaxDelay under
// continuous change. fsnotify still wakes up once per inotify event to queue
// it: BenchmarkWatchStorm measures about 5% of a core for 1000 file writes a
// second on a 2-core machine. A daemon that must stay below that under a
// storm (the mount pod's) reads inotify itself in batches.
package registration
