// Package outpipe reads the output pipes of a command the mount pod runs:
// to their end, or, once the command has exited and its caller stops
// waiting for that end, what the pipes hold at that moment. What a command
// wrote before it exited is never lost, however late the reader runs after
// the exit, and a daemon the command left holding the pipes (the glusterfs
// FUSE client can) does not hold the caller.
package outpipe

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/startgate"
)

// maxHeld bounds what Copy reads once stopped: a pipe holds at most
// /proc/sys/fs/pipe-max-size (1 MiB by default) that nobody has read, and
// a writer still running must not keep the reading going.
const maxHeld = 1 << 20

// Copy passes to emit what the pipe f yields, in reads of at most len(buf)
// bytes (emit must not keep the slice), until f ends; it then reports
// true. Once [Stop] was called on f, it passes what f holds without
// waiting for more and returns, true only if that reached the pipe's end
// (no writer left). f must be a pipe from [os.Pipe].
func Copy(f *os.File, buf []byte, emit func([]byte)) (ended bool) {
	for {
		n, err := f.Read(buf)
		if n > 0 {
			emit(buf[:n])
		}
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return copyHeld(f, buf, emit)
		case err != nil:
			return true
		}
	}
}

// Stop makes a [Copy] of f, running or to come, pass what f holds and
// return without waiting for the pipe's end. A pipe that takes no deadline
// (not in the runtime's poller) is closed instead: the Copy ends, and what
// it had not read is lost, rather than wait for a daemon that holds it.
func Stop(f *os.File) {
	if f.SetReadDeadline(time.Unix(1, 0)) != nil {
		f.Close()
	}
}

// copyHeld passes to emit what f holds now, without waiting for more, and
// reports whether it found the pipe's end.
func copyHeld(f *os.File, buf []byte, emit func([]byte)) (ended bool) {
	// The deadline that stopped the Copy would refuse every read.
	if f.SetReadDeadline(time.Time{}) != nil {
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	for read := 0; read < maxHeld; {
		var n int
		var rerr error
		// Returning true never waits: the pipe is non-blocking, and an
		// empty one that still has a writer answers EAGAIN.
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), buf)
			return true
		}); err != nil {
			return false
		}
		switch {
		case rerr == syscall.EINTR:
			continue
		case rerr != nil:
			return false
		case n == 0:
			return true
		}
		emit(buf[:n])
		read += n
	}
	return false
}

// Run runs a command newCmd makes, its standard output and error on pipes
// whose content goes to stdout and stderr (one pipe when they are the same
// writer, as exec.Cmd does), and returns it with cmd.Wait's error once the
// pipes ended, or, grace after the command exited (a daemon it left holds
// them), once what they held then was passed on. Each pipe's writer is
// written from a goroutine of its own. The command is started by
// startgate.Start, with gate (when not nil, called with the command's
// process ID before the program runs) and log: newCmd may be called twice
// and must make a new Cmd each time, its Stdout and Stderr unset. The
// command is nil only if no pipe could be made.
func Run(newCmd func() *exec.Cmd, stdout, stderr io.Writer, grace time.Duration, gate func(pid int), log *slog.Logger) (*exec.Cmd, error) {
	var readers, childEnds []*os.File
	var writers []io.Writer
	defer func() { closeAll(readers) }()
	pipe := func(w io.Writer) (*os.File, error) {
		r, cw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		readers, childEnds, writers = append(readers, r), append(childEnds, cw), append(writers, w)
		return cw, nil
	}
	outW, err := pipe(stdout)
	if err != nil {
		return nil, err
	}
	errW := outW
	if stderr != stdout {
		if errW, err = pipe(stderr); err != nil {
			closeAll(childEnds)
			return nil, err
		}
	}
	cmd, err := startgate.Start(func() *exec.Cmd {
		cmd := newCmd()
		cmd.Stdout, cmd.Stderr = outW, errW
		return cmd
	}, gate, log)
	// The child has its copies; ours must go, or the pipes never end.
	closeAll(childEnds)
	if err != nil {
		return cmd, err
	}
	var copies sync.WaitGroup
	for i, r := range readers {
		w := writers[i]
		copies.Go(func() {
			Copy(r, make([]byte, 32<<10), func(b []byte) { _, _ = w.Write(b) })
		})
	}
	err = startgate.Wait(cmd)
	copied := make(chan struct{})
	go func() {
		copies.Wait()
		close(copied)
	}()
	Await(copied, grace, readers...)
	return cmd, err
}

// Await waits until copied is closed (the Copies of pipes have returned),
// for at most grace; then it stops them ([Stop]) and waits until they
// have passed what the pipes held. Call it once the command has exited.
func Await(copied <-chan struct{}, grace time.Duration, pipes ...*os.File) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-copied:
	case <-t.C:
		for _, f := range pipes {
			Stop(f)
		}
		<-copied
	}
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
