package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"testing"

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
