package execclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/node/execclient"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
)

var testIdentity = execserver.Identity{PodNamespace: "kube-system", PodName: "mount-x", PodUID: "0c9f6b2e-0000-4000-8000-000000000001", ContainerName: "mount"}

// serve starts the real exec service on a new socket and returns its path.
func serve(t *testing.T, cfg execserver.Config) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s.sock")
	if cfg.Identity == (execserver.Identity{}) {
		cfg.Identity = testIdentity
	}
	cfg.Version = "v-test"
	execservertest.Serve(t, path, cfg)
	return path
}

func dial(t *testing.T, path string) *execclient.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := execclient.Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t *testing.T, c *execclient.Conn, cmd execclient.Command) (execclient.Result, string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	res, err := c.Run(ctx, cmd)
	return res, o.String(), e.String(), err
}

func TestIdentityAndPeer(t *testing.T) {
	c := dial(t, serve(t, execserver.Config{}))
	id, err := c.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := execclient.Identity{PodNamespace: testIdentity.PodNamespace, PodName: testIdentity.PodName, PodUID: testIdentity.PodUID,
		ContainerName: testIdentity.ContainerName, Version: "v-test", PID: int64(os.Getpid())}
	if id != want {
		t.Fatalf("Identity = %+v; want %+v", id, want)
	}
	if c.PeerPID() != os.Getpid() {
		t.Errorf("PeerPID = %d; want %d (this process serves)", c.PeerPID(), os.Getpid())
	}
	// Calls one after the other on one connection.
	for i := 0; i < 3; i++ {
		res, out, _, err := run(t, c, execclient.Command{Argv: []string{"echo", fmt.Sprint(i)}})
		if err != nil || res.Code != 0 || out != fmt.Sprintf("%d\n", i) {
			t.Fatalf("echo %d: %+v %q %v", i, res, out, err)
		}
	}
}

func TestRun(t *testing.T) {
	c := dial(t, serve(t, execserver.Config{}))
	for _, code := range []int{0, 1, 37, 255} {
		res, out, errOut, err := run(t, c, execclient.Command{Argv: []string{"sh", "-c", fmt.Sprintf("echo out; echo err >&2; exit %d", code)}})
		if err != nil || res.Code != code || out != "out\n" || errOut != "err\n" {
			t.Errorf("exit %d: %+v %q %q %v", code, res, out, errOut, err)
		}
	}
	res, _, _, err := run(t, c, execclient.Command{Argv: []string{"sh", "-c", "kill -TERM $$"}})
	if err != nil || res.Code != 128+15 || res.Signal != 15 {
		t.Errorf("killed by SIGTERM: %+v %v", res, err)
	}
	res, _, _, err = run(t, c, execclient.Command{Argv: []string{"no-such-tool-xyz"}})
	if err != nil || !res.NotFound {
		t.Errorf("missing tool: %+v %v", res, err)
	}
	res, _, _, err = run(t, c, execclient.Command{Argv: []string{t.TempDir()}})
	if err != nil || !(res.NotFound || res.CannotRun) || res.Message == "" {
		t.Errorf("a directory as the command: %+v %v", res, err)
	}
	start := time.Now()
	res, _, _, err = run(t, c, execclient.Command{Argv: []string{"sleep", "10"}, Timeout: 300 * time.Millisecond})
	if err != nil || !res.TimedOut || time.Since(start) > 5*time.Second {
		t.Errorf("timeout: %+v %v after %s", res, err, time.Since(start))
	}
}

// TestLargeStreams moves more than every flow-control window both ways.
func TestLargeStreams(t *testing.T) {
	c := dial(t, serve(t, execserver.Config{}))
	in := bytes.Repeat([]byte("0123456789abcdef\n"), 300000) // 5.1 MB
	sum := sha256.Sum256(in)
	res, out, _, err := run(t, c, execclient.Command{Argv: []string{"sha256sum"}, Stdin: bytes.NewReader(in)})
	if err != nil || res.Code != 0 || !strings.HasPrefix(out, hex.EncodeToString(sum[:])) {
		t.Fatalf("sha256sum of %d bytes: %+v %q %v", len(in), res, out, err)
	}
	res, out, _, err = run(t, c, execclient.Command{Argv: []string{"cat"}, Stdin: bytes.NewReader(in)})
	if err != nil || res.Code != 0 || out != string(in) {
		t.Fatalf("cat of %d bytes: %+v, %d bytes back, %v", len(in), res, len(out), err)
	}
	res, out, errOut, err := run(t, c, execclient.Command{Argv: []string{"sh", "-c", "head -c 3000000 /dev/zero; head -c 2000000 /dev/zero >&2"}})
	if err != nil || res.Code != 0 || len(out) != 3000000 || len(errOut) != 2000000 {
		t.Fatalf("3 MB out, 2 MB err: %+v, %d and %d bytes, %v", res, len(out), len(errOut), err)
	}
}

func TestNotStarted(t *testing.T) {
	path := serve(t, execserver.Config{})
	c := dial(t, path)
	_, _, _, err := run(t, c, execclient.Command{Argv: []string{"true"}, ExpectPodUID: "another", ExpectContainer: "mount"})
	if !errors.Is(err, execclient.ErrNotStarted) || !strings.Contains(err.Error(), path) {
		t.Fatalf("another pod expected: %v; want ErrNotStarted naming %s", err, path)
	}
	_, _, _, err = run(t, c, execclient.Command{Argv: []string{"true"}, ExpectPodUID: testIdentity.PodUID, ExpectContainer: "mount"})
	if err != nil {
		t.Fatalf("the right pod expected: %v", err)
	}
	// A socket nobody serves.
	gone := filepath.Join(t.TempDir(), "gone.sock")
	if _, err := execclient.Dial(context.Background(), gone); !errors.Is(err, execclient.ErrNotStarted) {
		t.Fatalf("Dial of a missing socket: %v; want ErrNotStarted", err)
	}
}

func TestCancelKills(t *testing.T) {
	c := dial(t, serve(t, execserver.Config{}))
	beat := execservertest.NewHeartbeat(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, execclient.Command{Argv: beat.Argv()})
		done <- err
	}()
	beat.WaitBeating(t, 5*time.Second)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: %v; want context.Canceled", err)
	}
	beat.CheckStopped(t)
}
