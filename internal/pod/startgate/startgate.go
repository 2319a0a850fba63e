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
// function called right after. A traced execve that a security module
// refuses (EPERM) is started once more, untraced, by [Start] itself, so
// that every caller does it alike; package startgatetest makes a program
// refused so in tests.
package startgate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/pod/startgate/internal/seam"
)

// Start starts a command that newCmd makes, as [exec.Cmd.Start] does, and
// returns it, for the caller to Wait for. When gate is not nil, it calls
// gate with the command's PID before the program runs its first
// instruction (see the package's doc), or, where the tracing is refused,
// once the command has started. An error of gate's is the caller's to
// report: gate returns none, and the command runs whatever it did. The
// Cmd's SysProcAttr is used as made, with Ptrace set for the start. A
// command that cannot be let run after the gate (killed there, or a gate
// that panicked) is killed and reaped, and the error says so: the caller
// must not Wait for it.
//
// A traced execve refused with EPERM (as root, a security module's rule
// for the program run traced) runs nothing: Start logs a warning to log
// (nil: none) naming the program (argv0, never the arguments, which may
// carry secrets) and starts a second command of newCmd, untraced. If that
// start succeeds, the program is started untraced from then on; if it
// fails too, the refusal was not the tracing's, and the program is traced
// again. newCmd is called once, or twice, and must make a new Cmd each
// time (a Cmd starts only once); both may be given the same files as
// standard streams, to which the refused one wrote nothing. The command
// runs at most once.
func Start(newCmd func() *exec.Cmd, gate func(pid int), log *slog.Logger) (*exec.Cmd, error) {
	cmd := newCmd()
	_, err := startOnce(cmd, gate)
	if !errors.Is(err, errTracedExecRefused) {
		return cmd, err
	}
	if log != nil {
		argv0 := cmd.Path
		if len(cmd.Args) > 0 {
			argv0 = cmd.Args[0]
		}
		log.Warn("a command could not run traced; it is started once more, untraced", "argv0", argv0, "err", err)
	}
	cmd = newCmd()
	_, err = startOnce(cmd, gate)
	return cmd, err
}

// startOnce starts cmd, gated as [Start] says, and reports whether gate
// ran before the program's first instruction (false: the tracing was
// refused, and gate ran once the command had started). A traced execve
// refused with EPERM is an error wrapping [errTracedExecRefused]: the
// command did not run, and the next start of the program is untraced.
func startOnce(cmd *exec.Cmd, gate func(pid int)) (gated bool, err error) {
	if gate == nil {
		return false, cmd.Start()
	}
	if st := refusals.of(cmd.Path); !tracingWorks() || st != tracedOK {
		err := cmd.Start()
		if st == tracedSuspect {
			refusals.resolve(cmd.Path, err == nil)
		}
		if err != nil {
			return false, err
		}
		gate(cmd.Process.Pid)
		return false, nil
	}
	return onThreadOfItsOwn(func() (bool, error) { return tracedStart(cmd, gate) })
}

// onThreadOfItsOwn runs f on a goroutine locked to its OS thread, which
// ends with it, and returns what f returns; a panic of f's goes on in the
// caller. The tracer is the thread that forks, and only it may detach the
// child, so a traced start holds its thread from the fork to the detach.
// A thread unlocked after that stays with the runtime, idle, for the rest
// of the process's life (Go never ends the threads it started), one more
// for each start under way at the busiest moment; a goroutine that ends
// locked takes its thread with it (but the process's main thread, which
// the runtime parks for good instead).
func onThreadOfItsOwn(f func() (bool, error)) (bool, error) {
	type result struct {
		ok       bool
		err      error
		panicked bool
		value    any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // for good: the thread ends with the goroutine
		r := result{panicked: true}
		defer func() {
			if r.panicked {
				r.value = recover()
			}
			done <- r
		}()
		r.ok, r.err = f()
		r.panicked = false
	}()
	r := <-done
	if r.panicked {
		panic(r.value)
	}
	return r.ok, r.err
}

// tracedStart is startOnce's traced start, on the thread that will trace
// the child (see [onThreadOfItsOwn]).
func tracedStart(cmd *exec.Cmd, gate func(pid int)) (gated bool, err error) {
	given := cmd.SysProcAttr
	attr := syscall.SysProcAttr{}
	if given != nil {
		attr = *given
	}
	attr.Ptrace = true
	cmd.SysProcAttr = &attr
	if seam.Refused(cmd.Path) { // a test's refusal (package startgatetest)
		err = &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: syscall.EPERM}
	} else {
		err = cmd.Start()
	}
	cmd.SysProcAttr = given
	if errors.Is(err, syscall.EPERM) {
		// As root, most often a security module's refusal of a traced
		// exec (AppArmor, SELinux), which the probe's child, execing
		// nothing, could not see; the next start of the program, untraced,
		// tells.
		refusals.suspect(cmd.Path)
		return false, fmt.Errorf("%w: %w", errTracedExecRefused, err)
	}
	if err != nil {
		return false, err
	}
	pid := cmd.Process.Pid
	stopped, err := awaitExecStop(pid)
	switch {
	case err != nil:
		return true, endStopped(cmd, fmt.Errorf("wait for process %d of %s to stop at its start: %w", pid, cmd.Path, err))
	case !stopped:
		// Killed before its stop (SIGKILL from another process), and
		// not reaped: the caller's Wait reports it.
		return true, nil
	}
	let := false
	defer func() {
		if !let { // gate panicked: the child must not stay stopped
			_ = endStopped(cmd, nil)
		}
	}()
	gate(pid)
	let = true
	if err := detach(pid); err != nil {
		// Killed at the gate, or left stopped for good.
		return true, endStopped(cmd, fmt.Errorf("let process %d of %s run after its start: %w", pid, cmd.Path, err))
	}
	return true, nil
}

// errTracedExecRefused is wrapped by the error of [startOnce] for a
// command whose traced execve the kernel refused with EPERM.
var errTracedExecRefused = errors.New("the kernel refused to run the command traced")

// The states of a program for [startOnce]: traced, refused traced once and
// not yet started untraced, or refused traced and started untraced since.
const (
	tracedOK = iota
	tracedSuspect
	tracedRefused
)

// refusals are the programs whose traced execve was refused.
var refusals = refusalSet{state: map[string]int{}}

type refusalSet struct {
	mu    sync.Mutex
	state map[string]int
}

func (r *refusalSet) of(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state[path]
}

func (r *refusalSet) suspect(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state[path] == tracedOK {
		r.state[path] = tracedSuspect
	}
}

// resolve settles a suspect program by its untraced start: refused for
// good if it started, traced again if it failed as well.
func (r *refusalSet) resolve(path string, started bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state[path] != tracedSuspect {
		return
	}
	if started {
		r.state[path] = tracedRefused
	} else {
		delete(r.state, path)
	}
}

// endStopped kills and reaps the command of a start that cannot go on,
// and returns err.
func endStopped(cmd *exec.Cmd, err error) error {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return err
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

// awaitExecStop waits for the child's stop at its execve (a SIGTRAP
// ptrace-stop) and consumes it: a stop left pending would be what the
// caller's Wait reports, and the child would stay stopped. stopped is
// false for a child that ended first, which is left unreaped for the
// caller's Wait: the stop is consumed by a wait for stops only, which
// never reaps. A signal that stopped it before (one that was pending as
// execve ended) is delivered, and the wait goes on, a few times at most.
func awaitExecStop(pid int) (stopped bool, err error) {
	for others := 0; others <= maxOtherStops; {
		var info unix.Siginfo
		if err := retryEINTR(func() error {
			return unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		}); err != nil {
			return false, err
		}
		if info.Code != cldTrapped && info.Code != cldStopped {
			return false, nil
		}
		info = unix.Siginfo{}
		if err := retryEINTR(func() error {
			return unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG|unix.WALL, nil)
		}); err != nil {
			return false, err
		}
		childPID, sig := chldOf(&info)
		switch {
		case childPID == 0:
			continue // no longer stopped: ended, found at the next turn
		case sig == syscall.SIGTRAP:
			return true, nil
		}
		others++
		if err := retryEINTR(func() error { return unix.PtraceCont(pid, int(sig)) }); err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("stopped by %d other signals before its start", maxOtherStops)
}

// maxOtherStops bounds the stops of awaitExecStop for signals other than
// the execve's SIGTRAP.
const maxOtherStops = 4

// chldOf returns si_pid and si_status of the SIGCHLD siginfo info: the
// members of its union, which follows si_signo, si_errno and si_code
// aligned to a pointer's size (<asm-generic/siginfo.h>: at 16 on 64-bit
// machines, 12 on 32-bit ones), si_uid between them.
func chldOf(info *unix.Siginfo) (pid int, sig syscall.Signal) {
	const ptr = unsafe.Sizeof(uintptr(0))
	const union = (12 + ptr - 1) &^ (ptr - 1)
	b := (*[32]byte)(unsafe.Pointer(info))
	pid = int(int32(binary.NativeEndian.Uint32(b[union:])))
	sig = syscall.Signal(int32(binary.NativeEndian.Uint32(b[union+8:])))
	return pid, sig
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
