package shim

import (
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"syscall"

	utilexec "k8s.io/utils/exec"
)

// The shim's own exit codes; see the package documentation.
const (
	ExitTimeout     = 124
	ExitShimFailed  = 125
	ExitCannotRun   = 126
	ExitNotFound    = 127
	exitSignalBase  = 128
	exitInterrupted = exitSignalBase + int(syscall.SIGINT)
)

// exitCodeOf maps the error of a utility run to the shim's exit code.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitSignalBase + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	var ce utilexec.ExitError
	if errors.As(err, &ce) {
		if code := ce.ExitStatus(); code >= 0 {
			return code
		}
	}
	switch {
	case errors.Is(err, utilexec.ErrExecutableNotFound), errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return ExitNotFound
	case errors.Is(err, context.DeadlineExceeded): // package exec's ErrTimeout wraps it too
		return ExitTimeout
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.EISDIR):
		return ExitCannotRun
	}
	return ExitShimFailed
}

// isExitStatus reports whether err is the utility's own exit status, as
// opposed to a failure to start or finish it.
func isExitStatus(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return true
	}
	var ce utilexec.ExitError
	return errors.As(err, &ce) && ce.ExitStatus() >= 0
}
