package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// gcPercentAfter runs setGCPercent with args and returns the GC
// percentage it left.
func gcPercentAfter(t *testing.T, args ...string) int {
	t.Helper()
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	app := &cli.App{Flags: []cli.Flag{gcPercentFlag()}, Action: func(c *cli.Context) error {
		setGCPercent(c, slog.New(slog.DiscardHandler))
		return nil
	}}
	if err := app.Run(append([]string{"mountpod"}, args...)); err != nil {
		t.Fatal(err)
	}
	return debug.SetGCPercent(100)
}

func TestGCPercent(t *testing.T) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		t.Setenv("GOGC", v) // restored after the test
		os.Unsetenv("GOGC")
	}
	t.Setenv("MOUNTPOD_GC_PERCENT", "")
	os.Unsetenv("MOUNTPOD_GC_PERCENT")
	if got := gcPercentAfter(t); got != defaultGCPercent {
		t.Errorf("default: GC percent %d, want %d", got, defaultGCPercent)
	}
	if got := gcPercentAfter(t, "--gc-percent", "60"); got != 60 {
		t.Errorf("--gc-percent 60: GC percent %d", got)
	}
	t.Setenv("MOUNTPOD_GC_PERCENT", "70")
	if got := gcPercentAfter(t); got != 70 {
		t.Errorf("MOUNTPOD_GC_PERCENT=70: GC percent %d", got)
	}
	// GOGC, read by the runtime, wins: the percentage is left alone.
	t.Setenv("GOGC", "80")
	if got := gcPercentAfter(t, "--gc-percent", "60"); got != 100 {
		t.Errorf("with GOGC: GC percent %d, want it untouched (100)", got)
	}
}

// trimSink holds TestMemoryTrim's burst of memory.
var trimSink [][]byte

// heapHeld is what the heap holds of the node's memory: objects, live or
// not yet collected, and free spans not returned.
func heapHeld() uint64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64() + s[2].Value.Uint64()
}

// TestMemoryTrim: after a busy spell (32 MiB live across a GC cycle, then
// garbage that no cycle collects while nothing allocates) the trim hands
// the heap back within a few quiet looks, and says so in the debug log;
// while quiet and idle it does not trim again (the rule: TestTrimRule).
func TestMemoryTrim(t *testing.T) {
	debug.FreeOSMemory()
	before := heapHeld()
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimMemory(ctx, log, 20*time.Millisecond, 3, 2<<20)
	}()
	defer func() { cancel(); <-done }()
	trims := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(logs.String(), "returned the free heap to the node")
	}

	for range 32 {
		trimSink = append(trimSink, make([]byte, 1<<20))
	}
	runtime.GC() // the busy spell's cycle: the 32 MiB are live
	trimSink = nil
	// What was garbage before the burst went in its cycle: the heap holds
	// at least the burst, not necessarily more than before.
	if h := heapHeld(); h < 32<<20 {
		t.Fatalf("the heap holds %d bytes after the burst, want at least its %d", h, 32<<20)
	}
	// The trim logs after it returned the heap: both are waited for (the
	// heap seen back before the line was written failed a loaded run).
	deadline := time.Now().Add(10 * time.Second) // a hang guard, not a verdict
	for heapHeld() > before+8<<20 || trims() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the burst the heap holds %d bytes (%d before it) and %d trims were logged; want it back, by a trim:\n%s", heapHeld(), before, trims(), logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := trims()
	time.Sleep(200 * time.Millisecond) // ten quiet looks
	if n := trims(); n != after {
		t.Errorf("%d trims logged once the heap was back, %d after ten idle looks; want no more:\n%s", after, n, logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestTrimRule: the trim waits for three quiet looks in a row; a cycle
// between them starts the count again; once trimmed, it trims again only
// after another cycle or a heap grown by more than the slack.
func TestTrimRule(t *testing.T) {
	r := trimRule{quietLooks: 3, slack: 2 << 20}
	r.trimmed(10, 4<<20)
	steps := []struct {
		cycles, held uint64
		trim         bool
		say          string
	}{
		{10, 4 << 20, false, "quiet, nothing since the trim"},
		{11, 30 << 20, false, "a cycle: busy"},
		{11, 30 << 20, false, "quiet 1"},
		{12, 30 << 20, false, "a cycle again: the count starts again"},
		{12, 30 << 20, false, "quiet 1"},
		{12, 30 << 20, false, "quiet 2"},
		{12, 30 << 20, true, "quiet 3, a cycle since the trim"},
	}
	for i, s := range steps {
		if got := r.look(s.cycles, s.held); got != s.trim {
			t.Fatalf("look %d (%s): trim %v, want %v", i+1, s.say, got, s.trim)
		}
	}
	r.trimmed(13, 4<<20) // the trim's own cycle
	for i, s := range []struct {
		cycles, held uint64
		trim         bool
		say          string
	}{
		{13, 4 << 20, false, "idle after the trim"},
		{13, 5 << 20, false, "idle, grown within the slack"},
		{13, 5 << 20, false, "idle"},
		{13, 7 << 20, true, "idle, grown beyond the slack (no cycle ran)"},
	} {
		if got := r.look(s.cycles, s.held); got != s.trim {
			t.Fatalf("after the trim, look %d (%s): trim %v, want %v", i+1, s.say, got, s.trim)
		}
	}
}
