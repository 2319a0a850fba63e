package shim

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// liveEnv is a registration whose exec service runs in this process, and a
// process table in which this process is in a container of the registered
// pod (or wherever cgroup says).
type liveEnv struct {
	cfg    *Config
	plugin string
	proc   string
}

const liveContainerID = "5f0c2a9e8b7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3"

func newLiveEnv(t *testing.T, id execserver.Identity, svc execserver.Config, cgroup string) *liveEnv {
	t.Helper()
	base, err := os.MkdirTemp("", "mcl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "pc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reg := registration.Registration{PodNamespace: "kube-system", PodName: "mount-a", PodUID: "0c9f6b2e-0000-4000-8000-000000000001", ContainerName: "mount"}
	reg.ExecSocket = execclient.SocketName(reg.PodUID)
	const plugin = "example.com/live"
	if err := registration.Write(dir, plugin, reg); err != nil {
		t.Fatal(err)
	}
	if id == (execserver.Identity{}) {
		id = execserver.Identity{PodNamespace: reg.PodNamespace, PodName: reg.PodName, PodUID: reg.PodUID, ContainerName: reg.ContainerName}
	}
	svc.Identity = id
	execservertest.Serve(t, filepath.Join(dir, reg.ExecSocket), svc)
	if cgroup == "" {
		cgroup = "0::/kubepods/besteffort/pod" + reg.PodUID + "/" + liveContainerID + "\n"
	}
	proc := filepath.Join(base, "proc")
	pidDir := filepath.Join(proc, strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(pidDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pidDir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{RegistrationDir: dir, Timeout: 30 * time.Second, HostMode: HostModeOS, Verbose: true, ExecMode: "auto"}
	return &liveEnv{cfg: cfg, plugin: plugin, proc: proc}
}

// run runs the launcher (the shim's own backend) with stdin.
func (e *liveEnv) run(t *testing.T, stdin string, argv ...string) (code int, stdout, stderr string) {
	t.Helper()
	in, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	go func() {
		w.WriteString(stdin)
		w.Close()
	}()
	var o, ebuf bytes.Buffer
	l := &launcher{proc: e.proc}
	code = l.Run(context.Background(), e.cfg, e.plugin, argv, IO{Stdin: in, Stdout: &o, Stderr: &ebuf})
	return code, o.String(), ebuf.String()
}

// handedOver is what the launcher says when it hands over to a helper
// that is not there (a test binary has none next to it).
const handedOver = "needs the container runtime, which " + HelperName + " reaches"

// TestLiveSocketWithoutRuntime: a registration whose exec socket proves its
// container live runs the command through it, in the shim itself, with no
// helper and no runtime: standard input streamed, exit code and streams
// kept, the decision logged as package exec logs it.
func TestLiveSocketWithoutRuntime(t *testing.T) {
	e := newLiveEnv(t, execserver.Identity{}, execserver.Config{}, "")
	code, out, errOut := e.run(t, "hello\n", "sh", "-c", "cat; echo err >&2; exit 7")
	if code != 7 || out != "hello\n" || !strings.Contains(errOut, "err\n") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, want := range []string{
		`msg="exec decision"`, `decision.where="container ` + liveContainerID + `"`, "decision.via=exec-socket",
		"runtime not asked", `msg=exec`, "command.via=socket", "command.result=exit_error", "command.exitCode=7",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the verbose log does not say %s: %q", want, errOut)
		}
	}
	if strings.Contains(errOut, handedOver) {
		t.Errorf("handed over to the helper: %q", errOut)
	}
	if code, _, errOut := e.run(t, "", "no-such-tool-xyz"); code != ExitNotFound {
		t.Errorf("missing tool: code %d, %q; want 127", code, errOut)
	}
	e.cfg.Timeout = 300 * time.Millisecond
	if code, _, errOut := e.run(t, "", "sleep", "10"); code != ExitTimeout || !strings.Contains(errOut, "timed out") {
		t.Errorf("timeout: code %d, %q; want 124", code, errOut)
	}
}

// TestLiveSocketNotProved: anything short of a proof hands the command to
// the helper (which asks the runtime), and runs nothing.
func TestLiveSocketNotProved(t *testing.T) {
	other := execserver.Identity{PodNamespace: "kube-system", PodName: "mount-b", PodUID: "11111111-2222-4333-8444-555555555555", ContainerName: "mount"}
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		name   string
		id     execserver.Identity
		cgroup string
		mode   string
	}{
		{name: "another pod answers", id: other},
		{name: "a pod of the same name but another UID answers", id: execserver.Identity{PodNamespace: "kube-system", PodName: "mount-a", PodUID: other.PodUID, ContainerName: "mount"}},
		{name: "another container of the pod answers", id: execserver.Identity{PodNamespace: "kube-system", PodName: "mount-a", PodUID: "0c9f6b2e-0000-4000-8000-000000000001", ContainerName: "sidecar"}},
		{name: "served from another pod's cgroup", cgroup: "0::/kubepods/besteffort/pod" + other.PodUID + "/" + liveContainerID + "\n"},
		{name: "served from the node", cgroup: "0::/system.slice/mountpod.service\n"},
		{name: "cgroups cannot be told", cgroup: "0::/\n"},
		{name: "exec mode cri"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLiveEnv(t, tc.id, execserver.Config{}, tc.cgroup)
			if tc.name == "exec mode cri" {
				e.cfg.ExecMode = "cri"
			}
			code, _, errOut := e.run(t, "", "touch", marker)
			if code != ExitShimFailed || !strings.Contains(errOut, handedOver) {
				t.Fatalf("code %d, stderr %q; want the helper asked", code, errOut)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the command ran")
			}
			// The exec service refuses a command for another pod by
			// itself; the shim must not have taken the answer for a proof
			// in the first place.
			if strings.Contains(errOut, "runtime not asked") {
				t.Errorf("the shim took the socket for a proof: %q", errOut)
			}
		})
	}
}

// TestLiveSocketBusyHandsOver: a service too busy to start the command
// (RESOURCE_EXHAUSTED) is a command that did not start: the helper decides
// afresh, and nothing of the first attempt reached the caller.
func TestLiveSocketBusyHandsOver(t *testing.T) {
	e := newLiveEnv(t, execserver.Identity{}, execserver.Config{MaxConcurrent: 1, QueueWait: 50 * time.Millisecond, MaxQueued: 1}, "")
	busy := make(chan int, 1)
	go func() {
		code, _, _ := e.run(t, "", "sleep", "2")
		busy <- code
	}()
	time.Sleep(500 * time.Millisecond)
	code, out, errOut := e.run(t, "", "echo", "hi")
	if code != ExitShimFailed || out != "" || !strings.Contains(errOut, handedOver) || !strings.Contains(errOut, "unusable before the command started") {
		t.Fatalf("while busy: code %d, stdout %q, stderr %q; want the helper asked", code, out, errOut)
	}
	if code := <-busy; code != 0 {
		t.Fatalf("the command that kept the service busy: code %d", code)
	}
}

// TestLiveSocketInterrupted: a shim interrupted (SIGINT or SIGTERM cancel
// its context) exits 130 and the command's process group is killed in the
// mount pod, as through the helper.
func TestLiveSocketInterrupted(t *testing.T) {
	e := newLiveEnv(t, execserver.Identity{}, execserver.Config{}, "")
	beat := execservertest.NewHeartbeat(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errOut bytes.Buffer
	go func() {
		l := &launcher{proc: e.proc}
		done <- l.Run(ctx, e.cfg, e.plugin, beat.Argv(), IO{Stdout: io.Discard, Stderr: &errOut})
	}()
	beat.WaitBeating(t, 10*time.Second)
	cancel()
	if code := <-done; code != exitInterrupted {
		t.Fatalf("code %d, stderr %q; want %d", code, errOut.String(), exitInterrupted)
	}
	beat.CheckStopped(t)
}
