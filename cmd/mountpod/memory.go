package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/urfave/cli/v2"
)

// defaultGCPercent is serve's GC target percentage unless GOGC or
// --gc-percent says otherwise: Go's own default. A lower target was
// measured and not taken (BENCHMARKS.md): at 25, BenchmarkServeStorm's
// steady RSS with metrics on was 16.9 MiB against 15.6 MiB at 100, a
// second after start and after the storm alike, although a minute of
// scrapes on a loaded machine had shown it about 1 MiB lower.
const defaultGCPercent = 100

func gcPercentFlag() cli.Flag {
	return &cli.IntFlag{
		Name: "gc-percent", EnvVars: []string{"MOUNTPOD_GC_PERCENT"}, Value: defaultGCPercent,
		Usage: "Go GC target percentage (as GOGC, which wins when set; negative turns the GC off: only with GOMEMLIMIT).",
	}
}

// setGCPercent sets the GC target percentage from --gc-percent, unless
// the environment has GOGC: the runtime has read it.
func setGCPercent(c *cli.Context, log *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.Debug("GC target percentage from GOGC", "GOGC", v)
		return
	}
	debug.SetGCPercent(c.Int("gc-percent"))
}

// Serve hands the heap memory it no longer uses back to the node once it
// is quiet again after work: when a look every trimEvery finds that no GC
// cycle ran since the last look (nothing allocates much: the wave of
// mounts or the storm is over), but one ran since the last trim or the
// heap grew by more than trimSlack since, debug.FreeOSMemory collects the
// garbage and returns the free heap. The runtime alone returns only what
// lies beyond the heap goal of its last cycle, which a busy moment set
// high and no cycle lowers while nothing allocates: after a wave of a
// hundred mounts mountpod kept about 12 MiB of anonymous memory against
// about 4 before it (BENCHMARKS.md, "A node under load"). A trim is one GC
// of a heap of a few MiB, after each busy spell, and after the runtime's
// forced cycle every two minutes when idle.
const (
	trimEvery = time.Second
	trimSlack = 2 << 20
)

// startMemoryTrim starts the trim until ctx ends or the returned stop is
// called; stop waits for it.
func startMemoryTrim(ctx context.Context, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimMemory(ctx, log, trimEvery, trimSlack)
	}()
	return func() {
		cancel()
		<-done
	}
}

// trimMemory is the trim's loop, a look every period.
func trimMemory(ctx context.Context, log *slog.Logger, period time.Duration, slack uint64) {
	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	read := func() (cycles, held uint64) {
		metrics.Read(samples)
		return samples[0].Value.Uint64(), samples[1].Value.Uint64() + samples[2].Value.Uint64() + samples[3].Value.Uint64()
	}
	last, heldAtTrim := read()
	cyclesAtTrim := last
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cycles, held := read()
		quiet := cycles == last
		last = cycles
		if !quiet || (cycles == cyclesAtTrim && held <= heldAtTrim+slack) {
			continue
		}
		debug.FreeOSMemory()
		// The trim's own cycle is no work.
		last, heldAtTrim = read()
		cyclesAtTrim = last
		log.Debug("returned the free heap to the node", "heldBytes", held, "nowBytes", heldAtTrim)
	}
}
