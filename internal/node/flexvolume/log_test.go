package flexvolume_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
)

// openLogWithin calls OpenLog on path and fails the test when it does not
// return within a few seconds; unblock, if set, then releases the open.
func openLogWithin(t *testing.T, path string, unblock func()) (io.Closer, error) {
	t.Helper()
	type result struct {
		f   io.Closer
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, f, err := flexvolume.OpenLog(path)
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		return r.f, r.err
	case <-time.After(time.Minute): // a hang guard: the open never waits
		if unblock != nil {
			unblock()
		}
		t.Fatalf("OpenLog(%s) blocked", path)
		return nil, nil
	}
}

// mkfifo makes a FIFO in a temporary directory; releasing it opens it
// for reading, which lets a writer blocked in open(2) go on.
func mkfifo(t *testing.T) (path string, release func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "driver.log")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		if fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
			time.AfterFunc(time.Second, func() { unix.Close(fd) })
		}
	}
}

// TestOpenLogRefuses: a log file that is not a regular file is refused
// at once, naming the file, whether or not a FIFO there has a reader.
func TestOpenLogRefuses(t *testing.T) {
	t.Run("FIFO without a reader", func(t *testing.T) {
		fifo, release := mkfifo(t)
		if f, err := openLogWithin(t, fifo, release); err == nil || !strings.Contains(err.Error(), fifo) {
			closeIf(f)
			t.Fatalf("err %v, want a refusal naming %s", err, fifo)
		}
	})
	t.Run("FIFO with a reader", func(t *testing.T) {
		fifo, release := mkfifo(t)
		fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if f, err := openLogWithin(t, fifo, release); err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "not a regular file") {
			closeIf(f)
			t.Fatalf("err %v, want a refusal naming %s", err, fifo)
		}
	})
	t.Run("device", func(t *testing.T) {
		if f, err := openLogWithin(t, os.DevNull, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			closeIf(f)
			t.Fatalf("err %v, want a refusal of %s", err, os.DevNull)
		}
	})
	t.Run("symbolic link", func(t *testing.T) {
		target := filepath.Join(t.TempDir(), "real.log")
		link := filepath.Join(t.TempDir(), "driver.log")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if f, err := openLogWithin(t, link, nil); err == nil || !strings.Contains(err.Error(), link) {
			closeIf(f)
			t.Fatalf("err %v, want a refusal naming %s", err, link)
		}
		if _, err := os.Lstat(target); err == nil {
			t.Fatal("the link was followed")
		}
	})
}

// TestOpenLogRegular: a regular file is opened for appending, mode 0600,
// and left blocking.
func TestOpenLogRegular(t *testing.T) {
	path := filepath.Join(t.TempDir(), "driver.log")
	log, c, err := flexvolume.OpenLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	flags, err := unix.FcntlInt(c.(*os.File).Fd(), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_APPEND == 0 {
		t.Errorf("flags %#x, %v; want O_APPEND", flags, err)
	}
	log.Info("hello")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
		t.Fatalf("log file %v, %v; want mode 0600 and a record", fi, err)
	}
}

// TestOpenLogClearsNonblock: the O_NONBLOCK the open needs is not left on
// the file (read through SyscallConn: Fd would clear it by itself).
func TestOpenLogClearsNonblock(t *testing.T) {
	_, c, err := flexvolume.OpenLog(filepath.Join(t.TempDir(), "driver.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*os.File).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil || flags&syscall.O_NONBLOCK != 0 {
		t.Fatalf("flags %#x, %v; want O_NONBLOCK cleared", flags, err)
	}
}

func closeIf(c io.Closer) {
	if c != nil {
		c.Close()
	}
}
