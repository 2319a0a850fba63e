// Package startgate starts a command of the mount pod stopped at the first
// instruction of its program, lets the caller act on its process (move it
// into a cgroup), and only then lets it run.
//
// A FUSE mount's mount(8) runs in its mount's scope, not in the mount
// pod's cgroup (package scope). Moving it there as soon as it has started
// left it running meanwhile: under a wave of mounts, the mount pod's small
// CPU weight made the move wait while mount(8) read the mount table and
// forked its helper, and both piled up in the mount pod's cgroup
// (BENCHMARKS.md, "A node under load"). Here the child asks to be traced
// (PTRACE_TRACEME) before its execve, so the kernel stops it once the
// program is loaded; the caller's function runs with its PID, and the
// child is detached (PTRACE_DETACH), which lets it go on untraced.
//
// Where the kernel refuses the tracing (Yama's ptrace_scope 3, a seccomp
// profile without ptrace), found once per process by a child that asks
// for it and runs nothing, the command is started as usual and the
// function called right after.
package startgate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Start starts cmd as cmd.Start does; when gate is not nil, it calls gate
// with the command's PID before the program runs its first instruction
// (see the package's doc), and reports whether that was so (false: the
// tracing was refused, and gate ran once the command had started). An
// error of gate's is the caller's to report: gate returns none, and the
// command runs whatever it did. cmd.SysProcAttr is used as given, with
// Ptrace set for the start. A command that cannot be let run after the
// gate (killed there) is reaped, and the error says so: the caller must
// not Wait for it.
func Start(cmd *exec.Cmd, gate func(pid int)) (gated bool, err error) {
	if gate == nil {
		return false, cmd.Start()
	}
	if !tracingWorks() {
		if err := cmd.Start(); err != nil {
			return false, err
		}
		gate(cmd.Process.Pid)
		return false, nil
	}
	// The tracer is the thread that forks; only it may detach the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	given := cmd.SysProcAttr
	attr := syscall.SysProcAttr{}
	if given != nil {
		attr = *given
	}
	attr.Ptrace = true
	cmd.SysProcAttr = &attr
	err = cmd.Start()
	cmd.SysProcAttr = given
	if err != nil {
		return false, err
	}
	pid := cmd.Process.Pid
	if err := awaitExecStop(pid); err != nil {
		// Killed before its stop (SIGKILL from another process): the
		// caller's Wait reports it.
		return true, nil
	}
	gate(pid)
	if err := detach(pid); err != nil {
		// Killed at the gate, or left stopped for good: it is ended
		// and reaped here, as a start that failed.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return true, fmt.Errorf("let process %d of %s run after its start: %w", pid, cmd.Path, err)
	}
	return true, nil
}

// tracingWorks reports whether a child may trace itself here, asked once
// per process (a variable for the tests): a Cmd cannot be started again
// after a failed start, so the refusal is found beforehand. The probe's
// child asks for the tracing and then runs a path that cannot exist;
// ENOTDIR comes from that execve, any other error from the tracing.
var tracingWorks = sync.OnceValue(func() bool {
	p, err := os.StartProcess("/dev/null/startgate-probe", []string{"startgate-probe"}, &os.ProcAttr{Sys: &syscall.SysProcAttr{Ptrace: true}})
	if err == nil { // cannot be; let it not be traced for good
		_ = p.Kill()
		_, _ = p.Wait()
		return false
	}
	return errors.Is(err, syscall.ENOTDIR)
})

// errNotStopped is awaitExecStop's for a child that ended instead.
var errNotStopped = errors.New("the process ended before its stop")

// awaitExecStop waits for the child's stop at its execve (a SIGTRAP
// ptrace-stop), and consumes it: a stop left pending would be what the
// caller's Wait reports. A child that ended first is left unreaped
// (WNOWAIT), for the caller's Wait.
func awaitExecStop(pid int) error {
	var info unix.Siginfo
	if err := retryEINTR(func() error {
		return unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
	}); err != nil {
		return err
	}
	if info.Code != cldTrapped && info.Code != cldStopped {
		return errNotStopped
	}
	var ws unix.WaitStatus
	if err := retryEINTR(func() error {
		_, err := unix.Wait4(pid, &ws, unix.WALL|unix.WUNTRACED, nil)
		return err
	}); err != nil {
		return err
	}
	if !ws.Stopped() {
		return errNotStopped // killed meanwhile, and reaped here
	}
	return nil
}

// detach lets the stopped tracee run, with no signal.
func detach(pid int) error {
	return retryEINTR(func() error { return unix.PtraceDetach(pid) })
}

func retryEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

// The si_code values of a child's stop (<asm-generic/siginfo.h>).
const (
	cldTrapped = 4 // CLD_TRAPPED
	cldStopped = 5 // CLD_STOPPED
)
