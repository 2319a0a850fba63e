package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/metrics"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// serveUntilRegistered runs serve until both plugins are registered, then
// calls during, stops serve and returns its exit code and log.
func serveUntilRegistered(t *testing.T, dir string, during func()) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var code int
	var stderr string
	go func() {
		defer close(done)
		code, _, stderr = runApp(ctx, "serve")
	}()
	registered := func() bool {
		for _, p := range []string{"kubernetes.io/rbd", "kubernetes.io/glusterfs"} {
			if _, ok, err := registration.Read(dir, p); err != nil || !ok {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(10 * time.Second); !registered(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("not registered within 10s (exit %d):\n%s", code, stderr)
		}
	}
	during()
	cancel()
	<-done
	return code, stderr
}

// freeAddr returns a loopback address nothing listens on (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestServeMetrics: /metrics shows both plugins registered. The gauge is
// set just after the registration file is written, so the test reads
// /metrics until it shows them, for at most 5 s.
func TestServeMetrics(t *testing.T) {
	dir := setPodEnv(t)
	addr := freeAddr(t)
	t.Setenv("MOUNTPOD_METRICS_ADDRESS", addr)
	want := []string{
		`mountcontainers_registration_state{plugin="kubernetes.io/rbd",state="registered"} 1`,
		`mountcontainers_registration_state{plugin="kubernetes.io/glusterfs",state="registered"} 1`,
		`mountcontainers_build_info{`,
		`process_resident_memory_bytes `,
	}
	var text string
	code, stderr := serveUntilRegistered(t, dir, func() {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Errorf("GET /metrics: %v", err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text = string(b)
			if len(missing(text, want)) == 0 || time.Now().After(deadline) {
				return
			}
		}
	})
	if code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr)
	}
	if m := missing(text, want); len(m) > 0 {
		t.Errorf("no %q in /metrics after 5 s:\n%s", m, text)
	}
}

// missing returns the strings of want that text does not contain.
func missing(text string, want []string) []string {
	var m []string
	for _, w := range want {
		if !strings.Contains(text, w) {
			m = append(m, w)
		}
	}
	return m
}

// TestServeMetricsPortTaken: a metrics address that cannot be bound (another
// mount pod of the node on the same port) is logged, naming the address,
// and the pod serves all the same.
func TestServeMetricsPortTaken(t *testing.T) {
	dir := setPodEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("MOUNTPOD_METRICS_ADDRESS", l.Addr().String())
	code, stderr := serveUntilRegistered(t, dir, func() {})
	if code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "metrics cannot listen") || !strings.Contains(stderr, l.Addr().String()) {
		t.Errorf("the log does not say the metrics could not listen on %s:\n%s", l.Addr(), stderr)
	}
}

func TestServeMetricsOff(t *testing.T) {
	dir := setPodEnv(t)
	t.Setenv("MOUNTPOD_METRICS_ADDRESS", "")
	code, stderr := serveUntilRegistered(t, dir, func() {})
	if code != 0 || !strings.Contains(stderr, "metrics are off") {
		t.Fatalf("serve exited %d; want 0 and a log that metrics are off:\n%s", code, stderr)
	}
}

// The survey's observer labels a mount that names no plugin by its
// record's, read again at every survey: a record written or removed
// between two surveys counts at the next one.
func TestSurveyObserverLabelsByRecords(t *testing.T) {
	dir := t.TempDir()
	const glusterfs = "kubernetes.io/glusterfs"
	m := metrics.New(metrics.Options{Plugins: []string{glusterfs}, NoProcessCollectors: true})
	observe := surveyObserver(m, dir)
	records := filepath.Join(dir, mountrecord.Dir)
	targetA := "/var/lib/kubelet/pods/a/volumes/kubernetes.io~glusterfs/data"
	targetB := "/var/lib/kubelet/pods/b/volumes/kubernetes.io~glusterfs/data"
	write := func(target string) {
		t.Helper()
		if err := mountrecord.Write(records, mountrecord.Record{Plugin: glusterfs, Source: "srv:/vol", Target: target, FSType: "glusterfs"}); err != nil {
			t.Fatal(err)
		}
	}
	report := livemount.Report{Mounts: []livemount.Mount{{Target: targetA, Healthy: true}, {Target: targetB, Healthy: true}}}
	gauge := func() (string, string) {
		t.Helper()
		out := map[string]string{}
		for _, f := range must(m.Registry().Gather()) {
			if f.GetName() != "mountcontainers_live_mounts" {
				continue
			}
			for _, s := range f.GetMetric() {
				out[s.GetLabel()[0].GetValue()] = fmt.Sprint(s.GetGauge().GetValue())
			}
		}
		return out[glusterfs], out[metrics.PluginOther]
	}
	write(targetA)
	observe(report, nil)
	if g, o := gauge(); g != "1" || o != "1" {
		t.Errorf("with A's record: %s of %s, %s other; want 1 and 1", g, glusterfs, o)
	}
	write(targetB)
	observe(report, nil)
	if g, o := gauge(); g != "2" || o != "0" {
		t.Errorf("with both records: %s of %s, %s other; want 2 and 0", g, glusterfs, o)
	}
	if err := mountrecord.Remove(records, targetA); err != nil {
		t.Fatal(err)
	}
	observe(report, nil)
	if g, o := gauge(); g != "1" || o != "1" {
		t.Errorf("with B's record only: %s of %s, %s other; want 1 and 1", g, glusterfs, o)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
