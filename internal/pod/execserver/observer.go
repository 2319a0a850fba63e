package execserver

import (
	"path/filepath"
	"slices"
	"time"

	"github.com/mountcontainers/mountcontainers/pkg/execapi"
)

// Result classifies how a call ended, for an [Observer].
type Result string

// The results of a call.
const (
	// ResultOK: the command exited 0.
	ResultOK Result = "ok"
	// ResultExitError: the command exited non-zero or was killed by a
	// signal.
	ResultExitError Result = "exit_error"
	// ResultNotFound: the executable was not found.
	ResultNotFound Result = "not_found"
	// ResultCannotRun: the command could not be started.
	ResultCannotRun Result = "cannot_run"
	// ResultTimeout: the command's timeout killed it.
	ResultTimeout Result = "timeout"
	// ResultError: the call ended without an Exit (the client went away,
	// the stream failed).
	ResultError Result = "error"
	// ResultBusy: refused, every command slot taken; nothing ran.
	ResultBusy Result = "busy"
)

// Results are all the results, in a fixed order.
var Results = []Result{ResultOK, ResultExitError, ResultNotFound, ResultCannotRun, ResultTimeout, ResultError, ResultBusy}

// Label values of a call's plugin that is not one of [Config].Plugins.
const (
	// PluginUnknown: the client named no plugin.
	PluginUnknown = "unknown"
	// PluginOther: the client named a plugin this pod does not serve.
	PluginOther = "other"
)

// Observer is told of the service's calls (the mount pod's metrics). It
// never sees a command's arguments, which may hold secrets: only the base
// name of its executable. Methods are called from the calls' goroutines
// and must not block.
type Observer interface {
	// ExecStarted: a command takes a slot (it is about to start).
	ExecStarted(plugin, tool string)
	// ExecEnded: the command of an ExecStarted ended; took is from its
	// slot to its Exit.
	ExecEnded(plugin, tool string, r Result, took time.Duration)
	// ExecRefused: a call was refused before running anything (r is
	// [ResultBusy]).
	ExecRefused(plugin, tool string, r Result)
}

// pluginLabel bounds what a call names to the pod's own plugins.
func (s *Server) pluginLabel(p string) string {
	switch {
	case p == "":
		return PluginUnknown
	case slices.Contains(s.cfg.Plugins, p):
		return p
	}
	return PluginOther
}

// resultOf classifies the Exit e (nil: the call ended without one).
func resultOf(e *execapi.Exit) Result {
	switch {
	case e == nil:
		return ResultError
	case e.GetReason() == execapi.Exit_NOT_FOUND:
		return ResultNotFound
	case e.GetReason() == execapi.Exit_CANNOT_RUN:
		return ResultCannotRun
	case e.GetReason() == execapi.Exit_TIMED_OUT:
		return ResultTimeout
	case e.GetCode() != 0:
		return ResultExitError
	}
	return ResultOK
}

// toolName is the base name of argv[0].
func toolName(argv0 string) string { return filepath.Base(argv0) }
