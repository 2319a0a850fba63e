package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
)

// exitCode returns the code of a utilexec.ExitError the way mount-utils
// reads it: by type assertion, not errors.As.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	ee, ok := err.(utilexec.ExitError) //nolint:errorlint // that is the point
	if !ok {
		t.Fatalf("error %v (%T) is not a utilexec.ExitError", err, err)
	}
	return ee.ExitStatus()
}

// commandTest is a command and what running it must give, in a container
// as on the host.
type commandTest struct {
	name       string
	cmd        []string
	dir        string
	env        []string
	wantCode   int
	wantOut    string
	wantErrOut string
	notFound   bool
}

// commandTests is run by TestCommand (through the fake runtime and on the
// host) and by TestRealRuntime (through a real runtime).
var commandTests = []commandTest{
	{name: "exit 0", cmd: []string{"sh", "-c", "echo out; echo err >&2"}, wantOut: "out\n", wantErrOut: "err\n"},
	{name: "exit 1", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 1"}, wantCode: 1, wantOut: "out\n", wantErrOut: "err\n"},
	{name: "exit 32", cmd: []string{"sh", "-c", "exit 32"}, wantCode: 32},
	{name: "exit 255", cmd: []string{"sh", "-c", "exit 255"}, wantCode: 255},
	{name: "missing", cmd: []string{"no-such-tool-mc"}, notFound: true},
	{name: "missing absolute", cmd: []string{"/no/such/tool"}, notFound: true},
	{name: "dir", cmd: []string{"pwd"}, dir: "/usr", wantOut: "/usr\n"},
	{name: "env", cmd: []string{"sh", "-c", `echo "$A:$B"`}, env: []string{"A=1", "B=x y", "PATH=/usr/bin:/bin"}, wantOut: "1:x y\n"},
	{name: "env and dir", cmd: []string{"sh", "-c", `echo "$A $PWD"`}, env: []string{"A=1", "PATH=/usr/bin:/bin"}, dir: "/", wantOut: "1 /\n"},
	{name: "missing with dir", cmd: []string{"no-such-tool-mc"}, dir: "/", notFound: true},
	{name: "missing with env", cmd: []string{"no-such-tool-mc"}, env: []string{"PATH=/usr/bin:/bin"}, notFound: true},
}

// run runs tc with x and checks the result; it returns the command.
func (tc commandTest) run(t *testing.T, x *Exec) *Cmd {
	t.Helper()
	cmd := x.Command(tc.cmd[0], tc.cmd[1:]...)
	if tc.dir != "" {
		cmd.SetDir(tc.dir)
	}
	if tc.env != nil {
		cmd.SetEnv(tc.env)
	}
	var stderr bytes.Buffer
	cmd.SetStderr(&stderr)
	out, err := cmd.Output()
	if tc.notFound {
		if err != utilexec.ErrExecutableNotFound { //nolint:errorlint // mount-utils compares
			t.Errorf("err = %v (%T), want exactly ErrExecutableNotFound", err, err)
		}
		return cmd.(*Cmd)
	}
	if got := exitCode(t, err); got != tc.wantCode {
		t.Errorf("exit code %d, want %d (err %v)", got, tc.wantCode, err)
	}
	if string(out) != tc.wantOut || stderr.String() != tc.wantErrOut {
		t.Errorf("stdout %q stderr %q, want %q %q", out, stderr.String(), tc.wantOut, tc.wantErrOut)
	}
	return cmd.(*Cmd)
}

// TestCommand runs commandTests in the container (through the fake
// runtime, which runs the command locally the way containerd answers) and
// on the host.
func TestCommand(t *testing.T) {
	for _, where := range []string{"container", "host"} {
		for _, tc := range commandTests {
			t.Run(where+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t)
				if where == "container" {
					e.running(t, "abc")
					e.rt.SetExec(crifake.RunLocally)
				}
				cmd := tc.run(t, e.exec(t, Options{}))
				d, ok := cmd.Decision()
				if !ok || d.OnHost() != (where == "host") {
					t.Errorf("Decision() = %v, %v", d, ok)
				}
			})
		}
	}
}

func TestCombinedOutputAndRun(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	e.rt.SetExec(crifake.Answer([]byte("out\n"), []byte("err\n"), 3))
	x := e.exec(t, Options{})

	out, err := x.Command("x").CombinedOutput()
	if exitCode(t, err) != 3 || string(out) != "out\nerr\n" {
		t.Errorf("CombinedOutput = %q, %v", out, err)
	}

	var o, eo bytes.Buffer
	cmd := x.Command("x")
	cmd.SetStdout(&o)
	cmd.SetStderr(&eo)
	if err := cmd.Run(); exitCode(t, err) != 3 || o.String() != "out\n" || eo.String() != "err\n" {
		t.Errorf("Run = %v, stdout %q stderr %q", err, o.String(), eo.String())
	}
	if err := cmd.Run(); err == nil {
		t.Error("second Run succeeded")
	}

	cmd = x.Command("x")
	cmd.SetStdout(&o)
	if _, err := cmd.Output(); err == nil {
		t.Error("Output with Stdout set succeeded")
	}
}

func TestPipesStartWait(t *testing.T) {
	for _, where := range []string{"container", "host"} {
		t.Run(where, func(t *testing.T) {
			e := newEnv(t)
			if where == "container" {
				e.running(t, "abc")
				e.rt.SetExec(crifake.RunLocally)
			}
			x := e.exec(t, Options{})
			cmd := x.Command("sh", "-c", "echo out; echo err >&2; exit 4")
			so, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			se, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cmd.StdoutPipe(); err == nil {
				t.Error("second StdoutPipe succeeded")
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var errOut []byte
			wg.Go(func() { errOut, _ = io.ReadAll(se) })
			out, _ := io.ReadAll(so)
			wg.Wait()
			if err := cmd.Wait(); exitCode(t, err) != 4 {
				t.Errorf("Wait = %v", err)
			}
			if string(out) != "out\n" || string(errOut) != "err\n" {
				t.Errorf("pipes gave %q and %q", out, errOut)
			}
			if err := cmd.Wait(); err == nil {
				t.Error("second Wait succeeded")
			}
		})
	}
}

func TestWaitBeforeStart(t *testing.T) {
	e := newEnv(t)
	if err := e.exec(t, Options{}).Command("true").Wait(); err == nil {
		t.Error("Wait before Start succeeded")
	}
}

func TestStdin(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	e.rt.SetExec(crifake.RunLocally)
	x := e.exec(t, Options{})

	cmd := x.Command("cat")
	cmd.SetStdin(strings.NewReader("data"))
	if _, err := cmd.Output(); !errors.Is(err, ErrStdinUnsupported) {
		t.Errorf("stdin with data: %v", err)
	}
	if n := len(e.rt.ExecRequests()); n != 0 {
		t.Errorf("%d ExecSync calls for a command that cannot run", n)
	}
	cmd = x.Command("true")
	cmd.SetStdin(&bytes.Buffer{})
	if err := cmd.Run(); err != nil {
		t.Errorf("empty stdin: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	tests := []struct {
		name        string
		exec        crifake.ExecFunc
		timeout     time.Duration // Options.Timeout
		ctxTimeout  time.Duration // CommandContext deadline
		wantSeconds int64
	}{
		{name: "hang, default", exec: crifake.Hang, timeout: 1 * time.Second, wantSeconds: 1},
		{name: "hang, context deadline rounds up", exec: crifake.Hang, timeout: time.Hour, ctxTimeout: 1200 * time.Millisecond, wantSeconds: 2},
		{name: "runtime reports", exec: crifake.RunLocally, timeout: time.Second, wantSeconds: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.running(t, "abc")
			e.rt.SetExec(tc.exec)
			x := e.exec(t, Options{Timeout: tc.timeout})
			ctx := context.Background()
			if tc.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
				defer cancel()
			}
			start := time.Now()
			_, err := x.CommandContext(ctx, "sleep", "10").Output()
			elapsed := time.Since(start)
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want a timeout", err)
			}
			if elapsed > 5*time.Second {
				t.Errorf("took %s", elapsed)
			}
			reqs := e.rt.ExecRequests()
			if len(reqs) != 1 || reqs[0].GetTimeout() != tc.wantSeconds {
				t.Errorf("requests %v, want one with timeout %d", reqs, tc.wantSeconds)
			}
		})
	}
}

func TestExpiredContext(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	e.rt.SetExec(crifake.RunLocally)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := e.exec(t, Options{}).CommandContext(ctx, "true").Run()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}

func TestStopAndCancel(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	e.rt.SetExec(crifake.Hang)
	x := e.exec(t, Options{})

	cmd := x.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, cmd.Stop)
	if err := cmd.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait after Stop = %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := x.CommandContext(ctx, "sleep", "100").Run(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel = %v", err)
	}
	x.Command("never started").Stop() // no effect, no panic
}

func TestRuntimeUnavailableDuringExec(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	e.rt.SetExec(crifake.Fail(codes.Unavailable, "runtime going away"))
	err := e.exec(t, Options{}).Command("true").Run()
	if err == nil || !strings.Contains(err.Error(), e.endpoint) || !strings.Contains(err.Error(), "example.com/gluster") {
		t.Errorf("err = %v, want one naming the plugin and %s", err, e.endpoint)
	}
}

func TestLargeOutput(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		tooBig  bool
		combine bool
	}{
		{name: "just under the limit", size: cri.MaxRecvMsgSize - 1024},
		{name: "over the limit", size: cri.MaxRecvMsgSize + 1, tooBig: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.running(t, "abc")
			e.rt.SetExec(crifake.Answer(bytes.Repeat([]byte{'x'}, tc.size), nil, 0))
			out, err := e.exec(t, Options{}).Command("cat", "big").Output()
			if tc.tooBig {
				if !errors.Is(err, cri.ErrResponseTooLarge) {
					t.Errorf("err = %v, want ErrResponseTooLarge", err)
				}
				return
			}
			if err != nil || len(out) != tc.size {
				t.Errorf("got %d bytes, %v", len(out), err)
			}
		})
	}
}

func TestContainerGoneReResolves(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	e.rt.SetExec(func(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		e.rt.SetContainers() // it stopped under our feet
		return crifake.Fail(codes.NotFound, "container %q not found", req.GetContainerId())(ctx, req)
	})
	cmd := e.exec(t, Options{}).Command("sh", "-c", "echo host")
	out, err := cmd.Output()
	if err != nil || string(out) != "host\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}
	if d, _ := cmd.(*Cmd).Decision(); !d.OnHost() || d.Reason != ReasonNotRunning {
		t.Errorf("decision %v", d)
	}
}

func TestLookPath(t *testing.T) {
	for _, where := range []string{"container", "host"} {
		t.Run(where, func(t *testing.T) {
			e := newEnv(t)
			if where == "container" {
				e.running(t, "abc")
				e.rt.SetExec(crifake.RunLocally)
			}
			x := e.exec(t, Options{})
			p, err := x.LookPath("sh")
			if err != nil || !strings.HasSuffix(p, "/sh") {
				t.Errorf("LookPath(sh) = %q, %v", p, err)
			}
			if _, err := x.LookPath("no-such-tool-mc"); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
				t.Errorf("LookPath(missing) = %v", err)
			}
			if where == "container" {
				if p, err := x.LookPath("/bin/sh"); err != nil || p != "/bin/sh" {
					t.Errorf("LookPath(/bin/sh) = %q, %v", p, err)
				}
				if n := len(e.rt.ExecRequests()); n != 3 {
					t.Errorf("%d ExecSync calls, want 3", n)
				}
			}
		})
	}
}

func TestArgv(t *testing.T) {
	c := &Cmd{name: "mkfs.ext4", args: []string{"-F", "/dev/x"}}
	argv, wrapped, _ := c.argv()
	if wrapped || !slices.Equal(argv, []string{"mkfs.ext4", "-F", "/dev/x"}) {
		t.Errorf("plain: %q %v", argv, wrapped)
	}
	c.env = []string{"A=1"}
	c.dir = "/d"
	argv, _, _ = c.argv()
	want := []string{"/bin/sh", "-c", dirScript, "sh", "/d", "env", "-i", "--", "A=1", "mkfs.ext4", "-F", "/dev/x"}
	if !slices.Equal(argv, want) {
		t.Errorf("wrapped:\n%q\nwant\n%q", argv, want)
	}
	c.env = []string{"NOEQUALS"}
	if _, _, err := c.argv(); err == nil {
		t.Error("bad env entry accepted")
	}
}

func TestConcurrent(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	e.rt.SetExec(crifake.RunLocally)
	x := e.exec(t, Options{})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			out, err := x.Command("sh", "-c", "echo $0; exit $(($0 % 7))", string(rune('0'+i%10))).Output()
			if exitCode(t, err) != (i%10)%7 || string(out) != string(rune('0'+i%10))+"\n" {
				t.Errorf("goroutine %d: %q, %v", i, out, err)
			}
		})
	}
	wg.Wait()
}

func TestErrorClassification(t *testing.T) {
	tests := []struct {
		code     codes.Code
		msg      string
		gone     bool
		notFound bool
	}{
		{code: codes.NotFound, msg: `an error occurred when try to find container "x": not found`, gone: true},
		{code: codes.Unknown, msg: "container is in CONTAINER_EXITED state", gone: true},
		{code: codes.Unknown, msg: "container is not created or running", gone: true},
		{code: codes.Unknown, msg: `failed to exec in container: failed to start exec "e": OCI runtime exec failed: exec failed: unable to start container process: exec: "nope": executable file not found in $PATH: unknown`, notFound: true},
		{code: codes.Unknown, msg: `failed to exec in container: failed to start exec "e": OCI runtime exec failed: exec failed: unable to start container process: exec: "/nope": stat /nope: no such file or directory: unknown`, notFound: true},
		{code: codes.Unknown, msg: "open /etc/x: no such file or directory"},
		{code: codes.Internal, msg: "boom"},
	}
	for _, tc := range tests {
		err := crifake.Fail(tc.code, "%s", tc.msg)
		_, ferr := err(context.Background(), nil)
		if got := isGone(ferr); got != tc.gone {
			t.Errorf("isGone(%q) = %v", tc.msg, got)
		}
		if got := notFoundMessage(tc.msg); got != tc.notFound {
			t.Errorf("notFoundMessage(%q) = %v", tc.msg, got)
		}
	}
}

// TestCallErrorCancelledAtDeadline: the status a runtime's handler sends
// when its context is cancelled at the call's deadline (a race in the
// runtime's gRPC server that no fake produces on demand) is a timeout, as
// the reset gRPC turns into DeadlineExceeded is; a cancellation is not.
func TestCallErrorCancelledAtDeadline(t *testing.T) {
	d := Decision{Plugin: testPlugin, ContainerID: "abc", Via: ViaExecSync}
	cancelled := fmt.Errorf("exec sync on unix:///run/cri.sock: %w", status.Error(codes.Canceled, "context canceled"))
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cut, cutCancel := context.WithTimeout(context.Background(), time.Hour)
	cutCancel()
	live, liveCancel := context.WithTimeout(context.Background(), time.Hour)
	defer liveCancel()
	for _, tc := range []struct {
		name        string
		ctx         context.Context
		wantTimeout bool
	}{
		{"deadline passed", expired, true},
		{"cancelled", cut, false},
		{"before the deadline", live, false},
	} {
		err := callError(tc.ctx, "sleep", d, time.Second, cancelled)
		if got := errors.Is(err, ErrTimeout) && errors.Is(err, context.DeadlineExceeded); got != tc.wantTimeout {
			t.Errorf("%s: %v, a timeout %t, want %t", tc.name, err, got, tc.wantTimeout)
		}
		if !tc.wantTimeout && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", tc.name, err)
		}
	}
}
