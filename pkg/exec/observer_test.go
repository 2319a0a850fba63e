package exec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	utilexec "k8s.io/utils/exec"

	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
)

// execRecorder is an Observer that keeps the events.
type execRecorder struct {
	mu     sync.Mutex
	events []ExecEvent
}

func (r *execRecorder) ObserveExec(e ExecEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *execRecorder) take() []ExecEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

const secretArg = "--password=hunter2-secret"

// TestObserver: every command is reported once, with its path, tool base
// name, result and exit code, whichever way it runs and whichever method
// runs it; never its arguments.
func TestObserver(t *testing.T) {
	paths := []struct {
		path  Path
		setup func(t *testing.T, rec *execRecorder) *Exec
	}{
		{PathHost, func(t *testing.T, rec *execRecorder) *Exec {
			return newEnv(t).exec(t, Options{Observer: rec})
		}},
		{PathCRI, func(t *testing.T, rec *execRecorder) *Exec {
			e := newEnv(t)
			e.running(t, "abc")
			e.rt.SetExec(crifake.RunLocally)
			return e.exec(t, Options{Observer: rec})
		}},
		{PathSocket, func(t *testing.T, rec *execRecorder) *Exec {
			return newSocketEnv(t, testIdentity).exec(t, Options{Observer: rec})
		}},
	}
	type run func(c utilexec.Cmd) error
	methods := map[string]run{
		"Run":    func(c utilexec.Cmd) error { return c.Run() },
		"Output": func(c utilexec.Cmd) error { _, err := c.Output(); return err },
		"CombinedOutput": func(c utilexec.Cmd) error {
			_, err := c.CombinedOutput()
			return err
		},
		"StartWait": func(c utilexec.Cmd) error {
			if err := c.Start(); err != nil {
				return err
			}
			return c.Wait()
		},
	}
	commands := []struct {
		argv   []string
		tool   string
		result Result
		code   int
	}{
		{[]string{"/bin/sh", "-c", "exit 0", secretArg}, "sh", ResultOK, 0},
		{[]string{"sh", "-c", "exit 3", secretArg}, "sh", ResultExitError, 3},
		{[]string{"no-such-tool-mc", secretArg}, "no-such-tool-mc", ResultNotFound, -1},
	}
	for _, p := range paths {
		for name, m := range methods {
			t.Run(string(p.path)+"/"+name, func(t *testing.T) {
				rec := &execRecorder{}
				x := p.setup(t, rec)
				for _, c := range commands {
					err := m(x.Command(c.argv[0], c.argv[1:]...))
					got := rec.take()
					if len(got) != 1 {
						t.Fatalf("%v: %d events, want 1: %+v", c.argv, len(got), got)
					}
					e := got[0]
					if e.Plugin != testPlugin || e.Tool != c.tool || e.Path != p.path || e.Result() != c.result || e.ExitCode != c.code || !errors.Is(e.Err, err) && e.Err != err { //nolint:errorlint // the same value
						t.Errorf("%v: event %+v (result %s), want plugin %s tool %s path %s result %s code %d, err %v",
							c.argv, e, e.Result(), testPlugin, c.tool, p.path, c.result, c.code, err)
					}
					if e.Duration <= 0 {
						t.Errorf("%v: duration %s", c.argv, e.Duration)
					}
					if s := fmt.Sprintf("%v %+v", slog.AnyValue(e).Resolve(), e.LogValue()); strings.Contains(s, "hunter2") {
						t.Errorf("the event's log value holds an argument: %s", s)
					}
				}
			})
		}
	}
}

// TestObserverDecisionFailure: a command that never runs (no decision) is
// reported too, on path none.
func TestObserverDecisionFailure(t *testing.T) {
	e := newEnv(t)
	e.register(t, testReg)
	rec := &execRecorder{}
	x := e.exec(t, Options{Observer: rec, Endpoint: "unix:///nonexistent/cri.sock"})
	err := x.Command("mount", "-o", secretArg).Run()
	if err == nil {
		t.Fatal("Run succeeded without a runtime")
	}
	got := rec.take()
	if len(got) != 1 || got[0].Path != PathNone || got[0].Result() != ResultError || got[0].Tool != "mount" {
		t.Fatalf("events %+v, want one on path none with result error", got)
	}
}

func TestExecEventResult(t *testing.T) {
	tests := []struct {
		err  error
		want Result
	}{
		{nil, ResultOK},
		{utilexec.ErrExecutableNotFound, ResultNotFound},
		{utilexec.CodeExitError{Err: errors.New("exit status 2"), Code: 2}, ResultExitError},
		{fmt.Errorf("exec x: %w after 1s: %w", ErrTimeout, context.DeadlineExceeded), ResultTimeout},
		{fmt.Errorf("exec x: %w", context.Canceled), ResultCanceled},
		{errors.New("runtime down"), ResultError},
	}
	for _, tc := range tests {
		if got := (ExecEvent{Err: tc.err}).Result(); got != tc.want {
			t.Errorf("Result(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// ExampleLogObserver shows the one record per command a volume host gets:
// the executable's base name, never its arguments.
func ExampleLogObserver() {
	dropTime := func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime}))
	obs := LogObserver(log)
	obs.ObserveExec(ExecEvent{Plugin: "kubernetes.io/glusterfs", Tool: ToolName("/usr/bin/mount"), Path: PathSocket, ExitCode: 0})
	// Output:
	// level=DEBUG msg=exec command.plugin=kubernetes.io/glusterfs command.tool=mount command.via=socket command.result=ok command.took=0s command.exitCode=0
}
