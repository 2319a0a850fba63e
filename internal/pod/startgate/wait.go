package startgate

import (
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// Wait waits for cmd, started by [Start], to exit and then reaps it as
// [exec.Cmd.Wait] does, returning what that returns. The wait for the exit
// parks the goroutine in Go's poller, on a pidfd of the process (readable
// once it has exited), instead of in the kernel's waitid: a goroutine
// blocked in a system call holds an OS thread, the runtime starts another
// for the rest, and it never ends the threads it started; a command under
// way is one thread fewer. Where no pidfd can be had (a kernel before 5.3)
// or polled, the wait is exec.Cmd.Wait's own.
func Wait(cmd *exec.Cmd) error {
	if cmd.Process != nil {
		awaitExit(cmd.Process.Pid)
	}
	return cmd.Wait()
}

// awaitExit returns once the child pid, not yet reaped, has exited, or
// as soon as it cannot tell. It reaps nothing.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	// Non-blocking, so NewFile adds it to the poller.
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// Read calls the function, and while it returns false waits until the
	// pidfd is readable; an error (a descriptor the poller refused) ends
	// the wait at once.
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := retryEINTR(func() error {
			return unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		})
		exited, _ := chldOf(&info)
		return err != nil || exited != 0
	})
}
