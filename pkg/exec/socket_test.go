package exec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// socketEnv is env with testReg's container running (commands through the
// fake runtime run locally) and an exec service answering as id on the
// socket the registration advertises.
type socketEnv struct {
	*env
	reg  registration.Registration
	stop func()
}

func newSocketEnv(t *testing.T, id execserver.Identity) *socketEnv {
	t.Helper()
	// A short directory: unix socket paths are limited to 107 bytes.
	base, err := os.MkdirTemp("", "mce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	e := &env{dir: filepath.Join(base, "pc"), rt: crifake.NewFakeRuntime()}
	e.endpoint = e.rt.Serve(t)
	if err := os.Mkdir(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reg := testReg
	reg.ExecSocket = execclient.SocketName(reg.PodUID)
	e.register(t, reg)
	e.rt.SetContainers(crifake.Container("abc", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	e.rt.SetExec(crifake.RunLocally)
	// The service runs in this process: a process table in which this
	// process is in container abc, as the mount pod's daemon is in its
	// container (peer_test.go checks the rule itself).
	e.procRoot = fakeProc(t, base, "0::/kubepods/besteffort/pod"+reg.PodUID+"/abc\n")
	se := &socketEnv{env: e, reg: reg}
	se.stop = se.serve(t, id)
	return se
}

// serve starts an exec service answering as id on the registration's
// socket and returns its stop function.
func (e *socketEnv) serve(t *testing.T, id execserver.Identity) func() {
	t.Helper()
	return execservertest.Serve(t, filepath.Join(e.dir, e.reg.ExecSocket), execserver.Config{Identity: id})
}

var testIdentity = execserver.Identity{PodNamespace: testReg.PodNamespace, PodName: testReg.PodName, PodUID: testReg.PodUID, ContainerName: testReg.ContainerName}

func TestSocketDecision(t *testing.T) {
	other := testIdentity
	other.PodUID = "11111111-2222-4333-8444-555555555555"
	tests := []struct {
		name    string
		id      execserver.Identity
		mode    ExecMode
		prepare func(t *testing.T, e *socketEnv)
		via     Via
		reason  string
		wantErr error
	}{
		{name: "auto", id: testIdentity, via: ViaSocket, reason: viaSocketOK},
		{name: "socket mode", id: testIdentity, mode: ModeSocket, via: ViaSocket, reason: viaSocketOK},
		{name: "cri mode", id: testIdentity, mode: ModeCRI, via: ViaExecSync, reason: viaModeCRI},
		{name: "no socket advertised", id: testIdentity, prepare: func(t *testing.T, e *socketEnv) {
			e.register(t, testReg)
		}, via: ViaExecSync, reason: viaNoSocket},
		{name: "identity of another pod", id: other, via: ViaExecSync, reason: "answers for pod kube-system/gluster-mount-x7k2p (uid " + other.PodUID},
		{name: "identity of another pod, socket mode", id: other, mode: ModeSocket, wantErr: ErrSocketUnavailable},
		{name: "service stopped", id: testIdentity, prepare: func(t *testing.T, e *socketEnv) { e.stop() }, via: ViaExecSync, reason: "exec socket not used: "},
		{name: "service stopped, socket mode", id: testIdentity, mode: ModeSocket, prepare: func(t *testing.T, e *socketEnv) { e.stop() }, wantErr: ErrSocketUnavailable},
		{name: "socket replaced by a file", id: testIdentity, prepare: func(t *testing.T, e *socketEnv) {
			e.stop()
			os.WriteFile(filepath.Join(e.dir, e.reg.ExecSocket), nil, 0o600)
		}, via: ViaExecSync, reason: "not a socket"},
		{name: "socket directory opened up", id: testIdentity, prepare: func(t *testing.T, e *socketEnv) {
			os.Chmod(filepath.Join(e.dir, execclient.SocketDir), 0o777)
		}, via: ViaExecSync, reason: "writable by group or others"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newSocketEnv(t, tc.id)
			if tc.prepare != nil {
				tc.prepare(t, e)
			}
			d, err := e.resolver(t, Options{ExecMode: tc.mode}).Resolve(context.Background(), testPlugin)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Resolve = %v, %v; want %v", d, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.ContainerID != "abc" || d.Via != tc.via || !strings.Contains(d.ViaReason, tc.reason) {
				t.Fatalf("Resolve = %s; want container abc via %s (%s)", d, tc.via, tc.reason)
			}
			if !strings.Contains(d.String(), "via "+string(tc.via)) {
				t.Errorf("String() = %s", d)
			}
		})
	}
}

// outcome is what a command gave through pkg/exec.
type outcome struct {
	out, errOut string
	code        int
	notFound    bool
	via         Via
}

// runVia runs cmdline (with dir and env when set) for testPlugin in mode
// and returns what it gave.
func (e *socketEnv) runVia(t *testing.T, mode ExecMode, cmdline []string, dir string, env []string) outcome {
	t.Helper()
	x := e.exec(t, Options{ExecMode: mode})
	cmd := x.Command(cmdline[0], cmdline[1:]...)
	if dir != "" {
		cmd.SetDir(dir)
	}
	if env != nil {
		cmd.SetEnv(env)
	}
	var stderr bytes.Buffer
	cmd.SetStderr(&stderr)
	out, err := cmd.Output()
	d, _ := cmd.(*Cmd).Decision()
	o := outcome{out: string(out), errOut: stderr.String(), via: d.Via}
	if err == utilexec.ErrExecutableNotFound { //nolint:errorlint // compared as mount-utils does
		o.notFound = true
	} else if err != nil {
		o.code = exitCode(t, err)
	}
	return o
}

// TestSocketSameAsExecSync runs one table through the exec socket and
// through ExecSync and wants identical results: output, exit code, "not
// found".
//
// What this proves, and what not: the ExecSync side is the fake runtime
// (RunLocally), which runs the wrapped command line pkg/exec sends on this
// machine and answers in containerd's format (exit code and both outputs;
// a missing executable as runc's error). So the test shows that pkg/exec
// gives the same results through both paths, that the exec service's own
// handling of SetEnv and SetDir matches the env -i and sh -c wrappers
// ExecSync gets, and that both paths report a missing executable alike. It
// does not show that a real runtime answers as the fake does: the end-to-end
// suite compares the two paths against a real containerd. Commands whose
// results legitimately differ between the paths (a signal, whose code the
// fake does not report as containerd does; a wrapper's "not found" message)
// are not in this table: TestSocketCommand checks those on the socket path
// against what the package documentation promises.
func TestSocketSameAsExecSync(t *testing.T) {
	tests := []struct {
		name string
		cmd  []string
		dir  string
		env  []string
	}{
		{name: "exit 0", cmd: []string{"sh", "-c", "echo out; echo err >&2"}},
		{name: "exit 1", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 1"}},
		{name: "exit 255", cmd: []string{"sh", "-c", "exit 255"}},
		{name: "missing", cmd: []string{"no-such-tool-mc"}},
		{name: "missing absolute", cmd: []string{"/no/such/tool"}},
		{name: "dir", cmd: []string{"pwd"}, dir: "/usr"},
		{name: "env", cmd: []string{"sh", "-c", `echo "$A:$B"`}, env: []string{"A=1", "B=x y", "PATH=/usr/bin:/bin"}},
		{name: "env and dir", cmd: []string{"sh", "-c", `echo "$A $PWD"`}, env: []string{"A=1", "PATH=/usr/bin:/bin"}, dir: "/"},
	}
	e := newSocketEnv(t, testIdentity)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			viaSocket := e.runVia(t, ModeSocket, tc.cmd, tc.dir, tc.env)
			viaCRI := e.runVia(t, ModeCRI, tc.cmd, tc.dir, tc.env)
			if viaSocket.via != ViaSocket || viaCRI.via != ViaExecSync {
				t.Fatalf("ran via %s and %s", viaSocket.via, viaCRI.via)
			}
			viaSocket.via, viaCRI.via = "", ""
			if viaSocket != viaCRI {
				t.Fatalf("exec socket: %+v\nExecSync:    %+v", viaSocket, viaCRI)
			}
		})
	}
}

// TestSocketCommand checks, on the socket path, the results the package
// documentation promises where they cannot be compared with the fake
// runtime's ExecSync: 128+N for a signal (as containerd reports), exactly
// utilexec.ErrExecutableNotFound for a missing executable also with SetDir
// and SetEnv (where ExecSync's wrappers print a message and exit 127), and
// exit 126 with a message on stderr for a directory that cannot be
// entered.
func TestSocketCommand(t *testing.T) {
	tests := []struct {
		name      string
		cmd       []string
		dir       string
		env       []string
		want      outcome
		errOutHas string
	}{
		{name: "killed", cmd: []string{"sh", "-c", "kill -9 $$"}, want: outcome{code: 137}},
		{name: "missing with dir", cmd: []string{"no-such-tool-mc"}, dir: "/", want: outcome{notFound: true}},
		{name: "missing with env", cmd: []string{"no-such-tool-mc"}, env: []string{"PATH=/usr/bin:/bin"}, want: outcome{notFound: true}},
		{name: "missing dir", cmd: []string{"true"}, dir: "/no/such/dir", want: outcome{code: 126}, errOutHas: "/no/such/dir"},
	}
	e := newSocketEnv(t, testIdentity)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := e.runVia(t, ModeSocket, tc.cmd, tc.dir, tc.env)
			if got.via != ViaSocket {
				t.Fatalf("ran via %s", got.via)
			}
			got.via = ""
			if tc.errOutHas != "" {
				if !strings.Contains(got.errOut, tc.errOutHas) {
					t.Errorf("stderr %q does not name %q", got.errOut, tc.errOutHas)
				}
				got.errOut = "" // checked
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSocketStdinAndStreaming(t *testing.T) {
	e := newSocketEnv(t, testIdentity)
	x := e.exec(t, Options{})
	// Output with stdin.
	data := bytes.Repeat([]byte("0123456789abcdef"), 100000)
	cmd := x.Command("cat")
	cmd.SetStdin(bytes.NewReader(data))
	out, err := cmd.Output()
	if err != nil || !bytes.Equal(out, data) {
		t.Fatalf("cat: %d bytes, %v; want the %d bytes of stdin", len(out), err, len(data))
	}
	// Start, pipes and Wait, streaming both ways.
	inR, inW := io.Pipe()
	cmd = x.Command("sh", "-c", `while read l; do echo "got $l"; echo "err $l" >&2; done; exit 3`)
	cmd.SetStdin(inR)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if d, _ := cmd.(*Cmd).Decision(); d.Via != ViaSocket {
		t.Fatalf("decision %s", d)
	}
	buf := make([]byte, 64)
	for _, w := range []string{"one", "two"} {
		io.WriteString(inW, w+"\n")
		n, err := stdout.Read(buf)
		if err != nil || string(buf[:n]) != "got "+w+"\n" {
			t.Fatalf("stdout: %q, %v", buf[:n], err)
		}
		n, err = stderr.Read(buf)
		if err != nil || string(buf[:n]) != "err "+w+"\n" {
			t.Fatalf("stderr: %q, %v", buf[:n], err)
		}
	}
	inW.Close()
	if rest, err := io.ReadAll(stdout); err != nil || len(rest) != 0 {
		t.Fatalf("rest of stdout: %q, %v", rest, err)
	}
	if err := cmd.Wait(); exitCode(t, err) != 3 {
		t.Fatalf("Wait = %v, want exit 3", err)
	}
}

func TestSocketStopAndTimeout(t *testing.T) {
	e := newSocketEnv(t, testIdentity)
	x := e.exec(t, Options{})
	cmd := x.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd.Stop()
	if err := cmd.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after Stop = %v, want context.Canceled", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := x.CommandContext(ctx, "sleep", "60").Run()
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run past the deadline = %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}

// TestSocketFallsBack: once the service is gone, the cached socket
// decision is taken afresh and the command runs through ExecSync.
func TestSocketFallsBack(t *testing.T) {
	e := newSocketEnv(t, testIdentity)
	x := e.exec(t, Options{})
	for i, want := range []Via{ViaSocket, ViaExecSync} {
		if i == 1 {
			e.stop()
		}
		for _, start := range []bool{false, true} {
			cmd := x.Command("echo", "hi")
			var out []byte
			var err error
			if start {
				var b bytes.Buffer
				cmd.SetStdout(&b)
				err = cmd.Run()
				out = b.Bytes()
			} else {
				out, err = cmd.CombinedOutput()
			}
			d, _ := cmd.(*Cmd).Decision()
			if err != nil || string(out) != "hi\n" || d.Via != want {
				t.Fatalf("round %d (Start: %v): %q, %v via %s; want via %s", i, start, out, err, d.Via, want)
			}
		}
	}
	if p, err := x.LookPath("sh"); err != nil || p == "" {
		t.Fatalf("LookPath = %q, %v", p, err)
	}
}

func TestSocketLookPath(t *testing.T) {
	e := newSocketEnv(t, testIdentity)
	x := e.exec(t, Options{ExecMode: ModeSocket})
	if p, err := x.LookPath("sh"); err != nil || !strings.HasSuffix(p, "/sh") {
		t.Fatalf("LookPath(sh) = %q, %v", p, err)
	}
	if _, err := x.LookPath("no-such-tool-mc"); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // by equality, as mount-utils
		t.Fatalf("LookPath(missing) = %v", err)
	}
}

func TestParseExecMode(t *testing.T) {
	for in, want := range map[string]ExecMode{"": ModeAuto, "auto": ModeAuto, "cri": ModeCRI, "socket": ModeSocket} {
		if got, err := ParseExecMode(in); err != nil || got != want {
			t.Errorf("ParseExecMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseExecMode("fast"); err == nil {
		t.Error("ParseExecMode(fast) succeeded")
	}
}
