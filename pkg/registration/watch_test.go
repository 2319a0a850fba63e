package registration

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func startWatch(t *testing.T, dir string, opts WatchOptions) <-chan Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts.Logger = quiet
	ch, err := Watch(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		for range ch { // the channel is closed once the watcher stopped
		}
	})
	return ch
}

func expectEvent(t *testing.T, ch <-chan Event, plugin string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Plugin == plugin {
				return
			}
		case <-deadline:
			t.Fatalf("no event for %s", plugin)
		}
	}
}

func expectNoEvent(t *testing.T, ch <-chan Event, within time.Duration) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(within):
	}
}

func TestWatchCreateOverwriteDelete(t *testing.T) {
	dir := regDir(t)
	ch := startWatch(t, dir, WatchOptions{Debounce: 20 * time.Millisecond})

	mustWrite(t, dir, plugin, validReg())
	expectEvent(t, ch, plugin)

	r := validReg()
	r.PodUID = "other"
	mustWrite(t, dir, plugin, r)
	expectEvent(t, ch, plugin)

	if _, err := RemoveIfOwned(dir, plugin, "other"); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, ch, plugin)

	// Files that are not registrations, dotfiles included, are ignored.
	writeRaw(t, filepath.Join(dir, ".kubernetes.io~rbd.json"), []byte("x"), 0o644)
	writeRaw(t, filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	expectNoEvent(t, ch, 300*time.Millisecond)
}

func TestWatchCoalescesBursts(t *testing.T) {
	dir := regDir(t)
	ch := startWatch(t, dir, WatchOptions{})
	const writes = 40
	start := time.Now()
	for i := range writes {
		mustWrite(t, dir, plugin, generation(i))
		mustWrite(t, dir, "kubernetes.io/rbd", generation(i))
	}
	elapsed := time.Since(start)
	counts := map[string]int{}
	quietFor := time.After(2 * DefaultMaxDelay)
loop:
	for {
		select {
		case ev := <-ch:
			counts[ev.Plugin]++
		case <-quietFor:
			break loop
		}
	}
	// Under continuous change at most one batch per MaxDelay goes out, plus
	// the batch that ends the burst.
	limit := int(elapsed/DefaultMaxDelay) + 2
	for _, p := range []string{plugin, "kubernetes.io/rbd"} {
		if counts[p] < 1 || counts[p] > limit {
			t.Errorf("%s: %d events for %d writes in %v, want 1..%d", p, counts[p], writes, elapsed, limit)
		}
	}
}

func TestWatchSurvivesDirectoryRecreation(t *testing.T) {
	dir := regDir(t)
	mustWrite(t, dir, plugin, validReg())
	ch := startWatch(t, dir, WatchOptions{Debounce: 20 * time.Millisecond})

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, ch, plugin) // the known plugin vanished with the directory

	mustWrite(t, dir, "kubernetes.io/rbd", validReg()) // recreates the directory
	expectEvent(t, ch, "kubernetes.io/rbd")

	// The new directory is watched, not only seen.
	mustWrite(t, dir, plugin, validReg())
	expectEvent(t, ch, plugin)
}

func TestWatchMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugin-containers")
	ch := startWatch(t, dir, WatchOptions{Debounce: 20 * time.Millisecond})
	mustWrite(t, dir, plugin, validReg())
	expectEvent(t, ch, plugin)

	if _, err := Watch(context.Background(), filepath.Join(dir, "a", "b"), WatchOptions{Logger: quiet}); err == nil {
		t.Fatal("Watch accepted a directory whose parent does not exist")
	}
}

func TestWatchOverflowRescans(t *testing.T) {
	// A queue overflow cannot be produced on demand without changing the
	// host's inotify limits, so the error is injected where fsnotify would
	// deliver it.
	dir := regDir(t)
	mustWrite(t, dir, plugin, validReg())
	w, err := newWatcher(dir, WatchOptions{Debounce: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.run(ctx)
	// Nothing changed on disk: the event can only come from the rescan,
	// which reports every plugin it knows of.
	w.fw.Errors <- fsnotify.ErrEventOverflow
	got := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for !got[plugin] {
		select {
		case ev := <-w.out:
			got[ev.Plugin] = true
		case <-deadline:
			t.Fatalf("no rescan event after an overflow; got %v", got)
		}
	}
}
