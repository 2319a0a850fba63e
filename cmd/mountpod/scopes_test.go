package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope/systemdtest"
)

// lockedBuffer is a buffer written by serve and read by the test meanwhile.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeWaitsForABusySystemd: when systemd takes the connection but
// does not answer as serve starts, the mount keeper and the recovery ask
// again until it answers, and then run with the systemd backend's scopes
// (before, they ran without scopes for the pod's life).
func TestServeWaitsForABusySystemd(t *testing.T) {
	bus := systemdtest.StartBus(t)
	systemdtest.Serve(t, bus)
	setPodEnv(t)
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "systemd")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn // taken, never answered
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	})
	t.Setenv("MOUNTPOD_PLUGINS", "kubernetes.io/glusterfs")
	t.Setenv("MOUNTPOD_KUBELET_DIR", t.TempDir())
	t.Setenv("MOUNTPOD_SCOPES", "true")
	t.Setenv("MOUNTPOD_SCOPE_BACKEND", "systemd")
	t.Setenv("MOUNTPOD_SCOPE_CGROUP_ROOT", t.TempDir())
	t.Setenv("MOUNTPOD_SCOPE_SYSTEMD_SOCKETS", sock)
	t.Setenv("MOUNTPOD_SCOPE_TIMEOUT", "100ms")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr lockedBuffer
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"mountpod", "serve"}, &strings.Builder{}, &stderr) }()
	// A hang guard, not a verdict on time: serve asks again after 1 s,
	// then 2 s.
	waitFor := func(what string, said ...string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			out := stderr.String()
			all := true
			for _, s := range said {
				all = all && strings.Contains(out, s)
			}
			if all {
				return
			}
			select {
			case c := <-code:
				t.Fatalf("serve exited (%d) before %s; stderr:\n%s", c, what, out)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no sign of %s within a minute; stderr:\n%s", what, out)
			}
		}
	}
	waitFor("both waiting for systemd",
		"the live mounts are surveyed once it does; asking again",
		"dead mounts are detached, and made again once it answers; asking again",
		`msg="systemd did not answer; asking again" for="the survey of live mounts"`,
		`msg="systemd did not answer; asking again" component=recovery for="the recovery of dead mounts"`)
	if strings.Contains(stderr.String(), "live mounts surveyed") {
		t.Fatalf("the keeper surveyed without its scopes; stderr:\n%s", stderr.String())
	}

	// systemd answers from now on: the bus, at the same path.
	l.Close()
	<-accepted
	if err := os.Link(bus, sock); err != nil {
		t.Fatal(err)
	}
	waitFor("both running with scopes",
		`msg="FUSE mounts run in scopes" backend=systemd`,
		"live mounts surveyed",
		`msg="dead mounts are found by polling only" component=recovery why="systemd backend`,
		`msg="systemd answered: dead mounts are made again" component=recovery`)

	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("serve = %d after its context ended; stderr:\n%s", c, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not return within a minute of its context's end")
	}
}
