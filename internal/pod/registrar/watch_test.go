package registrar

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWatchOverflowReportsAll fills the kernel's inotify queue while the
// watch sleeps: the lost events must be reported as "everything changed".
func TestWatchOverflowReportsAll(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skipf("cannot read the inotify queue limit: %v", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || limit > 1<<17 {
		t.Skipf("inotify queue limit %q too large to fill quickly", data)
	}
	dir := filepath.Join(t.TempDir(), "plugin-containers")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := newDirWatch(dir, map[string]string{"kubernetes.io~rbd.json": rbd}, 10*time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// The queue fills before the watch reads anything (as while it
	// sleeps), however fast this machine writes: the watch exists, its
	// loop has not started.
	// Unrelated files, alternating so that the kernel cannot merge
	// identical events; each create is one event, each remove another.
	for i := 0; i < limit; i++ {
		f := filepath.Join(dir, "other-"+strconv.Itoa(i%2)+".json")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan batch, 1)
	go w.run(ctx, out)
	select {
	case b := <-out:
		if !b.all {
			t.Errorf("batch after an overflow = %+v, want all", b)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("no batch after an overflow")
	}
}

// TestWatchIgnoresOtherFiles checks that events for files the daemon does
// not serve produce no batch, and that its own file does.
func TestWatchIgnoresOtherFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugin-containers")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := newDirWatch(dir, map[string]string{"kubernetes.io~rbd.json": rbd}, 10*time.Millisecond, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan batch)
	done := make(chan struct{})
	go func() { w.run(ctx, out); close(done) }()
	mustWrite(t, filepath.Join(dir, "kubernetes.io~cephfs.json"), "x", 0o644)
	mustWrite(t, filepath.Join(dir, ".kubernetes.io~rbd.json.tmp-1"), "x", 0o644)
	mustWrite(t, filepath.Join(dir, "kubernetes.io~rbd.json"), "x", 0o644)
	select {
	case b := <-out:
		if b.all || len(b.plugins) != 1 || !b.plugins[rbd] {
			t.Errorf("batch = %+v, want only %s", b, rbd)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no batch for the watched file")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if _, ok := <-out; ok {
		t.Error("out not closed after cancel")
	}
}
