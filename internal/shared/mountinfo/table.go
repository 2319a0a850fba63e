package mountinfo

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
)

// Table is a mount table that is read again only when it has changed: a
// mountinfo file of the proc file system is kept open, and the kernel
// marks it with POLLPRI when its mount namespace changed since the last
// poll (proc(5), /proc/PID/mountinfo), a mount propagated into it
// included. A file of another file system (a test's table) is read at
// every [Table.Read], and a proc file at least every 10 s. The recovery
// reads its mount pod's table every second, and on a node of a hundred
// pods that read was a third of its pass (BENCHMARKS.md).
//
// Its methods are safe for concurrent use. The slice [Table.Read] returns
// is shared by the calls that return the same table: it must not be
// changed.
type Table struct {
	path string

	mu     sync.Mutex
	f      *os.File // the open proc file; nil until the first Read, or for another file
	infos  []mount.MountInfo
	buf    bytes.Buffer // what the file read, kept for the next read
	readAt time.Time
	reads  int           // the times the file was read and parsed (tests)
	maxAge time.Duration // defaultMaxAge but in tests
}

// defaultMaxAge is how long a Table keeps a table the kernel did not mark
// changed: a proc file system that never marks one (not Linux's own) is
// read this often all the same.
const defaultMaxAge = 10 * time.Second

// NewTable returns the table of the mountinfo file at path; nothing is
// opened before the first [Table.Read].
func NewTable(path string) *Table { return &Table{path: path, maxAge: defaultMaxAge} }

// Read returns the mount table: the one read before when the kernel
// reports no change since, else the file read and parsed again.
func (t *Table) Read() ([]mount.MountInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		// A blocking descriptor of its own, not os.Open's: Go's runtime
		// adds a file that can be polled to its network poller, whose
		// poll of the proc file takes the change mark before ours sees
		// it, and the table would never be read again.
		fd, err := unix.Open(t.path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: t.path, Err: err}
		}
		f := os.NewFile(uintptr(fd), t.path)
		var st unix.Statfs_t
		if err := unix.Fstatfs(int(f.Fd()), &st); err != nil || st.Type != unix.PROC_SUPER_MAGIC {
			defer f.Close()
			return t.parse(f)
		}
		// The file's change mark starts at its open: this first read
		// below sees every change before it.
		t.f = f
	} else if !t.changed() && time.Since(t.readAt) < t.maxAge {
		return t.infos, nil
	}
	if _, err := t.f.Seek(0, io.SeekStart); err != nil {
		return nil, t.reset(err)
	}
	infos, err := t.parse(t.f)
	if err != nil {
		return nil, t.reset(err)
	}
	t.infos, t.readAt = infos, time.Now()
	return infos, nil
}

// changed polls the open file, without waiting: true when the kernel
// marks a change since the last poll, or the poll fails (then the file is
// read again, which fails in its turn if the file is unusable).
func (t *Table) changed() bool {
	fds := []unix.PollFd{{Fd: int32(t.f.Fd()), Events: unix.POLLPRI}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || (n == 1 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR|unix.POLLNVAL) != 0)
	}
}

// reset closes the open file after err, so that the next Read opens it
// again, and returns err.
func (t *Table) reset(err error) error {
	t.f.Close()
	t.f, t.infos = nil, nil
	return err
}

// parse reads r to its end, into the buffer kept from read to read (the
// table's entries hold a copy: see [Parse]), and parses it.
func (t *Table) parse(r io.Reader) ([]mount.MountInfo, error) {
	t.buf.Reset()
	if _, err := t.buf.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("read %s: %w", t.path, err)
	}
	t.reads++
	infos, err := Parse(t.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.path, err)
	}
	return infos, nil
}

// Close closes the open file, if any; a later Read opens it again.
func (t *Table) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f, t.infos = nil, nil
	return err
}
