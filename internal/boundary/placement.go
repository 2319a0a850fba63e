package boundary

import (
	"context"
	"errors"
	"fmt"
	osexec "os/exec"
	"slices"
)

// The names of where a volume plugin's utility runs and how it gets there.
// Package exec (the resolver) and kubelet-exec-shim (which places a command
// itself when its exec socket proves the mount pod live) decide, log and
// report with these values, so that a decision reads the same whichever of
// them took it. Package exec's documentation says what each means to a
// caller.

// ExecMode chooses how commands reach a live mount container.
type ExecMode string

// The exec modes.
const (
	// ModeAuto: the registration's exec socket when it answers for the
	// registered pod and container, CRI ExecSync otherwise.
	ModeAuto ExecMode = "auto"
	// ModeCRI: always CRI ExecSync.
	ModeCRI ExecMode = "cri"
	// ModeSocket: the exec socket, or an error.
	ModeSocket ExecMode = "socket"
)

// ParseExecMode parses "auto", "cri" or "socket"; empty means auto.
func ParseExecMode(s string) (ExecMode, error) {
	switch m := ExecMode(s); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeCRI, ModeSocket:
		return m, nil
	}
	return "", fmt.Errorf("exec mode %q: want auto, cri or socket", s)
}

// Via is how commands reach a live container.
type Via string

// The ways to a container.
const (
	// ViaSocket: the mount pod's exec service, through its exec socket.
	ViaSocket Via = "exec-socket"
	// ViaExecSync: CRI ExecSync.
	ViaExecSync Via = "cri-exec-sync"
)

// Reason says why a placement decision was taken.
type Reason string

// The reasons of a decision.
const (
	// ReasonRunning: the registered container is running; commands run in it.
	ReasonRunning Reason = "registered container is running"
	// ReasonNotRegistered: there is no registration; commands run on the host.
	ReasonNotRegistered Reason = "not registered"
	// ReasonNotRunning: the registered pod has no running container of the
	// registered name; commands run on the host.
	ReasonNotRunning Reason = "registered container is not running"
	// ReasonRuntimeFallback: the runtime could not be asked and the caller
	// opted into falling back; commands run on the host.
	ReasonRuntimeFallback Reason = "runtime unavailable, falling back to the host"
)

// Path is the way one command took: the exec socket, CRI ExecSync or the
// host; PathNone when it never ran because no decision could be taken.
type Path string

// The paths of a command.
const (
	PathSocket Path = "socket"
	PathCRI    Path = "cri"
	PathHost   Path = "host"
	PathNone   Path = "none"
)

// Result classifies how a command ended, in a few values fit for a metric
// label.
type Result string

// The results of a command.
const (
	// ResultOK: exit status 0.
	ResultOK Result = "ok"
	// ResultExitError: the command ran and exited non-zero.
	ResultExitError Result = "exit_error"
	// ResultNotFound: the executable was not found.
	ResultNotFound Result = "not_found"
	// ResultTimeout: the command ran out of time.
	ResultTimeout Result = "timeout"
	// ResultCanceled: the caller cancelled it.
	ResultCanceled Result = "canceled"
	// ResultError: anything else (no decision, the runtime or the exec
	// socket failed, ...).
	ResultError Result = "error"
)

// exitError is what k8s.io/utils/exec's ExitError is: a command that ran
// and exited non-zero.
type exitError interface {
	error
	Exited() bool
	ExitStatus() int
}

// ResultOf classifies a command's error err: nil is [ResultOK]; the
// executable not found ([os/exec.ErrNotFound], which k8s.io/utils/exec's
// ErrExecutableNotFound is) [ResultNotFound]; a deadline, or any of
// timeouts (the caller's own timeout errors), [ResultTimeout]; a
// cancellation [ResultCanceled]; an exit status [ResultExitError];
// anything else [ResultError]. Package exec and kubelet-exec-shim report
// their commands' results with it.
func ResultOf(err error, timeouts ...error) Result {
	var exit exitError
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, osexec.ErrNotFound):
		return ResultNotFound
	case errors.Is(err, context.DeadlineExceeded) || slices.ContainsFunc(timeouts, func(t error) bool { return errors.Is(err, t) }):
		return ResultTimeout
	case errors.Is(err, context.Canceled):
		return ResultCanceled
	case errors.As(err, &exit):
		return ResultExitError
	}
	return ResultError
}
