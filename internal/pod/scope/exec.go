package scope

import (
	"errors"
	"io/fs"
	"os/exec"
)

// Exit codes of the mount helper (cmd/mount-scope) for its own failures, those of env(1),
// nohup(1) and docker run; any other code is the command's own.
const (
	// ExitFailed: bad usage, or the process could not be placed in its
	// scope (the command did not run).
	ExitFailed = 125
	// ExitCannotRun: the command was found but could not be executed.
	ExitCannotRun = 126
	// ExitNotFound: the command was not found.
	ExitNotFound = 127
)

// commandError is a failure to find or execute the command.
type commandError struct {
	code int
	err  error
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// ExitCode returns the exit code for an error of [RunHelper]: [ExitNotFound] or
// [ExitCannotRun] when the command could not be found or executed, the
// distribution helper's own status for a refusal of a translated helper
// that has one (mount.glusterfs: 1, 2 or 32), [ExitFailed] for anything
// else.
func ExitCode(err error) int {
	var ce *commandError
	if errors.As(err, &ce) {
		return ce.code
	}
	// A translated helper's refusal with the distribution helper's own
	// exit status (clientargs.Error).
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return ExitFailed
}

func commandExitCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return ExitNotFound
	}
	return ExitCannotRun
}
