package registrar

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

var (
	thisPod = registration.Registration{PodNamespace: "kube-system", PodName: "mount-abcde", PodUID: "3f1c1a0e-0000-4000-8000-000000000001", ContainerName: "mount"}
	newPod  = registration.Registration{PodNamespace: "kube-system", PodName: "mount-fghij", PodUID: "3f1c1a0e-0000-4000-8000-000000000002", ContainerName: "mount"}
)

const (
	rbd     = "kubernetes.io/rbd"
	gluster = "kubernetes.io/glusterfs"
)

// syncBuffer is a bytes.Buffer safe for the daemon's goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testConfig returns a configuration for thisPod registering rbd and
// gluster in a fresh directory, with a fast watch.
func testConfig(t *testing.T, logs *syncBuffer) Config {
	t.Helper()
	return Config{
		Pod:        thisPod,
		Plugins:    []string{rbd, gluster},
		Dir:        filepath.Join(t.TempDir(), "plugin-containers"),
		SearchPath: "/nonexistent",
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Debounce:   10 * time.Millisecond,
		MaxDelay:   50 * time.Millisecond,
	}
}

// running is a daemon started by start.
type running struct {
	d    *Daemon
	stop func() error
}

// start runs a daemon for cfg and waits until it has registered. Stop it
// with the returned stop function (also called at cleanup).
func start(t *testing.T, cfg Config) running {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Registered():
	case err := <-done:
		cancel()
		t.Fatalf("Run returned before registering: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("daemon did not register within 10s")
	}
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = errors.New("Run did not return within 20s of cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return running{d: d, stop: stop}
}

// eventually polls cond until it holds or 5 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readReg reads the registration of plugin; it fails the test on an error.
func readReg(t *testing.T, dir, plugin string) (registration.Registration, bool) {
	t.Helper()
	r, ok, err := registration.Read(dir, plugin)
	if err != nil {
		t.Fatalf("Read(%s): %v", plugin, err)
	}
	return r, ok
}

// isRegistered reports whether plugin's registration names pod; read
// errors count as no.
func isRegistered(dir, plugin string, pod registration.Registration) bool {
	r, ok, err := registration.Read(dir, plugin)
	return err == nil && ok && r == pod
}

func regPath(t *testing.T, dir, plugin string) string {
	t.Helper()
	p, err := registration.Path(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeExecutable creates an executable file.
func writeExecutable(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}
