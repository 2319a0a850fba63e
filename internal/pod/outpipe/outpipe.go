// Package outpipe reads the output pipes of a command the mount pod runs:
// to their end, or, once the command has exited and its caller stops
// waiting for that end, what the pipes hold at that moment. What a command
// wrote before it exited is never lost, however late the reader runs after
// the exit, and a daemon the command left holding the pipes (the glusterfs
// FUSE client can) does not hold the caller.
package outpipe

import (
	"errors"
	"os"
	"syscall"
	"time"
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
// return without waiting for the pipe's end.
func Stop(f *os.File) {
	_ = f.SetReadDeadline(time.Unix(1, 0))
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
