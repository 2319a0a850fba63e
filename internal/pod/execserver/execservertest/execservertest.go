// Package execservertest serves the real exec service in a test, on a
// socket of the test's choosing.
package execservertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
)

// Serve serves the exec service configured by cfg at path until the test
// ends, or until the returned function is called (once or more), which
// waits for the service to stop and removes the socket. A zero
// cfg.StopTimeout is 100 ms, so that a test does not wait for the default.
func Serve(tb testing.TB, path string, cfg execserver.Config) (stop func()) {
	tb.Helper()
	l, err := execserver.Listen(path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		execserver.NewServer(cfg).Serve(ctx, l)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	tb.Cleanup(stop)
	return stop
}
