package scope

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// killScope sends SIGKILL to the processes of the scope rel (relative to
// each hierarchy's root) that procs, its lister, listed as pids a moment
// ago, and returns those it signalled. It never signals a process that is
// not in the scope.
//
// kill(2) by a PID read from cgroup.procs could: the process may exit
// between the read and the signal, and its number go to an unrelated
// process, which would get SIGKILL. So:
//
//   - each PID is opened as a pidfd first, which names the process that has
//     the number then, and only ever that one;
//   - the scope is listed again: a PID still in it now belongs to a process
//     of the scope, and if that is not the process of its pidfd, the
//     pidfd's process has exited (a number is reused only once its process
//     is gone), and the signal through the pidfd reaches nobody (ESRCH);
//   - where the scope has a cgroup v2 directory with cgroup.kill (Linux
//     5.14), "1" is written there, and the kernel kills whatever is in the
//     cgroup then, with no PID involved; on a cgroup v2 only node that is
//     all;
//   - every opened process that is still listed gets SIGKILL through its
//     pidfd (pidfd_send_signal), which on a hybrid node also reaches those
//     that are in the scope of a v1 hierarchy only.
//
// A process that leaves the scope after the second listing and before its
// signal is still killed: it was the scope's a moment before.
// pidfd_open needs Linux 5.3, which the mount pod needs anyway (the
// recovery uses open_tree and openat2).
func (c *cgroupfs) killScope(rel string, pids []int, procs func() ([]int, error)) ([]int, error) {
	fds := make(map[int]int, len(pids))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		if pid <= 0 {
			continue // outside this PID namespace (0): no pidfd names it
		}
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case errors.Is(err, unix.ESRCH):
			continue // gone already
		case errors.Is(err, unix.ENOSYS):
			return nil, fmt.Errorf("pidfd_open %d: %w (Linux 5.3 or later is needed)", pid, err)
		case err != nil:
			return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
		}
		fds[pid] = fd
	}
	beforeSignal(pids)
	members, err := procs()
	if err != nil {
		return nil, err
	}
	var signalled []int
	for _, pid := range pids {
		if _, ok := fds[pid]; ok && slices.Contains(members, pid) {
			signalled = append(signalled, pid)
		}
	}
	if h := c.v2(); h != nil && !c.noKillFile {
		// Any failure (no such file before Linux 5.14, a scope removed
		// meanwhile) leaves it to the pidfds.
		if killFile(filepath.Join(h.Path, rel, "cgroup.kill")) == nil && len(c.layout.Hierarchies) == 1 {
			return signalled, nil
		}
	}
	for _, pid := range signalled {
		if err := unix.PidfdSendSignal(fds[pid], unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return signalled, fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return signalled, nil
}

// beforeSignal is called by killScope once it has opened the pidfds of
// pids and before it lists the scope again and signals anything; tests
// move a process out of the scope then.
var beforeSignal = func(pids []int) {}

// killFile writes "1" to the cgroup.kill file name, which must exist (a
// plain directory of a test's fake tree has none, and gets none).
func killFile(name string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("1")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
