package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/pkg/execserver"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

func TestServeExecService(t *testing.T) {
	setPodEnv(t)
	base, err := os.MkdirTemp("", "mcm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "plugin-containers")
	t.Setenv("PLUGIN_CONTAINERS_DIR", dir)
	want := pod
	want.ExecSocket = execserver.SocketName(pod.PodUID)

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
	sock, err := execserver.CheckSocket(dir, want.ExecSocket)
	if err != nil {
		t.Fatal(err)
	}
	c, err := execserver.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Identity(ctx)
	if err != nil || id.GetPodUid() != pod.PodUID || id.GetContainerName() != pod.ContainerName || id.GetVersion() != version {
		t.Fatalf("Identity = %v, %v", id, err)
	}
	var out bytes.Buffer
	p, err := c.Start(ctx, execserver.Command{Argv: []string{"echo", "hi"}, Stdout: &out, ExpectPodUID: pod.PodUID, ExpectContainer: pod.ContainerName})
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
