package livemount

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// TestEndedConnectionsServeNothing reads a fake /proc where the kernel
// has given the number of a mount that is gone (30) to a's mount: a
// process in a scope holding the old mount's connection, which ended, is
// not a's daemon, whether the survey reads it whole or through the
// descriptors it was known to hold the connection through; a process
// holding both an ended and a live connection of that number is, and so
// is one in no scope, whose descriptors are not copied. Only the holders
// of a target that more than one process serves are checked.
func TestEndedConnectionsServeNothing(t *testing.T) {
	proc, a, b, targets, conns := twoMounts(t)
	writeProc(t, proc, 101, rootProc([]int{30}, "/usr/sbin/glusterfs"))         // the old mount's daemon, stopped
	writeProc(t, proc, 102, rootProc([]int{30, 30, 33}, "/usr/sbin/glusterfs")) // descriptor 3 ended, 4 live; 5 d's, alone
	writeProc(t, proc, 103, rootProc([]int{31}, "/usr/sbin/glusterfs"))         // b's
	writeProc(t, proc, 104, rootProc([]int{30}, "/usr/bin/other-fuse"))         // stopped too, in no scope
	writeProc(t, proc, 105, rootProc([]int{32}, "/usr/sbin/glusterfs"))         // c's alone
	for pid, start := range map[int]int{101: 4000, 102: 4500, 103: 5001, 104: 3000, 105: 5002} {
		writeStat(t, proc, pid, start)
	}
	// 105's would be ended too, but it serves c alone: not asked.
	ended := map[string]bool{"101/3": true, "102/3": true, "104/3": true, "105/3": true}
	var asked []string
	endedOf := func(pid int, fd string, c uint64) bool {
		if c != 30 {
			t.Errorf("asked whether connection %d of %d's descriptor %s ended; only 30's target is served by more than one process", c, pid, fd)
		}
		asked = append(asked, fmt.Sprintf("%d/%s", pid, fd))
		return ended[fmt.Sprintf("%d/%s", pid, fd)]
	}
	c := "/var/lib/kubelet/pods/c/volumes/x~glusterfs/data"
	d := "/var/lib/kubelet/pods/d/volumes/x~glusterfs/data"
	targets[c], conns[32] = true, []string{c}
	targets[d], conns[33] = true, []string{d}
	want := map[string][]int{a: {100, 102}, b: {103}, c: {105}, d: {102}}
	// 104 is in no scope: its descriptor is not copied, and the number
	// decides (see connectionEnded).
	wantSurvey := map[string][]int{a: {100, 102, 104}, b: {103}, c: {105}, d: {102}}
	fs := &fakeScopes{scopes: map[string][]scope.Scope{"x.io/glusterfs": {
		{Name: scope.Name(a), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(a), PIDs: []int{100, 101, 102}},
		{Name: scope.Name(b), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(b), PIDs: []int{103}},
		{Name: scope.Name(c), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(c), PIDs: []int{105}},
	}}}

	mi := writeMountInfo(t,
		"20 1 0:20 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/gv0 rw", a),
		fmt.Sprintf("31 20 0:31 / %s rw - fuse.glusterfs srv:/gv1 rw", b),
		fmt.Sprintf("32 20 0:32 / %s rw - fuse.glusterfs srv:/gv2 rw", c),
		fmt.Sprintf("33 20 0:33 / %s rw - fuse.glusterfs srv:/gv3 rw", d))
	r, err := Survey(context.Background(), Options{KubeletDir: "/var/lib/kubelet", Plugins: []string{"x.io/glusterfs"}, Scopes: fs,
		MountInfo: mi, ProcRoot: proc, ended: endedOf})
	if err != nil {
		t.Fatal(err)
	}
	if got := daemonsOf(r); !maps.EqualFunc(got, wantSurvey, slices.Equal[[]int]) {
		t.Errorf("survey: daemons %v, want %v (101 and 102's descriptor 3 hold ended connections; 104 is in no scope)", got, wantSurvey)
	}
	for _, fd := range []string{"100/3", "101/3", "102/3", "102/4"} {
		if !slices.Contains(asked, fd) {
			t.Errorf("the survey did not ask whether %s's connection ended (asked %v)", fd, asked)
		}
	}
	for _, fd := range []string{"103/3", "104/3", "105/3"} {
		if slices.Contains(asked, fd) {
			t.Errorf("the survey asked whether %s's connection ended: in no scope, or the only holder of its target (asked %v)", fd, asked)
		}
	}

	// Known from a survey before the connections ended, then read
	// through the known descriptors only.
	known := &Known{}
	pids := []int{100, 101, 102, 103, 105}
	asked = nil
	before := findDaemons(proc, pids, targets, conns, known, true, false, nil)
	if k, ok := known.get(101); !ok || !slices.Equal(k.fds, []string{"3"}) {
		t.Fatalf("known of 101 before its connection ended: %+v, %v (daemons %v)", k, ok, before)
	}
	checks := func(pids []int) ([]int, endedFunc, func()) { return pids, endedOf, func() {} }
	if got := findDaemons(proc, pids, targets, conns, known, true, false, checks); !maps.EqualFunc(got, want, slices.Equal[[]int]) {
		t.Errorf("survey through the known descriptors: daemons %v, want %v", got, want)
	}
	if k, ok := known.get(101); ok {
		t.Errorf("101 is still known to hold a connection through %v, which ended", k.fds)
	}
	if k, ok := known.get(102); !ok || !slices.Equal(k.fds, []string{"4", "5"}) {
		t.Errorf("known of 102: %+v, %v; want descriptors 4 and 5", k, ok)
	}
}

// daemonsOf returns the daemons of r's mounts by target.
func daemonsOf(r Report) map[string][]int {
	got := map[string][]int{}
	for _, m := range r.Mounts {
		got[m.Target] = m.Daemons
	}
	return got
}

// staleEnv, set, makes the test binary a process that holds an ended FUSE
// connection and a live one: see staleChild.
const staleEnv = "LIVEMOUNT_TEST_FUSE_STALE"

// staleReport is what staleChild prints.
type staleReport struct {
	EndedFD, LiveFD int
	Ended, Live     uint64
	EndedNamed      bool
}

// staleChild, in a mount namespace of its own, mounts a FUSE file system
// at dir/ended and one at dir/live, each with a /dev/fuse descriptor of
// its own that it never serves, unmounts the first, prints the
// descriptors and their connections, and holds both until its standard
// input ends: the first is what a FUSE daemon that outlived its mount
// holds.
func staleChild(dir string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	mountAt := func(target string) (fd int, c uint64, named bool, err error) {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return 0, 0, false, err
		}
		fd, err = unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, 0, false, fmt.Errorf("open /dev/fuse: %w", err)
		}
		opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
		if err := unix.Mount("livemounttest", target, "fuse.livemounttest", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return 0, 0, false, fmt.Errorf("mount fuse at %s: %w", target, err)
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
		if err != nil {
			return 0, 0, false, err
		}
		c, named = fdinfoConnection(string(info))
		return fd, c, named, nil
	}
	var r staleReport
	var err error
	if r.EndedFD, r.Ended, r.EndedNamed, err = mountAt(filepath.Join(dir, "ended")); err != nil {
		return err
	}
	if r.LiveFD, r.Live, _, err = mountAt(filepath.Join(dir, "live")); err != nil {
		return err
	}
	if err := unix.Unmount(filepath.Join(dir, "ended"), 0); err != nil {
		return fmt.Errorf("unmount %s/ended: %w", dir, err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// startStale starts staleChild and returns its PID and report; it ends
// with the test.
func startStale(t testing.TB) (int, staleReport) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), staleEnv+"="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startHeld(t, cmd)
	var r staleReport
	if err := json.NewDecoder(stdout).Decode(&r); err != nil {
		t.Fatalf("stale child: %v", err)
	}
	return cmd.Process.Pid, r
}

// needFUSE skips a test where no FUSE file system can be mounted, or the
// kernel names no connection in a /dev/fuse descriptor's fdinfo.
func needFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a FUSE file system needs root; CI runs this as root")
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	unix.Close(fd)
	if !kernelNamesConnections {
		t.Skip("this kernel does not name a /dev/fuse descriptor's connection in fdinfo")
	}
}

// pidfdOf opens a pidfd of pid, closed when the test ends.
func pidfdOf(t testing.TB, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestConnectionEndedOfRealDescriptors asks of a real process's
// descriptors: the one whose mount was unmounted holds an ended
// connection; the one whose mount is there does not, nor does it when
// asked about another connection than it holds, nor does a descriptor
// the process does not have, nor one that is not the FUSE device.
func TestConnectionEndedOfRealDescriptors(t *testing.T) {
	needFUSE(t)
	pid, r := startStale(t)
	if !r.EndedNamed {
		t.Fatalf("stale child %d: fdinfo of its descriptor %d names no connection", pid, r.EndedFD)
	}
	pidfd := pidfdOf(t, pid)
	fd := strconv.Itoa
	for _, c := range []struct {
		what string
		fd   string
		conn uint64
		want bool
	}{
		{"the unmounted mount's descriptor", fd(r.EndedFD), r.Ended, true},
		{"the mounted one's", fd(r.LiveFD), r.Live, false},
		{"the mounted one's, asked about the other connection", fd(r.LiveFD), r.Ended, false},
		{"the unmounted one's, asked about the other connection", fd(r.EndedFD), r.Live, false},
		{"a descriptor it does not have", "999", r.Live, false},
		{"a descriptor that is not a number", "x", r.Live, false},
		{"its standard input, a pipe", "0", r.Ended, false},
	} {
		if got := connectionEnded(pidfd, c.fd, c.conn, time.Now().Add(time.Minute)); got != c.want {
			t.Errorf("%s (%d's descriptor %s, connection %d): ended %t, want %t", c.what, pid, c.fd, c.conn, got, c.want)
		}
	}
}

// TestRecheckOfRealHolders reads two real processes that both serve a
// target as a survey finds them (the first through the connection of a
// mount that is gone, whose number the kernel gave to the target's, the
// second through a live one): by the number alone both are its daemons;
// with the checks of processes still in the scopes, only the second is,
// and a process that left the scopes before the checks is not checked.
func TestRecheckOfRealHolders(t *testing.T) {
	needFUSE(t)
	stale, sr := startStale(t)
	live, lr := startStale(t)
	target := "/var/lib/kubelet/pods/a/volumes/x~fuse/data"
	targets := map[string]bool{target: true}
	conns := map[uint64][]string{sr.Ended: {target}, lr.Live: {target}}
	if sr.Ended == lr.Live {
		t.Logf("the kernel gave the number %d of the stale child's unmounted mount to the other's", sr.Ended)
	}
	pids := []int{stale, live}
	inScopes := func(listed ...int) endedChecks {
		return func(pids []int) ([]int, endedFunc, func()) {
			return pinned(pids, func() (map[int]bool, error) {
				m := map[int]bool{}
				for _, pid := range listed {
					m[pid] = true
				}
				return m, nil
			})
		}
	}
	for _, c := range []struct {
		what   string
		checks endedChecks
		want   []int
	}{
		{"by the number alone", nil, []int{stale, live}},
		{"both still in the scopes", inScopes(stale, live), []int{live}},
		{"the stale child no longer in them", inScopes(live), []int{stale, live}},
	} {
		got := findDaemons("/proc", pids, targets, conns, nil, false, false, c.checks)
		slices.Sort(c.want)
		if !slices.Equal(got[target], c.want) {
			t.Errorf("%s: daemons %v, want %v (stale child %d holds %d, which ended; %d holds %d, live)", c.what, got[target], c.want, stale, sr.Ended, live, lr.Live)
		}
	}
}

// TestConnectionEndedWaitsBounded: a check that does not end (a process
// in an exec that waits on a FUSE daemon) tells nothing once its
// survey's deadline passed, and neither does any check while it still
// runs, nor one made after the deadline; once it ended, checks tell again.
func TestConnectionEndedWaitsBounded(t *testing.T) {
	needFUSE(t)
	pid, r := startStale(t)
	pidfd := pidfdOf(t, pid)
	if endedCheck.Load() {
		t.Fatal("a check is running before the test")
	}
	release := make(chan struct{})
	var once sync.Once
	entered := make(chan struct{}, 1)
	t.Cleanup(func() {
		once.Do(func() { close(release) })
		for deadline := time.Now().Add(time.Minute); endedCheck.Load() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		checkCopy = copyEnded
	})
	checkCopy = func(pidfd, n int, c uint64) bool {
		entered <- struct{}{}
		<-release
		return copyEnded(pidfd, n, c)
	}
	fd := strconv.Itoa(r.EndedFD)
	timedOut, skipped := EndedChecksTimedOut.Load(), EndedChecksSkipped.Load()
	if connectionEnded(pidfd, fd, r.Ended, time.Now().Add(10*time.Millisecond)) {
		t.Errorf("a check that has not ended: ended, want not known (false)")
	}
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the check did not start in a minute")
	}
	if got := EndedChecksTimedOut.Load(); got != timedOut+1 {
		t.Errorf("checks timed out: %d, want %d", got, timedOut+1)
	}
	if connectionEnded(pidfd, fd, r.Ended, time.Now().Add(time.Hour)) {
		t.Errorf("while the earlier check still runs: ended, want not known (false)")
	}
	if got := EndedChecksSkipped.Load(); got != skipped+1 {
		t.Errorf("checks skipped: %d, want %d", got, skipped+1)
	}
	once.Do(func() { close(release) })
	for deadline := time.Now().Add(time.Minute); endedCheck.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the released check has not ended in a minute")
		}
	}
	checkCopy = copyEnded
	if connectionEnded(pidfd, fd, r.Ended, time.Now().Add(-time.Second)) {
		t.Errorf("after the survey's deadline: ended, want not known (false)")
	}
	if got := EndedChecksSkipped.Load(); got != skipped+2 {
		t.Errorf("checks skipped: %d, want %d (one after the deadline)", got, skipped+2)
	}
	if !connectionEnded(pidfd, fd, r.Ended, time.Now().Add(time.Hour)) {
		t.Errorf("after the earlier check ended: the unmounted mount's descriptor %d has not ended", r.EndedFD)
	}
}

// BenchmarkConnectionEnded checks a live daemon's descriptor, as a
// survey does for each daemon of a mount; /proc/PID/fdinfo's read, what
// a survey did before for that descriptor, is the raw operation.
func BenchmarkConnectionEnded(b *testing.B) {
	needFUSE(b)
	pid, r := startStale(b)
	pidfd := pidfdOf(b, pid)
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if connectionEnded(pidfd, strconv.Itoa(r.LiveFD), r.Live, time.Now().Add(time.Minute)) {
				b.Fatal("a live connection ended")
			}
		}
	})
	b.Run("fdinfo", func(b *testing.B) {
		dir := fmt.Sprintf("/proc/%d", pid)
		for b.Loop() {
			if _, named, ok := fuseConnection(dir, strconv.Itoa(r.LiveFD)); !ok || !named {
				b.Fatal("the live descriptor names no connection")
			}
		}
	})
}
