package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

const (
	// TaintKey is the key of the NoSchedule taint that fences a node while
	// its mount pod is replaced. Its value is "<namespace>.<DaemonSet name>",
	// so two DaemonSets' rollouts never remove each other's taint.
	TaintKey = "mountcontainers.io/upgrading"
	// RecordAnnotation is the DaemonSet annotation holding the [Record],
	// the rollout's progress (the lock is a Lease, see [Rollout.Run]).
	RecordAnnotation = "mountcontainers.io/rollout"
	// RevisionLabel is the pod label naming its DaemonSet revision.
	RevisionLabel = appsv1.DefaultDaemonSetUniqueLabelKey
	// EventSource is the component name of the Events the rollout records.
	EventSource = "mountpod-rollout"
	// DefaultNamespace is the namespace deploy/ puts the mount pods in
	// (deploy/namespace), the one where deploy/rbac grants the rollout
	// what it needs; mountpod-rollout's --namespace defaults to it.
	DefaultNamespace = "mountcontainers"
)

// Step is a stage of a node's upgrade.
type Step string

// The steps.
const (
	StepPending Step = "pending"
	StepInspect Step = "inspect-mounts"
	StepTaint   Step = "taint"
	StepDrain   Step = "drain"
	StepUnmount Step = "wait-unmount"
	StepDelete  Step = "delete-pod"
	StepReady   Step = "wait-ready"
	StepVerify  Step = "verify-mounts"
	StepUntaint Step = "untaint"
	StepDone    Step = "done"
)

// Steps lists the steps a node goes through with [StrategyDrain], in order.
var Steps = []Step{StepTaint, StepDrain, StepUnmount, StepDelete, StepReady, StepUntaint}

// InPlaceSteps lists the steps a node goes through with
// [StrategyInPlace] when every live mount is scoped, in order. A node with
// an unscoped live mount goes on after StepInspect with [Steps] instead
// (or fails there, with [UnscopedRefuse]).
var InPlaceSteps = []Step{StepInspect, StepDelete, StepReady, StepVerify, StepUntaint}

// Strategy is how a node's mount pod is replaced.
type Strategy string

const (
	// StrategyDrain fences the node, evicts the pods using the plugin's
	// volumes and waits until their mounts are gone before replacing the
	// mount pod.
	StrategyDrain Strategy = "drain"
	// StrategyInPlace replaces the mount pod under its live mounts when
	// every one is scoped (its daemons run in a scope outside the pod, see
	// docs/scopes.md), then checks that they all survived.
	StrategyInPlace Strategy = "in-place"
)

// UnscopedPolicy is what [StrategyInPlace] does on a node with a live mount
// that is not scoped, which would die with the mount pod.
type UnscopedPolicy string

const (
	// UnscopedDrain upgrades that node with [StrategyDrain].
	UnscopedDrain UnscopedPolicy = "drain"
	// UnscopedRefuse fails that node, untouched, naming the mounts.
	UnscopedRefuse UnscopedPolicy = "refuse"
)

// ErrorKind tells whether a rollout failed before touching anything.
type ErrorKind int

const (
	// Refused: preflight or the lock stopped the rollout; no node was touched.
	Refused ErrorKind = iota + 1
	// Failed: a step failed or timed out; the node it ran on stays tainted.
	Failed
)

// Error is what [Rollout.Run] returns when it stops: what went wrong and
// what the operator should do about it.
type Error struct {
	Kind ErrorKind
	// Node and Step locate a failure; both empty for a refusal.
	Node string
	Step Step
	// Err is the cause.
	Err error
	// Hint says what to do, in a sentence or two.
	Hint string
}

// Error renders the failure, then the hint on its own lines.
func (e *Error) Error() string {
	var msg string
	switch {
	case e.Node != "":
		msg = fmt.Sprintf("node %s: %s: %v", e.Node, e.Step, e.Err)
	default:
		msg = e.Err.Error()
	}
	if e.Hint != "" {
		msg += "\n" + e.Hint
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// refuse returns a Refused error.
func refuse(hint, format string, args ...any) *Error {
	return &Error{Kind: Refused, Err: fmt.Errorf(format, args...), Hint: hint}
}

// IsRefused reports whether err is a refusal: no node was touched.
func IsRefused(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == Refused
}

// Options configure a rollout. The zero value of every field but Namespace
// and Name means its default.
type Options struct {
	// Namespace and Name identify the mount-pod DaemonSet.
	Namespace, Name string
	// MaxUnavailable is how many nodes are upgraded at once (default 1).
	MaxUnavailable int
	// Strategy is how mount pods are replaced (default StrategyDrain).
	Strategy Strategy
	// Unscoped is what StrategyInPlace does on a node with an unscoped live
	// mount (default UnscopedDrain).
	Unscoped UnscopedPolicy
	// DryRun only computes and reports the plan.
	DryRun bool
	// Resume continues a failed or interrupted rollout.
	Resume bool
	// AllPods drains every pod of the node that is not a DaemonSet's or a
	// mirror pod, not only those using the plugin's volumes.
	AllPods bool
	// PodSelector is a label selector of further pods to drain.
	PodSelector string
	// NodeSelector, when set, is a label selector of the nodes to upgrade
	// (kubectl drain's --selector); the DaemonSet's other nodes are left
	// as they are, a node an earlier rollout fenced included (the plan
	// warns of it).
	NodeSelector string
	// Plugins are the volume plugins the mount pod serves, such as
	// kubernetes.io/glusterfs (default: the MOUNTPOD_PLUGINS variable of the
	// DaemonSet's container).
	Plugins []string
	// Drivers are flexVolume and CSI driver names whose volumes the mount
	// pod serves, such as mountcontainers.io/glusterfs, besides the
	// flexVolume driver the DaemonSet's container installs (see
	// boundary.EnvFlexvolumeDir), which is always included.
	Drivers []string
	// MountFSTypes are further file-system types (such as fuse.glusterfs)
	// whose mounts, as the mount pod sees them, wait-unmount waits for.
	MountFSTypes []string
	// MountPatterns are regular expressions over mount points: matching
	// mounts are waited for too.
	MountPatterns []string
	// Container is the mount pod's container (default: the first).
	Container string
	// Force evicts pods that no controller owns (they do not come back).
	Force bool
	// DeleteEmptyDirData evicts pods with emptyDir volumes, whose data is
	// deleted with them; without it such a pod fails the drain.
	DeleteEmptyDirData bool
	// GracePeriod overrides the evicted pods' termination grace period in
	// seconds; negative (the default, -1) keeps each pod's own.
	GracePeriod *int
	// DrainTimeout bounds the eviction of a node's pods (default 5m); a
	// PodDisruptionBudget that forbids an eviction makes it expire.
	DrainTimeout time.Duration
	// UnmountTimeout bounds the wait for the mounts to go, and the reading
	// of a mount pod's live-mount report (inspect-mounts, verify-mounts)
	// (default 3m).
	UnmountTimeout time.Duration
	// DeleteTimeout bounds the old mount pod's deletion, until the API
	// server no longer has it (default 5m): its containers' stop, which a
	// runtime may take long over, is part of it.
	DeleteTimeout time.Duration
	// ReadyTimeout bounds the replacement's readiness (default 5m).
	ReadyTimeout time.Duration
	// RevisionTimeout bounds the wait for the DaemonSet controller to
	// observe the DaemonSet's newest generation (default 1m).
	RevisionTimeout time.Duration
	// PollInterval is how often waits look again (default 2s).
	PollInterval time.Duration
	// EvictRetryDelay is the pause after an eviction refused by a
	// PodDisruptionBudget (default 5s).
	EvictRetryDelay time.Duration
	// LockLease is the duration of the rollout lock's Lease (default 1m;
	// whole seconds, at least one): another rollout takes the lock over
	// once it has seen the Lease unrenewed that long. It is renewed every
	// sixth of it, and the rollout stops acting when two thirds of it have
	// passed since the send of its last renewal that succeeded.
	LockLease time.Duration
	// Holder names this rollout in the lock and the record (default host
	// name and PID).
	Holder string
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.MaxUnavailable <= 0 {
		o.MaxUnavailable = 1
	}
	if o.Strategy == "" {
		o.Strategy = StrategyDrain
	}
	if o.Unscoped == "" {
		o.Unscoped = UnscopedDrain
	}
	def(&o.DrainTimeout, 5*time.Minute)
	def(&o.UnmountTimeout, 3*time.Minute)
	def(&o.DeleteTimeout, 5*time.Minute)
	def(&o.ReadyTimeout, 5*time.Minute)
	def(&o.RevisionTimeout, time.Minute)
	def(&o.PollInterval, 2*time.Second)
	def(&o.EvictRetryDelay, 5*time.Second)
	def(&o.LockLease, time.Minute)
	if o.GracePeriod == nil {
		g := -1
		o.GracePeriod = &g
	}
	return o
}

// taintValue is the value of this DaemonSet's taint: "<namespace>.<name>",
// shortened with a hash when longer than a label value may be.
func (o Options) taintValue() string {
	v := o.Namespace + "." + o.Name
	if len(v) <= 63 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return strings.TrimRight(v[:54], "-_.") + "-" + hex.EncodeToString(sum[:4])
}
