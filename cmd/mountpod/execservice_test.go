package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

func TestServeExecService(t *testing.T) {
	dir := setPodEnv(t)
	want := withBatch(t, pod)
	want.ExecSocket = execclient.SocketName(pod.PodUID)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr string
	go func() {
		var code int
		code, _, stderr = runApp(ctx, "serve")
		done <- code
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if r, ok, err := registration.Read(dir, "kubernetes.io/rbd"); err == nil && ok && r == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not registered with the exec socket 5s after serve started")
		}
	}
	sock, c := dialExecSocket(t, dir, want.ExecSocket)
	id, err := c.Identity(ctx)
	if err != nil || id.GetPodUid() != pod.PodUID || id.GetContainerName() != pod.ContainerName || id.GetVersion() != version {
		t.Fatalf("Identity = %v, %v", id, err)
	}
	var out bytes.Buffer
	p, err := c.Start(ctx, execclient.Command{Argv: []string{"echo", "hi"}, Stdout: &out, ExpectPodUID: pod.PodUID, ExpectContainer: pod.ContainerName})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(); err != nil || res.Code != 0 || out.String() != "hi\n" {
		t.Fatalf("echo hi: %+v, %v, %q", res, err, out.String())
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d after cancel; stderr:\n%s", code, stderr)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after serve stopped: %v", err)
	}
	if !strings.Contains(stderr, "exec service listening") {
		t.Errorf("log does not mention the exec service:\n%s", stderr)
	}
}

// dialExecSocket returns the path of serve's exec socket name in the
// registration directory dir, once checked, and a client of it, closed
// when the test ends.
func dialExecSocket(t *testing.T, dir, name string) (string, *execclient.Client) {
	t.Helper()
	sock, err := execclient.CheckSocket(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := execclient.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return sock, c
}

// TestServeExecSocketCannotListen: when the exec socket cannot listen
// (here a regular file sits at its path, which Listen never removes),
// serve logs it, registers without execSocket and serves on; check finds
// it ready.
func TestServeExecSocketCannotListen(t *testing.T) {
	dir := setPodEnv(t)
	sockDir := filepath.Join(dir, filepath.Dir(execclient.SocketName(pod.PodUID)))
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	occupant := filepath.Join(dir, execclient.SocketName(pod.PodUID))
	if err := os.WriteFile(occupant, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr string
	go func() {
		var code int
		code, _, stderr = runApp(ctx, "serve")
		done <- code
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r, ok, err := registration.Read(dir, "kubernetes.io/rbd")
		if err == nil && ok && r == withBatch(t, pod) {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d instead of registering without the exec socket; stderr:\n%s", code, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not registered without execSocket 5s after serve started (last: %+v, %v)", r, err)
		}
	}
	if code, out, _ := runApp(context.Background(), "check"); code != 0 {
		t.Errorf("check = %d: %s", code, out)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d after cancel; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "registering without execSocket") || !strings.Contains(stderr, occupant) {
		t.Errorf("log does not say why the socket is not advertised:\n%s", stderr)
	}
	if data, err := os.ReadFile(occupant); err != nil || string(data) != "not a socket" {
		t.Errorf("the file at the socket's path was touched: %q, %v", data, err)
	}
}

func TestExecSocketNone(t *testing.T) {
	dir := setPodEnv(t)
	t.Setenv("MOUNTPOD_EXEC_SOCKET", "none")
	if err := registration.Write(dir, "kubernetes.io/rbd", pod); err != nil {
		t.Fatal(err)
	}
	if err := registration.Write(dir, "kubernetes.io/glusterfs", pod); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runApp(context.Background(), "check"); code != 0 {
		t.Fatalf("check with --exec-socket none against registrations without a socket = %d: %s", code, out)
	}
}

// TestExecSocketTooLong: a socket path that does not fit a unix socket
// address is a usage error naming the path and the limit, for serve and
// check alike, and serve registers nothing.
func TestExecSocketTooLong(t *testing.T) {
	dir := setPodEnv(t)
	long := filepath.Join(dir, strings.Repeat("d", 80))
	t.Setenv("MOUNTPOD_REGISTRATION_DIR", long)
	path := filepath.Join(long, execclient.SocketName(pod.PodUID))
	for _, cmd := range []string{"serve", "check"} {
		// A serve that took the path would run until stopped.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		code, _, stderr := runApp(ctx, cmd)
		cancel()
		if code != exitUsage || !strings.Contains(stderr, "exec socket "+path) || !strings.Contains(stderr, fmt.Sprintf("(%d)", execclient.MaxSocketPath)) {
			t.Errorf("mountpod %s with a %d-byte socket path = %d, stderr:\n%s\nwant %d and an error naming the path and the limit %d",
				cmd, len(path), code, stderr, exitUsage, execclient.MaxSocketPath)
		}
	}
	if entries, _ := registration.List(long); len(entries) != 0 {
		t.Errorf("serve registered with an unusable exec socket: %v", entries)
	}
	// The same directory with the exec service turned off is fine.
	t.Setenv("MOUNTPOD_EXEC_SOCKET", "none")
	if code, _, stderr := runApp(context.Background(), "check"); code != exitFailure || strings.Contains(stderr, "exec socket") {
		t.Errorf("check with --exec-socket none = %d, %s; want %d (not registered) and no word of the socket", code, stderr, exitFailure)
	}
}
