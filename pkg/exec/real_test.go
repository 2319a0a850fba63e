package exec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// TestRealRuntime checks against a real runtime what the unit tests check
// against the fake one (package pkg/cri/critest), except the faults only
// a fake can produce on demand (a call that hangs, UNAVAILABLE, a runtime
// that counts its calls): the decision, commandTests (exit codes, outputs,
// missing executables, the SetDir/SetEnv wrappers), CombinedOutput and Run,
// the pipes with Start and Wait, standard input, the runtime's own timeout
// and a context deadline rounded up, Stop and cancellation, the response
// size limit, runc's error messages, LookPath, concurrent commands, a
// registration of another pod name or container, and a container that
// stops under a cached decision. test/e2e's TestRealRuntime runs it on the
// test bed in CI; see realruntime_test.go for the settings.
func TestRealRuntime(t *testing.T) {
	p := realRuntime(t)
	ctx := context.Background()
	// A bound generous enough for a busy machine (16 commands at once, 16
	// MiB of output); "timeout" makes its own of 2 s.
	x, err := p.resolver(t, Options{Timeout: 30 * time.Second, ExecMode: ModeCRI}).For(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	d, err := x.Resolve(ctx)
	if err != nil || d.ContainerID != p.containerID || d.Reason != ReasonRunning || d.Via != ViaExecSync {
		t.Fatalf("Resolve = %v, %v; want container %s via %s", d, err, p.containerID, ViaExecSync)
	}
	t.Logf("container %s of pod %s", p.containerID, p.reg)

	t.Run("commands", func(t *testing.T) {
		for _, tc := range commandTests {
			t.Run(tc.name, func(t *testing.T) {
				cmd := tc.run(t, x)
				if d, ok := cmd.Decision(); !ok || d.ContainerID != p.containerID || d.Via != ViaExecSync {
					t.Errorf("Decision() = %v, %v; want container %s via %s", d, ok, p.containerID, ViaExecSync)
				}
			})
		}
	})

	t.Run("CombinedOutput and Run", func(t *testing.T) {
		const script = "echo out; echo err >&2; exit 3"
		out, err := x.Command("sh", "-c", script).CombinedOutput()
		if exitCode(t, err) != 3 || string(out) != "out\nerr\n" {
			t.Errorf("CombinedOutput = %q, %v", out, err)
		}
		var o, eo bytes.Buffer
		cmd := x.Command("sh", "-c", script)
		cmd.SetStdout(&o)
		cmd.SetStderr(&eo)
		if err := cmd.Run(); exitCode(t, err) != 3 || o.String() != "out\n" || eo.String() != "err\n" {
			t.Errorf("Run = %v, stdout %q stderr %q", err, o.String(), eo.String())
		}
	})

	t.Run("pipes, Start and Wait", func(t *testing.T) {
		cmd := x.Command("sh", "-c", "echo out; echo err >&2; exit 4")
		so, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		se, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var errOut []byte
		wg.Go(func() { errOut, _ = io.ReadAll(se) })
		out, _ := io.ReadAll(so)
		wg.Wait()
		if err := cmd.Wait(); exitCode(t, err) != 4 || string(out) != "out\n" || string(errOut) != "err\n" {
			t.Errorf("Wait = %v, pipes gave %q and %q", err, out, errOut)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		cmd := x.Command("cat")
		cmd.SetStdin(strings.NewReader("data"))
		if _, err := cmd.Output(); !errors.Is(err, ErrStdinUnsupported) {
			t.Errorf("stdin with data: %v", err)
		}
		cmd = x.Command("true")
		cmd.SetStdin(&bytes.Buffer{})
		if err := cmd.Run(); err != nil {
			t.Errorf("empty stdin: %v", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		// The runtime's own timeout (the resolver's, 2 s).
		w, err := p.resolver(t, Options{Timeout: 2 * time.Second, ExecMode: ModeCRI}).For(testPlugin)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = w.Command("sleep", "30").Run()
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
			t.Errorf("timeout: %v after %s", err, time.Since(start))
		}
		t.Logf("timeout error: %v", err)
		// A context deadline of 1.2 s reaches the runtime as 2 s.
		y, err := p.resolver(t, Options{Timeout: time.Hour, ExecMode: ModeCRI}).For(testPlugin)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 1200*time.Millisecond)
		defer cancel()
		start = time.Now()
		err = y.CommandContext(cctx, "sleep", "30").Run()
		took := time.Since(start)
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || took < 1900*time.Millisecond || took > 10*time.Second {
			t.Errorf("context deadline 1.2s: %v after %s; want the runtime's timeout of 2s", err, took)
		}
	})

	t.Run("Stop and cancel", func(t *testing.T) {
		cmd := x.Command("sleep", "100")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.AfterFunc(100*time.Millisecond, cmd.Stop)
		// Canceled, not the runtime's timeout run out.
		if err := cmd.Wait(); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait after Stop = %v after %s", err, time.Since(start))
		}
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		if err := x.CommandContext(cctx, "sleep", "100").Run(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run after cancel = %v", err)
		}
	})

	t.Run("response size limit", func(t *testing.T) {
		for _, tc := range []struct {
			size   int
			tooBig bool
		}{
			{size: cri.MaxRecvMsgSize - 1024},
			{size: cri.MaxRecvMsgSize + 1, tooBig: true},
		} {
			out, err := x.Command("head", "-c", strconv.Itoa(tc.size), "/dev/zero").Output()
			switch {
			case tc.tooBig && !errors.Is(err, cri.ErrResponseTooLarge):
				t.Errorf("%d bytes: err = %v, want ErrResponseTooLarge", tc.size, err)
			case !tc.tooBig && (err != nil || len(out) != tc.size):
				t.Errorf("%d bytes: got %d, %v", tc.size, len(out), err)
			}
		}
	})

	t.Run("runc's error messages", func(t *testing.T) {
		// Missing (on PATH and absolute) and not executable: all
		// ErrExecutableNotFound, as mount-utils expects.
		for _, name := range []string{"no-such-tool-mc", "/usr/bin/no-such-tool-mc", "/etc/passwd"} {
			if err := x.Command(name).Run(); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
				t.Errorf("%s: err = %v (%T), want exactly ErrExecutableNotFound", name, err, err)
			}
		}
	})

	t.Run("LookPath", func(t *testing.T) {
		if p, err := x.LookPath("mount"); err != nil || !strings.HasSuffix(p, "/mount") {
			t.Errorf("LookPath(mount) = %q, %v", p, err)
		}
		if _, err := x.LookPath("no-such-tool-mc"); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
			t.Errorf("LookPath(missing) = %v", err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				out, err := x.Command("sh", "-c", `echo "$0"; exit "$0"`, strconv.Itoa(i)).Output()
				if exitCode(t, err) != i || string(out) != strconv.Itoa(i)+"\n" {
					t.Errorf("goroutine %d: %q, %v", i, out, err)
				}
			})
		}
		wg.Wait()
	})

	t.Run("registrations the runtime contradicts", func(t *testing.T) {
		other := p.reg
		other.PodName += "-other"
		if _, err := p.resolverFor(t, other, Options{}).Resolve(ctx, testPlugin); !errors.Is(err, ErrMismatch) {
			t.Errorf("registration naming pod %s with the UID of %s: %v, want ErrMismatch", other.PodName, p.reg.PodName, err)
		}
		other = p.reg
		other.ContainerName = "no-such-container"
		if d, err := p.resolverFor(t, other, Options{}).Resolve(ctx, testPlugin); err != nil || !d.OnHost() || d.Reason != ReasonNotRunning {
			t.Errorf("registration of a container the pod lacks: %v, %v; want the host, %q", d, err, ReasonNotRunning)
		}
	})

	// Last: it stops the container.
	t.Run("container stopped under a cached decision", func(t *testing.T) {
		if err := x.Command("true").Run(); err != nil { // cache the container
			t.Fatal(err)
		}
		p.stop(t)
		// The runtime's answer for an exec in a stopped container must be
		// recognised as "gone", so that a stale decision is taken again.
		if _, err := p.conn.ExecSync(ctx, p.containerID, []string{"true"}, time.Second); !isGone(err) {
			t.Errorf("ExecSync in a stopped container: %v, not recognised as gone", err)
		}
		if _, _, err := x.r.execSync(ctx, d, []string{"true"}, time.Second, nil); !errors.Is(err, errGone) {
			t.Errorf("execSync with a stale decision: %v", err)
		}
		cmd := x.Command("sh", "-c", "echo host")
		if out, err := cmd.Output(); err != nil || string(out) != "host\n" {
			t.Errorf("after stop: %q, %v", out, err)
		}
		if d, _ := cmd.(*Cmd).Decision(); !d.OnHost() || d.Reason != ReasonNotRunning {
			t.Errorf("after stop: decision %v", d)
		}
	})
}

// resolverFor is a resolver on a new directory holding reg as testPlugin's
// registration, sharing p's connection.
func (p *realPod) resolverFor(tb testing.TB, reg registration.Registration, opts Options) *Resolver {
	tb.Helper()
	q := *p
	q.reg = reg
	return q.resolver(tb, opts)
}
