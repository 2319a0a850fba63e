package recovery

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/kubeevents"
	"github.com/mountcontainers/mountcontainers/internal/mountrecord"
)

// Reasons of the Events an [EventReporter] records.
const (
	ReasonRecovered      = "FUSEMountRecovered"
	ReasonRecoveryFailed = "FUSEMountRecoveryFailed"
)

// EventReporter records Kubernetes Events of what the recovery does: on
// the workload pod a mount was made for (when its record names it) and on
// the mount pod.
type EventReporter struct {
	Events *kubeevents.Recorder
	// MountPod is the mount pod itself.
	MountPod kubeevents.Object
}

// Recovered records a Warning on both pods: the mount is back, but files
// open at the time are not.
func (e EventReporter) Recovered(rec mountrecord.Record, res Result) {
	vol := filepath.Base(rec.Target)
	if rec.Pod != nil {
		e.Events.Event(podObject(rec.Pod), kubeevents.Warning, ReasonRecovered,
			fmt.Sprintf("volume %q came back %s after its FUSE daemon died (%s); files open at the time must be reopened",
				vol, res.Took.Round(time.Millisecond), rec.Source))
	}
	e.Events.Event(e.MountPod, kubeevents.Warning, ReasonRecovered,
		fmt.Sprintf("the FUSE mount of %s at %s%s came back %s after its daemon died; attached again in %d container(s)",
			rec.Source, rec.Target, forPod(rec.Pod), res.Took.Round(time.Millisecond), len(res.Attached)))
}

// Failed records a Warning on both pods.
func (e EventReporter) Failed(rec mountrecord.Record, attempt int, retryIn time.Duration, err error) {
	if rec.Pod != nil {
		e.Events.Event(podObject(rec.Pod), kubeevents.Warning, ReasonRecoveryFailed,
			fmt.Sprintf("volume %q is dead (its FUSE daemon died) and bringing it back failed, attempt %d, next in %s: %v (mount pod %s/%s)",
				filepath.Base(rec.Target), attempt, retryIn, err, e.MountPod.Namespace, e.MountPod.Name))
	}
	e.Events.Event(e.MountPod, kubeevents.Warning, ReasonRecoveryFailed,
		fmt.Sprintf("bringing back the FUSE mount of %s at %s%s failed, attempt %d, next in %s: %v",
			rec.Source, rec.Target, forPod(rec.Pod), attempt, retryIn, err))
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
