// Package rollout upgrades the mount pods of one MountContainers DaemonSet
// node by node without breaking a live mount: `mountpod-rollout`.
//
// A mount pod carries the FUSE daemons (glusterfs) and the utilities behind
// the node's mounts of its volume plugins, so deleting it under live mounts
// turns them into "Transport endpoint is not connected". Its DaemonSet is
// therefore updateStrategy OnDelete, and [Rollout] replaces the pods only on
// a node it has emptied of those mounts first.
//
// # Per node
//
// For each node whose mount pod is outdated (its controller-revision-hash
// label differs from the DaemonSet's newest ControllerRevision), at most
// MaxUnavailable nodes at a time:
//
//  1. taint: add [TaintKey]=<namespace>.<name>:NoSchedule; only the mount
//     pod tolerates it, so nothing new lands on the node;
//  2. drain: evict, through the Eviction API with [k8s.io/kubectl/pkg/drain]
//     (PodDisruptionBudgets respected), the pods that use the plugin's
//     volumes (flexVolume or CSI driver names, in-tree plugin sources, the
//     same through PersistentVolumeClaims), the pods matching a label
//     selector, or every non-DaemonSet pod;
//  3. wait-unmount: wait until the mounts the mount pod serves are gone
//     from the node, observed through the mount pod itself (its view of the
//     kubelet directory is the node's; see [MountLister]): the mounts of
//     the plugin's volumes in its mount table, and the FUSE mounts its
//     live-mount report ([StatusReader]) shows served by a daemon that is
//     not in the mount's scope. A pod's disappearance is not enough, the
//     kubelet unmounts after; a mount pod that cannot be read through (none
//     on the node, its container not running, the exec failing) is no
//     answer, and the wait goes on;
//  4. delete-pod: delete the old mount pod and wait until it is gone;
//  5. wait-ready: wait for the replacement of the current revision to be
//     Ready (its readiness probe, `mountpod check`, is its registration);
//  6. untaint: remove the taint.
//
// The drivers drained for are those of Options.Drivers and the flexVolume
// driver the DaemonSet's container installs (its environment, see
// boundary.EnvFlexvolumeDir).
//
// # In place
//
// With [StrategyInPlace] ([InPlaceSteps]) a node whose live FUSE mounts all
// run their daemons in scopes (docs/scopes.md), so that they outlive the
// mount pod, is neither tainted nor drained:
//
//  1. inspect-mounts: read the old mount pod's live-mount report; if a
//     mount is not scoped, go on with the drain steps above
//     ([UnscopedDrain]) or fail, untouched ([UnscopedRefuse]);
//  2. delete-pod and wait-ready as above;
//  3. verify-mounts: read the new pod's report: every mount of the old
//     report must still be there (unless the pod using it went meanwhile),
//     healthy and scoped, and no other mount broken;
//  4. untaint, which only does something on a node an earlier run fenced.
//
// A failure leaves such a node as it is, untainted.
//
// Every wait is bounded. Any failure leaves the taint on (a node whose new
// mount pod is not registered is never reopened), records the reason in the
// [RecordAnnotation] of the DaemonSet and in an Event, and ends the run with
// an [*Error] telling the operator what to do; Options.Resume continues.
//
// # Lock and progress record
//
// The lock is a coordination.k8s.io/v1 Lease named after the DaemonSet, in
// its namespace, held through client-go's leader election
// ([k8s.io/client-go/tools/leaderelection]) and renewed every sixth of
// Options.LockLease while the rollout runs. Whether another holder's lease
// has run out is judged by time observed here: the Lease must be seen
// unchanged for its whole duration before it is taken over, so clocks that
// disagree between machines do not matter. A rollout refuses to start as
// soon as it sees another holder renew the Lease, and waits while one that
// stopped renewing has not been seen so for its duration (a rollout that
// ends releases the Lease, so the next one takes it at once).
//
// The holder acts only until two thirds of the lease after the send of its
// last renewal that succeeded: every step, node update, eviction, pod
// deletion, record write and Event checks first, and the steps' context is
// cancelled at that moment. When the API server stops answering, the
// rollout therefore stops acting before another can take the lock over;
// it never untaints, evicts or deletes after losing it, and says so.
//
// The [Record] in the DaemonSet's [RecordAnnotation] is the progress: the
// phase (running, failed, done) and each node's step, for Options.Resume.
// It is written under the lock, with the DaemonSet's resourceVersion as
// precondition, and only while it names this rollout as Holder. A rollout
// refuses to start after a failed or interrupted one unless Options.Resume
// is set; a resumed rollout first finishes the nodes the record left
// unfinished (and any node still carrying its taint), then the outdated
// ones. Every step is idempotent, so a node is always processed from the
// start.
//
// # Caveats
//
//   - Mounts are read through the old mount pod. If that pod's container is
//     not running there is nothing to read through, and wait-unmount fails
//     when its time is up; the exception is a node an earlier run of the
//     same rollout emptied and kept fenced (its record has the node past
//     wait-unmount), whose new mount pod never got Ready. Likewise
//     inspect-mounts replaces again in place a pod this rollout put there.
//   - With hostPID the live-mount report cannot tell this mount pod's
//     daemons from other processes naming the mount target, and sees other
//     plugins' mounts unscoped (their scopes are not its plugins'): both
//     count as served by the pod, which errs on the safe side.
//   - A mount pod whose image predates `mountpod status` ([ErrNoStatus])
//     is drained waiting for the mounts of the plugin's volumes alone, and
//     is never replaced in place.
//   - DaemonSet pods and mirror pods that use the plugin's volumes are not
//     evicted (they would come back or cannot be); their mounts make
//     wait-unmount time out, which names them.
package rollout
