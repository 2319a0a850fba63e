package exec

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// Observer is told of every command an [Exec] runs, once, when its result
// is known; see "Observing commands" in the package documentation. It is
// called on the goroutine that learns the result and must not block.
type Observer interface {
	ObserveExec(ExecEvent)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ExecEvent)

// ObserveExec calls f(e).
func (f ObserverFunc) ObserveExec(e ExecEvent) { f(e) }

// Path is the way a command took: the exec socket, CRI ExecSync or the
// host; [PathNone] when it never ran because no decision could be taken.
type Path = boundary.Path

// The paths of an [ExecEvent].
const (
	PathSocket = boundary.PathSocket
	PathCRI    = boundary.PathCRI
	PathHost   = boundary.PathHost
	PathNone   = boundary.PathNone
)

// Result classifies how a command ended, in a few values fit for a metric
// label.
type Result = boundary.Result

// The results of an [ExecEvent].
const (
	// ResultOK: exit status 0.
	ResultOK = boundary.ResultOK
	// ResultExitError: the command ran and exited non-zero.
	ResultExitError = boundary.ResultExitError
	// ResultNotFound: the executable was not found.
	ResultNotFound = boundary.ResultNotFound
	// ResultTimeout: the command ran out of time.
	ResultTimeout = boundary.ResultTimeout
	// ResultCanceled: the caller cancelled it.
	ResultCanceled = boundary.ResultCanceled
	// ResultError: anything else (no decision, the runtime or the exec
	// socket failed, ...).
	ResultError = boundary.ResultError
)

// ExecEvent describes one command. It never carries the command's
// arguments, which may hold secrets (a password option, a key): only the
// base name of its executable.
type ExecEvent struct {
	// Plugin is the volume plugin whose executor ran the command.
	Plugin string
	// Tool is the base name of the executable (argv[0]), such as "mount".
	Tool string
	// Path is the way the command took (the final one, when the first
	// decision was taken afresh).
	Path Path
	// Decision is where the command was placed; its Reason is empty when
	// no decision could be taken.
	Decision Decision
	// Duration is from the decision to the result.
	Duration time.Duration
	// ExitCode is the command's exit status; -1 when it did not exit
	// (not found, timed out, failed to run).
	ExitCode int
	// Err is the command's error, nil on success.
	Err error
}

// Result classifies e.Err ([boundary.ResultOf], [ErrTimeout] a timeout).
func (e ExecEvent) Result() Result { return boundary.ResultOf(e.Err, ErrTimeout) }

// LogValue groups the event's fields in structured logs.
func (e ExecEvent) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("plugin", e.Plugin),
		slog.String("tool", e.Tool),
		slog.String("via", string(e.Path)),
		slog.String("result", string(e.Result())),
		slog.Duration("took", e.Duration.Round(time.Microsecond)),
	}
	if e.ExitCode >= 0 {
		attrs = append(attrs, slog.Int("exitCode", e.ExitCode))
	}
	if e.Decision.Reason != "" {
		attrs = append(attrs, slog.String("where", e.Decision.Where()))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}

// LogObserver logs one record per command to log: at debug level when it
// succeeded, at info level otherwise. The Flexvolume driver and the shim
// use it; a volume host with metrics of its own writes its own [Observer].
func LogObserver(log *slog.Logger) Observer {
	return ObserverFunc(func(e ExecEvent) {
		level := slog.LevelDebug
		if e.Err != nil {
			level = slog.LevelInfo
		}
		log.Log(context.Background(), level, "exec", "command", e)
	})
}

// ToolName is the label a command's executable gets: the base name of
// argv[0], never more.
func ToolName(argv0 string) string {
	if argv0 == "" {
		return ""
	}
	return filepath.Base(argv0)
}

// pathOf is the way d sends commands.
func pathOf(d Decision) Path {
	switch {
	case d.Reason == "":
		return PathNone
	case d.OnHost():
		return PathHost
	case d.Via == ViaSocket:
		return PathSocket
	}
	return PathCRI
}

// exitCodeOf is err's exit status, 0 for nil, -1 when there is none.
func exitCodeOf(err error) int {
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitStatus()
	}
	return -1
}

// observe reports c's result to the resolver's observer, once.
func (c *Cmd) observe(err error) {
	obs := c.e.r.observer
	if obs == nil {
		return
	}
	c.mu.Lock()
	if c.observed {
		c.mu.Unlock()
		return
	}
	c.observed = true
	d, began := c.decision, c.began
	c.mu.Unlock()
	var took time.Duration
	if !began.IsZero() {
		took = time.Since(began)
	}
	obs.ObserveExec(ExecEvent{
		Plugin: c.e.plugin, Tool: ToolName(c.name), Path: pathOf(d), Decision: d,
		Duration: took, ExitCode: exitCodeOf(err), Err: err,
	})
}
