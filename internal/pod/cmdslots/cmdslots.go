// Package cmdslots bounds the commands volume hosts run at once in the
// mount container, whichever way they came: the exec service (one process,
// the exec socket) and every `mountpod exec-batch` (a process per CRI
// ExecSync) take a slot for each command they run. (The recovery's own
// mounts take none: they are few, and must not wait behind a wave.) Each command's helpers
// (mount(8), a mount helper, a FUSE client starting) are the mount
// container's memory until they exit or move to their scope, so a wave of
// mounts through CRI, where batches run side by side in separate
// processes, would otherwise hold as many at once as the kubelet asks.
//
// A slot is a file of a directory private to the container, held with an
// exclusive flock(2) for as long as its command runs. The kernel releases
// it when the open file goes, so a killed holder leaks no slot. Every
// waiter, whatever its process, looks for a free slot on the same
// schedule (every 5 ms at first, then less often, up to every 50 ms, with
// jitter): a process's own waiters get no head start on another's, so
// neither path can starve the other.
package cmdslots

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// DefaultDir holds the slot files, in the mount container.
	DefaultDir = "/run/mountpod/slots"
	// DefaultCount is how many commands run at once in the container:
	// the exec service's own bound (execserver.DefaultMaxConcurrent),
	// now over both paths. Through CRI, batches side by side had put 74
	// mounts at once in the container (106 MiB). A bound of 16 cut that
	// to 75 MiB but slowed a wave of 100 mounts through the exec socket
	// by a tenth: a mount waits on its server more than on the CPU
	// (BENCHMARKS.md, 2026-11-28, later).
	DefaultCount = 32
	// MaxCount bounds Count: each slot is an open file of every process
	// that takes one.
	MaxCount = 1024
)

// Poll bounds of a wait for a slot.
const (
	firstPoll = 5 * time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Slots are the container's command slots, as one process sees them.
// Create them with [Open]; they are safe for concurrent use.
type Slots struct {
	dir   string
	files []*os.File

	mu   sync.Mutex
	held []bool // by this process
	next int    // where the next search starts
}

// Open opens (making them when missing) the count slot files of dir, which
// is made when missing too. dir must be a directory that root owns and
// nobody else can write; a slot file must be a regular file: anything
// else is an error naming it, and nothing is opened.
func Open(dir string, count int) (*Slots, error) {
	if count < 1 || count > MaxCount {
		return nil, fmt.Errorf("command slots: count %d: want 1 to %d", count, MaxCount)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("command slots: %w", err)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("command slots: open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, fmt.Errorf("command slots: %s: %w", dir, err)
	}
	if st.Uid != 0 || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("command slots: %s: owned by uid %d, mode %#o: want root's, writable by root alone", dir, st.Uid, st.Mode&0o7777)
	}
	s := &Slots{dir: dir, held: make([]bool, count)}
	for i := range count {
		name := "slot-" + strconv.Itoa(i)
		// What is there already must be a regular file before it is
		// opened: opening a device can act.
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
			s.Close()
			return nil, fmt.Errorf("command slots: %s/%s: not a regular file", dir, name)
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
		if err == nil {
			if err = unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
				err = errors.New("not a regular file")
			}
			if err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("command slots: %s/%s: %w", dir, name, err)
		}
		s.files = append(s.files, os.NewFile(uintptr(fd), dir+"/"+name))
	}
	return s, nil
}

// Count is how many slots there are.
func (s *Slots) Count() int { return len(s.files) }

// Acquire takes a slot, waiting until one is free or ctx ends, and returns
// the function that gives it back (call it once).
func (s *Slots) Acquire(ctx context.Context) (release func(), err error) {
	poll := firstPoll
	for {
		i, err := s.try()
		if err != nil {
			return nil, err
		}
		if i >= 0 {
			var once sync.Once
			return func() { once.Do(func() { s.release(i) }) }, nil
		}
		t := time.NewTimer(poll/2 + rand.N(poll/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("all %d command slots of the container busy (%s): %w", len(s.files), s.dir, context.Cause(ctx))
		case <-t.C:
			poll = min(2*poll, maxPoll)
		}
	}
}

// try takes a free slot and returns its index, or -1.
func (s *Slots) try() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.files)
	for k := range n {
		i := (s.next + k) % n
		if s.held[i] {
			continue
		}
		err := unix.Flock(int(s.files[i].Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			s.held[i] = true
			s.next = (i + 1) % n
			return i, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return -1, fmt.Errorf("command slot %s: %w", s.files[i].Name(), err)
		}
	}
	return -1, nil
}

func (s *Slots) release(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = unix.Flock(int(s.files[i].Fd()), unix.LOCK_UN)
	s.held[i] = false
}

// Close closes the slot files, releasing the slots this process holds. No
// slot may be taken or given back during or after it: a process that may
// still run commands lets its exit close them.
func (s *Slots) Close() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
