package rollout_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	rt "github.com/mountcontainers/mountcontainers/internal/offnode/rollout/rollouttest"
)

// TestEmptyDirNeedsFlag: a pod to evict with an emptyDir volume fails the
// drain, naming the pod, the volume and the flag, and is not evicted; with
// DeleteEmptyDirData the resumed rollout evicts it.
func TestEmptyDirNeedsFlag(t *testing.T) {
	scratch := rt.Workload("app", "scratch", "n1", driver, nil)
	scratch.Spec.Volumes = append(scratch.Spec.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	e := newEnv(t, nil, scratch)
	_, err := e.run(nil)
	wantFailure(t, err, "n1", rollout.StepDrain, "app/scratch (emptyDir cache)", "--delete-emptydir-data")
	if n := e.c.Evictions("app/scratch"); n != 0 {
		t.Fatalf("pod with emptyDir evicted %d times without the flag", n)
	}
	if _, err := e.run(func(o *rollout.Options) { o.Resume = true; o.DeleteEmptyDirData = true }); err != nil {
		t.Fatal(err)
	}
	if e.c.Evictions("app/scratch") != 1 {
		t.Error("pod with emptyDir not evicted with DeleteEmptyDirData")
	}
}
