package startgate

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/pod/startgate/startgatetest"
)

// state returns the state letter of /proc/PID/stat.
func state(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func itoa(i int) string { return strconv.Itoa(i) }

// The gate runs once the program is loaded and before it has done
// anything: the process is in a tracing stop, its executable is the
// program's, and the file the program writes first is not there yet. The
// program then runs untraced to its end, with its own exit status.
func TestGateBeforeTheFirstInstruction(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	cmd := exec.Command("/bin/sh", "-c", `echo ran > "$0"; grep -q '^TracerPid:[[:space:]]*0$' /proc/$$/status || exit 4; exit 3`, marker)
	var seen string
	gated, err := startOnce(cmd, func(pid int) {
		exe, _ := os.Readlink("/proc/" + itoa(pid) + "/exe")
		_, statErr := os.Stat(marker)
		seen = state(t, pid) + " " + exe + " " + itoa(btoi(errors.Is(statErr, os.ErrNotExist)))
	})
	if err != nil || !gated {
		t.Fatalf("startOnce = %v, %v; want gated", gated, err)
	}
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	if want := "t " + sh + " 1"; seen != want {
		t.Errorf("at the gate: %q (state, executable, marker absent); want %q", seen, want)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Wait = %v; want exit status 3 (4: still traced)", err)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "ran\n" {
		t.Fatalf("the program's file: %q, %v", b, err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Commands started side by side, from as many goroutines, are each gated
// and each run once; a command without a gate is not traced.
func TestGatesSideBySide(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			cmd := exec.Command("/bin/sh", "-c", "exit $0", itoa(i%7))
			called := 0
			var gate func(int)
			if i%2 == 0 {
				gate = func(int) { called++ }
			}
			gated, err := startOnce(cmd, gate)
			if err != nil || gated != (gate != nil) || called != btoi(gate != nil) {
				errs <- errors.New("start " + itoa(i) + ": gated " + itoa(btoi(gated)) + ", gate called " + itoa(called))
				return
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if code := 0; i%7 != 0 && (!errors.As(err, &ee) || ee.ExitCode() != i%7) || i%7 == 0 && err != nil {
				errs <- errors.New("command " + itoa(i) + ": " + err.Error() + ", want exit " + itoa(i%7+code))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Where the kernel refuses the tracing, the command starts as usual and
// the gate runs after, once; a command that cannot start fails as it
// would untraced, gated or not.
func TestTracingRefused(t *testing.T) {
	old := tracingWorks
	t.Cleanup(func() { tracingWorks = old })
	tracingWorks = func() bool { return false }
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command("/bin/sh", "-c", `echo ran >> "$0"`, marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	calls := 0
	gated, err := startOnce(cmd, func(pid int) {
		calls++
		if pid != cmd.Process.Pid {
			t.Errorf("gate got %d, the command is %d", pid, cmd.Process.Pid)
		}
	})
	if err != nil || gated || calls != 1 {
		t.Fatalf("startOnce = %v, %v, gate called %d times; want started ungated, the gate once", gated, err, calls)
	}
	if cmd.SysProcAttr.Ptrace {
		t.Error("the caller's SysProcAttr was changed")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(marker); string(b) != "ran\n" {
		t.Fatalf("the command ran %q; want once", b)
	}
	for _, works := range []bool{false, true} {
		tracingWorks = func() bool { return works }
		cmd = exec.Command(filepath.Join(t.TempDir(), "none"))
		if _, err := startOnce(cmd, func(int) { t.Error("gate called for a command that did not start") }); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("startOnce of a missing program (tracing works: %v) = %v", works, err)
		}
	}
}

// The probe finds the tracing allowed to root, unless Yama forbids all of
// it (the mount pod runs as root; so does CI).
func TestTracingProbe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the probe's answer is known for root only")
	}
	b, _ := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	want := strings.TrimSpace(string(b)) != "3"
	if got := tracingWorks(); got != want {
		t.Fatalf("tracingWorks = %v; want %v (ptrace_scope %q)", got, want, b)
	}
}

// A command killed at the gate is reaped, killed; startOnce says it could
// not be let run.
func TestKilledAtTheGate(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	gated, err := startOnce(cmd, func(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !gated || err == nil || !strings.Contains(err.Error(), "let process") {
		t.Fatalf("startOnce = %v, %v; want gated, and an error for the detach", gated, err)
	}
	if ps := cmd.ProcessState; ps == nil || ps.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the command ended %v; want reaped, killed", ps)
	}
}

// A gate that panics leaves no process stopped: the command is killed and
// reaped, and the panic goes on.
func TestGatePanics(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	func() {
		defer func() {
			if r := recover(); r != "the gate's" {
				t.Errorf("recovered %v; want the gate's panic", r)
			}
		}()
		_, _ = startOnce(cmd, func(int) { panic("the gate's") })
	}()
	if ps := cmd.ProcessState; ps == nil || ps.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the command ended %v; want reaped, killed", ps)
	}
}

// A child killed while stopped at its start is not reaped by the wait for
// its stop: the caller's Wait gets its end.
func TestKilledBeforeItsStopIsLeftToWait(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stopped, err := awaitExecStop(pid)
	if err != nil || stopped {
		t.Fatalf("awaitExecStop = %v, %v; want not stopped", stopped, err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Wait = %v; want killed (the wait for the stop must not reap it)", err)
	}
}

// A program whose traced execve was refused starts untraced from the
// next start on, for good once that start succeeded; one whose untraced
// start fails too is traced again (the refusal was not the tracing's).
func TestAfterARefusedTracedExec(t *testing.T) {
	sh, missing := "/bin/sh", filepath.Join(t.TempDir(), "none")
	t.Cleanup(func() {
		refusals.mu.Lock()
		refusals.state = map[string]int{}
		refusals.mu.Unlock()
	})
	refusals.suspect(sh)
	refusals.suspect(missing)
	start := func(path string, args ...string) (bool, error) {
		cmd := exec.Command(path, args...)
		calls := 0
		gated, err := startOnce(cmd, func(int) { calls++ })
		if err == nil {
			if calls != 1 {
				t.Errorf("%s: gate called %d times", path, calls)
			}
			if werr := cmd.Wait(); werr != nil {
				t.Errorf("%s: %v", path, werr)
			}
		}
		return gated, err
	}
	if gated, err := start(sh, "-c", "exit 0"); err != nil || gated {
		t.Fatalf("the start after a refusal: gated %v, %v; want untraced", gated, err)
	}
	if gated, err := start(sh, "-c", "exit 0"); err != nil || gated || refusals.of(sh) != tracedRefused {
		t.Fatalf("a later start: gated %v, %v, state %d; want untraced for good", gated, err, refusals.of(sh))
	}
	if _, err := start(missing); err == nil || refusals.of(missing) != tracedOK {
		t.Fatalf("a program whose untraced start failed too: %v, state %d; want an error, and traced again", err, refusals.of(missing))
	}
	if gated, err := start("/bin/true"); err != nil || !gated {
		t.Fatalf("another program: gated %v, %v; want traced", gated, err)
	}
}

// A command whose traced execve is refused is made once more and started
// untraced, gated once after its start, and runs once; the warning names
// the program, not its arguments. The program's next command is made once
// and starts untraced; another program's starts traced.
func TestStartAfterARefusal(t *testing.T) {
	sh := startgatetest.RefusedProgram(t, "/bin/sh")
	marker := filepath.Join(t.TempDir(), "ran")
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	for i, c := range []struct {
		path   string
		made   int
		traced bool
	}{{sh, 2, false}, {sh, 1, false}, {"/bin/sh", 1, true}} {
		made, gated := 0, []bool{}
		cmd, err := Start(func() *exec.Cmd {
			made++
			return exec.Command(c.path, "-c", `echo ran >> "$0"`, marker, "--password=s3cr3t")
		}, func(pid int) {
			traced, err := startgatetest.Traced(pid)
			if err != nil {
				t.Error(err)
			}
			gated = append(gated, traced)
		}, log)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if made != c.made || !slices.Equal(gated, []bool{c.traced}) {
			t.Errorf("start %d of %s: made %d commands, gated (traced) %v; want %d, [%v]", i, c.path, made, gated, c.made, c.traced)
		}
	}
	if b, _ := os.ReadFile(marker); string(b) != "ran\nran\nran\n" {
		t.Errorf("the commands ran %q; want once each", b)
	}
	if s := logged.String(); strings.Count(s, "level=WARN") != 1 || !strings.Contains(s, "argv0="+sh) || strings.Contains(s, "s3cr3t") {
		t.Errorf("logged %q; want one warning naming %s, not the arguments", s, sh)
	}
}
