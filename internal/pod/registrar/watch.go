package registrar

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// stormEvents is the number of inotify events in one batch from which the
// watch considers the directory under a storm and waits MaxDelay, rather
// than Debounce, before reading again.
const stormEvents = 32

const (
	dirMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_CLOSE_WRITE | unix.IN_MODIFY | unix.IN_ATTRIB |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK
	parentMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR
)

// dirWatch reports which of a few registration files may have changed. It
// is made for storms: unlike a watch that wakes up for every event (such as
// fsnotify, which registration.Watch uses and which costs several per cent
// of a core at a thousand writes a second), it reads the inotify queue at
// most once per debounce period, and at most once per MaxDelay while the
// directory is busy, letting the kernel queue the events in between. An
// overflowing queue reports every file.
type dirWatch struct {
	dir      string
	files    map[string]string // base name -> plugin
	debounce time.Duration
	maxDelay time.Duration

	fd       int // the inotify instance, non-blocking
	wakeFD   int // an eventfd written to stop a waiting run
	dirWD    int
	parentWD int
}

// batch is one report of a dirWatch.
type batch struct {
	// plugins may have changed; all of them when all is set.
	plugins map[string]bool
	// all: the directory itself changed or events were lost.
	all bool
}

// newDirWatch watches dir (which may be missing) and its parent (which must
// exist) for changes to the registration files of plugins.
func newDirWatch(dir string, files map[string]string, debounce, maxDelay time.Duration) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch registrations in %s: inotify: %w", dir, err)
	}
	w := &dirWatch{dir: filepath.Clean(dir), files: files, debounce: debounce, maxDelay: max(maxDelay, debounce), fd: fd, dirWD: -1}
	parent := filepath.Dir(w.dir)
	if w.parentWD, err = unix.InotifyAddWatch(fd, parent, parentMask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch registrations in %s: watch parent %s: %w", dir, parent, err)
	}
	w.addDir()
	if w.wakeFD, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch registrations in %s: eventfd: %w", dir, err)
	}
	return w, nil
}

// addDir (re)adds the watch on dir; a missing dir is fine, the parent watch
// reports its creation. Adding a watch that exists returns the same one.
func (w *dirWatch) addDir() {
	wd, err := unix.InotifyAddWatch(w.fd, w.dir, dirMask)
	if err != nil {
		w.dirWD = -1
		return
	}
	w.dirWD = wd
}

// run sends batches until ctx ends, then closes out and the watch.
func (w *dirWatch) run(ctx context.Context, out chan<- batch) {
	defer close(out)
	defer w.close()
	// Wake a waiting poll(2) when ctx ends.
	stop := context.AfterFunc(ctx, func() {
		unix.Write(w.wakeFD, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	})
	defer stop()
	buf := make([]byte, 64<<10)
	for {
		// Wait for the first event, in poll(2) rather than in the Go
		// poller: the poller's edge-triggered epoll would wake up for
		// every event queued while the watch sleeps below.
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}, {Fd: int32(w.wakeFD), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return // the daemon treats an unexpected end as fatal
		}
		if ctx.Err() != nil {
			return
		}
		// Let the burst gather in the kernel's queue, then take it all.
		if !sleep(ctx, w.debounce) {
			return
		}
		b := batch{plugins: map[string]bool{}}
		events, err := w.drain(buf, &b)
		if err != nil {
			return
		}
		if b.all || len(b.plugins) > 0 {
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
		if events >= stormEvents && !sleep(ctx, w.maxDelay-w.debounce) {
			return
		}
	}
}

// drain reads every queued event without waiting and returns their number.
func (w *dirWatch) drain(buf []byte, b *batch) (int, error) {
	events := 0
	for {
		n, err := unix.Read(w.fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return events, nil
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return events, fmt.Errorf("read inotify events: %w", err)
		case n <= 0:
			return events, nil
		}
		events += w.parse(buf[:n], b)
	}
}

func (w *dirWatch) close() {
	unix.Close(w.fd)
	unix.Close(w.wakeFD)
}

// parse adds the events in data to b and returns their number.
func (w *dirWatch) parse(data []byte, b *batch) int {
	events := 0
	for len(data) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(data[0:]))
		mask := binary.NativeEndian.Uint32(data[4:])
		nameLen := int(binary.NativeEndian.Uint32(data[12:]))
		if unix.SizeofInotifyEvent+nameLen > len(data) {
			break
		}
		name := data[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+nameLen]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		data = data[unix.SizeofInotifyEvent+nameLen:]
		events++
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			w.addDir()
			b.all = true
		case int(wd) == w.parentWD:
			if string(name) == filepath.Base(w.dir) {
				w.addDir()
				b.all = true
			}
		case int(wd) == w.dirWD:
			if len(name) == 0 {
				// The directory itself: removed, moved or its link count
				// or mode changed.
				if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
					w.addDir()
				}
				b.all = true
			} else if p, ok := w.files[string(name)]; ok {
				b.plugins[p] = true
			}
		}
	}
	return events
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
