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
// is quiet again after work: when trimQuiet looks in a row, one every
// trimEvery, find that no GC cycle ran (nothing allocates much: the wave
// of mounts or the storm is over), but one ran since the last trim or the
// heap grew by more than trimSlack since, debug.FreeOSMemory collects the
// garbage and returns the free heap. One quiet look was not enough: in a
// wave of a hundred mounts, a second without a cycle came after most
// cycles, and each trim cost a GC, the pages it returned and their
// faults when the heap grew again: the trim alone took 5.5 % of
// mountpod's samples in a profile of the wave, 2.5 % since
// (BENCHMARKS.md). The runtime alone returns only what
// lies beyond the heap goal of its last cycle, which a busy moment set
// high and no cycle lowers while nothing allocates: after a wave of a
// hundred mounts mountpod kept about 12 MiB of anonymous memory against
// about 4 before it (BENCHMARKS.md, "A node under load"). A trim is one GC
// of a heap of a few MiB, after each busy spell, and after the runtime's
// forced cycle every two minutes when idle.
const (
	trimEvery = time.Second
	trimQuiet = 3
	trimSlack = 2 << 20
)

// startMemoryTrim starts the trim until ctx ends or the returned stop is
// called; stop waits for it.
func startMemoryTrim(ctx context.Context, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimMemory(ctx, log, trimEvery, trimQuiet, trimSlack)
	}()
	return func() {
		cancel()
		<-done
	}
}

// trimMemory is the trim's loop, a look every period; it trims after
// quietLooks quiet looks in a row (see [trimRule]).
func trimMemory(ctx context.Context, log *slog.Logger, period time.Duration, quietLooks int, slack uint64) {
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
	rule := trimRule{quietLooks: quietLooks, slack: slack}
	rule.trimmed(read())
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cycles, held := read()
		if !rule.look(cycles, held) {
			continue
		}
		debug.FreeOSMemory()
		// The trim's own cycle is no work.
		rule.trimmed(read())
		log.Debug("returned the free heap to the node", "heldBytes", held, "nowBytes", rule.heldAtTrim)
	}
}

// trimRule decides, look by look, when the trim returns the heap: after
// quietLooks looks in a row that saw no GC cycle, if a cycle ran since
// the last trim or the heap grew by more than slack since.
type trimRule struct {
	quietLooks int
	slack      uint64

	last, cyclesAtTrim, heldAtTrim uint64
	quiet                          int // looks in a row without a cycle
}

// look takes a look's GC cycle count and heap held, and says whether to
// trim now.
func (r *trimRule) look(cycles, held uint64) bool {
	if cycles == r.last {
		r.quiet++
	} else {
		r.quiet = 0
	}
	r.last = cycles
	return r.quiet >= r.quietLooks && (cycles != r.cyclesAtTrim || held > r.heldAtTrim+r.slack)
}

// trimmed records the cycle count and heap held right after a trim (or at
// the start).
func (r *trimRule) trimmed(cycles, held uint64) {
	r.last, r.cyclesAtTrim, r.heldAtTrim = cycles, cycles, held
}
