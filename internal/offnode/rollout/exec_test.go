package rollout_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	rt "github.com/mountcontainers/mountcontainers/internal/offnode/rollout/rollouttest"
)

// A stream that never answers costs one call its CallTimeout, not the
// caller's whole wait: the error says so, and the caller's context is
// still live to ask again.
func TestPodExecBoundsOneCall(t *testing.T) {
	stalled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // hold the upgrade unanswered, as a stalled stream does
		case <-r.Context().Done():
		case <-stalled:
		}
	}))
	defer srv.Close()
	defer close(stalled)
	cfg := &rest.Config{Host: srv.URL}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := rt.MountPod(ns, dsName, "uid-ds", "mp-n1", "n1", "old", true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = (&rollout.PodExec{Config: cfg, Client: client, CallTimeout: 300 * time.Millisecond}).Status(ctx, pod, "mount")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") || !strings.Contains(err.Error(), "mp-n1") {
		t.Fatalf("Status against a stalled stream: %v, want an error naming the pod and the bound", err)
	}
	if took > 20*time.Second || ctx.Err() != nil {
		t.Fatalf("the call took %s (caller's context: %v)", took, ctx.Err())
	}
}
