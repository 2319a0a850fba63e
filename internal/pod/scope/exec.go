package scope

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// Command is the program [Wrap] puts first: mountpod, on PATH in the
// mount-pod image.
const Command = "mountpod"

// Exit codes of `mountpod scope` for its own failures, those of env(1),
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

// Wrap returns the command line that runs argv in the scope of target under
// plugin's parent: `mountpod scope --plugin PLUGIN --target TARGET -- ARGV...`.
// Settings other than plugin and target come from the MOUNTPOD_SCOPE_*
// environment of the mount pod.
func Wrap(plugin, target string, argv []string) []string {
	return append([]string{Command, "scope", "--plugin", plugin, "--target", target, "--"}, argv...)
}

// commandError is a failure to find or execute the command.
type commandError struct {
	code int
	err  error
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// ExitCode returns the exit code for an error of [Exec]: [ExitNotFound] or
// [ExitCannotRun] when the command could not be found or executed,
// [ExitFailed] for anything else.
func ExitCode(err error) int {
	var ce *commandError
	if errors.As(err, &ce) {
		return ce.code
	}
	return ExitFailed
}

// Exec places the calling process in the scope of target under plugin's
// parent, then replaces it with argv, argv[0] found on PATH, with the same
// environment: whatever the command starts (a FUSE daemon) starts in the
// scope, with its oom_score_adj raised to at least cfg.OOMScoreAdj. The
// arguments are checked and the command is looked up first, so
// neither a bad name nor a missing command leaves a scope behind. Exec returns only on failure. A failure of execve(2) itself, after
// placement, leaves an empty scope that Remove takes away.
func Exec(cfg Config, plugin, target string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	if err := validate(plugin, target); err != nil {
		return err
	}
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return &commandError{code: commandExitCode(err), err: err}
	}
	m, err := New(cfg)
	if err != nil {
		return err
	}
	_, err = m.Place(plugin, target, 0)
	m.Close()
	if err == nil {
		err = raiseOOMScoreAdj(oomScoreAdjFile(cfg, 0), cfg.OOMScoreAdj)
	}
	if err != nil {
		return err
	}
	err = syscall.Exec(bin, argv, os.Environ())
	return &commandError{code: commandExitCode(err), err: fmt.Errorf("exec %s: %w", bin, err)}
}

func commandExitCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return ExitNotFound
	}
	return ExitCannotRun
}
