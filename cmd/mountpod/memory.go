package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"
)

// defaultGCPercent is serve's GC target percentage unless GOGC or
// --gc-percent says otherwise. The daemon's live heap is about 1 MB;
// with Go's default (100) the heap grows to the runtime's 4 MB minimum
// between collections and stays resident. 25 keeps about 1 MiB less
// resident in the steady state, for a collection every few seconds when
// the daemon checks recorded mounts (each takes a millisecond or two of
// CPU): BENCHMARKS.md.
const defaultGCPercent = 25

func gcPercentFlag() cli.Flag {
	return &cli.IntFlag{
		Name: "gc-percent", EnvVars: []string{"MOUNTPOD_GC_PERCENT"}, Value: defaultGCPercent,
		Usage: "Go GC target percentage (as GOGC, which wins when set; negative turns the GC off: only with GOMEMLIMIT). A lower value keeps less memory resident for more collections.",
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
