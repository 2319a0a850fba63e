package exec

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	utilexec "k8s.io/utils/exec"
)

// TestRealRuntime checks the answers of a real runtime that the unit tests
// only imitate: exit codes and outputs, the missing-executable error, the
// runtime's timeout, the SetDir/SetEnv wrappers and LookPath.
func TestRealRuntime(t *testing.T) {
	p := realRuntime(t)
	x, err := p.resolver(t, Options{Timeout: 2 * time.Second}).For(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	d, err := x.Resolve(context.Background())
	if err != nil || d.ContainerID != p.containerID {
		t.Fatalf("Resolve = %v, %v; want container %s", d, err, p.containerID)
	}

	for _, code := range []int{0, 1, 32, 255} {
		var stderr bytes.Buffer
		cmd := x.Command("sh", "-c", `echo out; echo err >&2; exit "$0"`, strconv.Itoa(code))
		cmd.SetStderr(&stderr)
		out, err := cmd.Output()
		if exitCode(t, err) != code || string(out) != "out\n" || stderr.String() != "err\n" {
			t.Errorf("exit %d: got %v, stdout %q, stderr %q", code, err, out, stderr.String())
		}
	}
	for _, missing := range []string{"no-such-tool-mc", "/usr/bin/no-such-tool-mc"} {
		if err := x.Command(missing).Run(); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
			t.Errorf("%s: err = %v (%T), want exactly ErrExecutableNotFound", missing, err, err)
		}
	}
	start := time.Now()
	err = x.Command("sleep", "30").Run()
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("timeout: %v after %s", err, time.Since(start))
	}
	t.Logf("timeout error: %v", err)

	cmd := x.Command("sh", "-c", `echo "$A $PWD"`)
	cmd.SetDir("/usr")
	cmd.SetEnv([]string{"A=1", "PATH=/usr/bin:/bin"})
	if out, err := cmd.Output(); err != nil || string(out) != "1 /usr\n" {
		t.Errorf("dir and env: %q, %v", out, err)
	}
	if p, err := x.LookPath("mount"); err != nil || !strings.HasSuffix(p, "/mount") {
		t.Errorf("LookPath(mount) = %q, %v", p, err)
	}
	if _, err := x.LookPath("no-such-tool-mc"); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
		t.Errorf("LookPath(missing) = %v", err)
	}

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

	p.stop(t)
	// The runtime's answer for an exec in a stopped container must be
	// recognised as "gone", so that a stale decision is taken again.
	if _, err := p.conn.ExecSync(context.Background(), p.containerID, []string{"true"}, time.Second); !isGone(err) {
		t.Errorf("ExecSync in a stopped container: %v, not recognised as gone", err)
	}
	if _, _, err := x.r.execSync(context.Background(), d, []string{"true"}, time.Second, nil); !errors.Is(err, errGone) {
		t.Errorf("execSync with a stale decision: %v", err)
	}
	cmd = x.Command("sh", "-c", "echo host")
	if out, err := cmd.Output(); err != nil || string(out) != "host\n" {
		t.Errorf("after stop: %q, %v", out, err)
	}
	if d, _ := cmd.(*Cmd).Decision(); !d.OnHost() || d.Reason != ReasonNotRunning {
		t.Errorf("after stop: decision %v", d)
	}
}
