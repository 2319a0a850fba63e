package main

import (
	"log/slog"
	"os"
	"runtime/debug"

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
