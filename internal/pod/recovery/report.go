package recovery

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/kubeevents"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Reasons of the Events an [EventReporter] records.
const (
	ReasonRecovered      = "FUSEMountRecovered"
	ReasonRecoveryFailed = "FUSEMountRecoveryFailed"
	// ReasonRecoveryRefused: a dead mount is not made again, because
	// [Recoverer.Allow] refused its record.
	ReasonRecoveryRefused = "FUSEMountRecoveryRefused"
)

// EventReporter records Kubernetes Events of what the recovery does: on
// the workload pod a mount was made for (when its record names it, and that
// pod is the one whose volume directory holds the mount's target) and on
// the mount pod.
type EventReporter struct {
	Events *kubeevents.Recorder
	// MountPod is the mount pod itself.
	MountPod kubeevents.Object
	// Logger hears of a record whose pod is not the target's; default
	// slog.Default().
	Logger *slog.Logger
}

var _ Reporter = EventReporter{}

// Recovered records a Warning on both pods: the mount is back, but files
// open at the time are not.
func (e EventReporter) Recovered(rec mountrecord.Record, res Result) {
	pod := e.pod(rec)
	for _, p := range e.pods(rec) {
		e.Events.Event(podObject(&p.Pod), kubeevents.Warning, ReasonRecovered,
			fmt.Sprintf("volume %q came back %s after its FUSE daemon died (%s); files open at the time must be reopened",
				p.Volume, res.Took.Round(time.Millisecond), rec.Source))
	}
	e.Events.Event(e.MountPod, kubeevents.Warning, ReasonRecovered,
		fmt.Sprintf("the FUSE mount of %s at %s%s came back %s after its daemon died; attached again in %d container(s)",
			rec.Source, rec.Target, forPod(pod), res.Took.Round(time.Millisecond), len(res.Attached)))
}

// Failed records a Warning on both pods.
func (e EventReporter) Failed(rec mountrecord.Record, attempt int, retryIn time.Duration, err error) {
	pod := e.pod(rec)
	for _, p := range e.pods(rec) {
		e.Events.Event(podObject(&p.Pod), kubeevents.Warning, ReasonRecoveryFailed,
			fmt.Sprintf("volume %q is dead (its FUSE daemon died) and bringing it back failed, attempt %d, next in %s: %v (mount pod %s/%s)",
				p.Volume, attempt, retryIn, err, e.MountPod.Namespace, e.MountPod.Name))
	}
	e.Events.Event(e.MountPod, kubeevents.Warning, ReasonRecoveryFailed,
		fmt.Sprintf("bringing back the FUSE mount of %s at %s%s failed, attempt %d, next in %s: %v",
			rec.Source, rec.Target, forPod(pod), attempt, retryIn, err))
}

// Refused records a Warning on both pods: the mount stays dead.
func (e EventReporter) Refused(rec mountrecord.Record, err error) {
	pod := e.pod(rec)
	for _, p := range e.pods(rec) {
		e.Events.Event(podObject(&p.Pod), kubeevents.Warning, ReasonRecoveryRefused,
			fmt.Sprintf("volume %q is dead (its FUSE daemon died) and is not made again: %v (mount pod %s/%s)",
				p.Volume, err, e.MountPod.Namespace, e.MountPod.Name))
	}
	e.Events.Event(e.MountPod, kubeevents.Warning, ReasonRecoveryRefused,
		fmt.Sprintf("the FUSE mount of %s at %s%s is dead and is not made again: %v", rec.Source, rec.Target, forPod(pod), err))
}

// pods returns the workload pods to record Events on for rec, each with
// the name of its volume: the pod rec names (see [EventReporter.pod]);
// for a record of a node's mount that pods share (which names none), the
// pods whose volume directories bind it, as the driver lists them beside
// it (mountrecord.ReadPods). A list that cannot be read in whole is
// logged, and what could be read is used.
func (e EventReporter) pods(rec mountrecord.Record) []mountrecord.PodVolume {
	if p := e.pod(rec); p != nil {
		return []mountrecord.PodVolume{{Pod: *p, Volume: filepath.Base(rec.Target)}}
	}
	if rec.Pod != nil {
		return nil
	}
	listed, err := mountrecord.ReadPods(rec.Target)
	if err != nil {
		e.logger().Warn("the pods of a shared mount cannot all be read: some get no Event", "path", rec.Target, "err", err)
	}
	return listed
}

func (e EventReporter) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.Default()
}

// pod returns the workload pod to record Events on for rec: the pod rec
// names, when it is the pod whose volume directory holds rec's target.
// Otherwise it logs a warning naming the record and returns nil: the pod is
// named by the volume's options, which need not be the kubelet's.
func (e EventReporter) pod(rec mountrecord.Record) *mountrecord.Pod {
	if err := rec.CheckPod(); err != nil {
		log := e.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("no Event on the pod a mount record names: it is not the pod of the mount's target",
			"record", mountrecord.FileName(rec.Target), "path", rec.Target, "err", err)
		return nil
	}
	return rec.Pod
}

func podObject(p *mountrecord.Pod) kubeevents.Object {
	return kubeevents.Object{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

func forPod(p *mountrecord.Pod) string {
	if p == nil {
		return ""
	}
	return " (pod " + p.String() + ")"
}
