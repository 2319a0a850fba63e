package shim_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	crifake "github.com/mountcontainers/mountcontainers/internal/cri/fake"
	"github.com/mountcontainers/mountcontainers/internal/execservice"
	"github.com/mountcontainers/mountcontainers/internal/shim"
	"github.com/mountcontainers/mountcontainers/pkg/execserver"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// TestExecSocket runs the shim against a registration whose container the
// (fake) runtime lists as running and whose exec service answers: stdin is
// streamed, exit codes kept, and status and --exec-mode show the path.
func TestExecSocket(t *testing.T) {
	base, err := os.MkdirTemp("", "mcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "pc")
	reg := validRegistration()
	reg.ExecSocket = execserver.SocketName(reg.PodUID)
	const plugin = "kubernetes.io/glusterfs"
	if err := registration.Write(dir, plugin, reg); err != nil {
		t.Fatal(err)
	}
	rt := crifake.NewFakeRuntime()
	endpoint := rt.Serve(t)
	rt.SetContainers(crifake.Container("abc", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	rt.SetExec(crifake.RunLocally)
	l, err := execservice.Listen(filepath.Join(dir, reg.ExecSocket), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		execservice.NewServer(execservice.Config{Identity: execservice.Identity{
			PodNamespace: reg.PodNamespace, PodName: reg.PodName, PodUID: reg.PodUID, ContainerName: reg.ContainerName,
		}, StopTimeout: 100 * time.Millisecond}).Serve(ctx, l)
	}()
	t.Cleanup(func() { cancel(); <-done })
	env := []string{"CONTAINER_RUNTIME_ENDPOINT=" + endpoint, "PLUGIN_CONTAINERS_DIR=" + dir}

	r := run(t, env, "hello\nworld\n", shimBin, "--verbose", "run", "--plugin", plugin, "--", "sh", "-c", "cat; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "hello\nworld\n" || !strings.HasPrefix(r.stderr, "err\n") && !strings.Contains(r.stderr, "\nerr\n") {
		t.Fatalf("run via socket: %+v", r)
	}
	if !strings.Contains(r.stderr, "via=exec-socket") {
		t.Errorf("--verbose does not say the exec socket was used: %q", r.stderr)
	}
	// Through ExecSync stdin is refused, as before.
	r = run(t, env, "hello\n", shimBin, "--exec-mode", "cri", "run", "--plugin", plugin, "--", "cat")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "standard input") {
		t.Fatalf("run via ExecSync with stdin: %+v", r)
	}
	r = run(t, append(env, shim.EnvExecMode+"=bogus"), "", shimBin, "status")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "want auto, cri or socket") {
		t.Fatalf("bad exec mode: %+v", r)
	}
	for _, tc := range []struct{ mode, via, reason string }{
		{"auto", "exec-socket", "exec socket answers"},
		{"cri", "cri-exec-sync", "exec mode cri"},
	} {
		r = run(t, env, "", shimBin, "--exec-mode", tc.mode, "status", "-o", "json")
		var sts []shim.Status
		if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || len(sts) != 1 {
			t.Fatalf("status: %v, %+v", err, r)
		}
		if s := sts[0]; !s.Live || s.Via != tc.via || !strings.Contains(s.ViaReason, tc.reason) || s.ExecSocket != reg.ExecSocket {
			t.Errorf("status with --exec-mode %s: %+v", tc.mode, s)
		}
	}
	r = run(t, env, "", shimBin, "status")
	if !strings.Contains(r.stdout, "yes: container abc via exec socket") {
		t.Errorf("status table: %q", r.stdout)
	}
	// The service goes away: auto falls back to ExecSync, socket mode fails.
	cancel()
	<-done
	r = run(t, env, "", shimBin, "run", "--plugin", plugin, "--", "echo", "hi")
	if r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("run after the service stopped: %+v", r)
	}
	r = run(t, env, "", shimBin, "--exec-mode", "socket", "run", "--plugin", plugin, "--", "echo", "hi")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "exec socket unavailable") {
		t.Fatalf("socket mode without the service: %+v", r)
	}
}
