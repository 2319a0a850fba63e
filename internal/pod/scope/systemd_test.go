package scope

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope/systemdtest"
)

// newSystemdFake starts a bus with the fake systemd and returns a Manager
// New chose on it (auto: the bus socket is the only one configured).
func newSystemdFake(t *testing.T, cfg Config) (*systemdtest.Systemd, Manager) {
	t.Helper()
	sock := systemdtest.StartBus(t)
	fake := systemdtest.Serve(t, sock)
	cfg.SystemdSockets = []string{sock}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if m.Backend() != BackendSystemd {
		t.Fatalf("New chose %s with systemd answering on %s", m.Backend(), sock)
	}
	return fake, m
}

func TestSystemdPlace(t *testing.T) {
	fake, m := newSystemdFake(t, Config{MemoryLimit: 512 << 20, PidsLimit: 512})
	sleep := startSleep(t)
	pid := sleep.Process.Pid

	s, err := m.Place(glusterfs, targetA, pid)
	if err != nil {
		t.Fatal(err)
	}
	unit := Name(targetA) + ".scope"
	slice := "mountcontainers-kubernetes.io-glusterfs.slice"
	wantScope := Scope{Plugin: glusterfs, Name: Name(targetA), Unit: unit,
		Cgroup: "/mountcontainers.slice/mountcontainers-kubernetes.io.slice/" + slice + "/" + unit}
	if s.Plugin != wantScope.Plugin || s.Name != wantScope.Name || s.Unit != wantScope.Unit || s.Cgroup != wantScope.Cgroup || s.Paths != nil {
		t.Errorf("Place = %+v\nwant %+v", s, wantScope)
	}
	u, ok := fake.Unit(unit)
	if !ok {
		t.Fatalf("no unit %s started; calls %q", unit, fake.Calls())
	}
	wantProps := map[string]any{
		"PIDs":        []uint32{uint32(pid)},
		"Slice":       slice,
		"Description": "mountcontainers: kubernetes.io/glusterfs mount " + targetA,
		"CollectMode": "inactive-or-failed",
	}
	if u.Mode != "fail" || len(u.Properties) != len(wantProps) {
		t.Errorf("StartTransientUnit mode %q, properties %v; want fail, %v", u.Mode, u.Properties, wantProps)
	}
	for k, v := range wantProps {
		if got := u.Properties[k]; !equal(got, v) {
			t.Errorf("property %s = %#v, want %#v", k, got, v)
		}
	}
	if got := u.SliceProperties["MemoryMax"]; got != uint64(512<<20) {
		t.Errorf("MemoryMax of %s = %#v, want %d", slice, got, 512<<20)
	}
	if got := u.SliceProperties["TasksMax"]; got != uint64(512) {
		t.Errorf("TasksMax of %s = %#v, want 512", slice, got)
	}

	// PID 0: systemd takes the caller's PID from the bus.
	if _, err := m.Place(glusterfs, targetB, 0); err != nil {
		t.Fatal(err)
	}
	if u, _ := fake.Unit(Name(targetB) + ".scope"); !slices.Equal(u.PIDs, []uint32{uint32(os.Getpid())}) {
		t.Errorf("PID 0 resolved to %v, want this process %d", u.PIDs, os.Getpid())
	}

	// The same target again while its unit holds a live process: systemd
	// moves no process into a unit it does not delegate (the fake refuses
	// as it does), so the Place fails, naming the process, and the unit
	// is left as it was.
	sleep2 := startSleep(t)
	_, err = m.Place(glusterfs, targetA, sleep2.Process.Pid)
	if !errors.Is(err, ErrPopulated) || !strings.Contains(err.Error(), strconv.Itoa(pid)) || !strings.Contains(err.Error(), unit) {
		t.Errorf("Place into a unit holding PID %d: %v, want ErrPopulated naming the PID and %s", pid, err, unit)
	}
	if u, _ := fake.Unit(unit); u.Stopped || !slices.Equal(u.PIDs, []uint32{uint32(pid)}) {
		t.Errorf("unit after the refused Place: stopped %v, PIDs %v; want running with %d", u.Stopped, u.PIDs, pid)
	}

	// Its process gone, the unit not collected yet (a recovery's remount
	// right after it killed the dead daemon): stopped, started again.
	sleep.Process.Kill()
	sleep.Wait()
	before := len(fake.Calls())
	if _, err := m.Place(glusterfs, targetA, sleep2.Process.Pid); err != nil {
		t.Fatalf("Place into the empty unit left behind: %v", err)
	}
	if u, _ := fake.Unit(unit); u.Stopped || !slices.Equal(u.PIDs, []uint32{uint32(sleep2.Process.Pid)}) {
		t.Errorf("unit after the Place: stopped %v, PIDs %v; want running with %d", u.Stopped, u.PIDs, sleep2.Process.Pid)
	}
	calls := fake.Calls()[before:]
	stop := slices.Index(calls, "StopUnit "+unit)
	if len(calls) == 0 || calls[0] != "StartTransientUnit "+unit || stop < 0 || !slices.Contains(calls[stop:], "StartTransientUnit "+unit) {
		t.Errorf("calls %q: want StartTransientUnit, StopUnit of the empty unit, StartTransientUnit again", calls)
	}

	// An empty unit of that name in another plugin's slice is not ours to
	// stop.
	sleep2.Process.Kill()
	sleep2.Wait()
	sleep3 := startSleep(t)
	before = len(fake.Calls())
	_, err = m.Place("example.com/other", targetA, sleep3.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), "not ours") {
		t.Errorf("Place of another plugin into %s: %v, want an error saying it is not ours", unit, err)
	}
	if calls := fake.Calls()[before:]; slices.Contains(calls, "StopUnit "+unit) {
		t.Errorf("calls %q: the other slice's unit was stopped", calls)
	}
}

func equal(a, b any) bool {
	if x, ok := a.([]uint32); ok {
		y, ok := b.([]uint32)
		return ok && slices.Equal(x, y)
	}
	return a == b
}

func TestSystemdJobFailure(t *testing.T) {
	fake, m := newSystemdFake(t, Config{})
	fake.SetStartResult("failed")
	_, err := m.Place(glusterfs, targetA, os.Getpid())
	for _, want := range []string{"job failed", Name(targetA) + ".scope", glusterfs, "mountcontainers-kubernetes.io-glusterfs.slice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Place with a failing job = %v; want an error containing %q", err, want)
		}
	}
}

func TestSystemdListRemove(t *testing.T) {
	fake, m := newSystemdFake(t, Config{})
	a, b := startSleep(t), startSleep(t)
	if _, err := m.Place(glusterfs, targetA, a.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Place(glusterfs, targetB, b.Process.Pid); err != nil {
		t.Fatal(err)
	}
	list, err := m.List(glusterfs)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !sorted(list) {
		t.Fatalf("List = %+v; want 2 scopes sorted by name", list)
	}
	for _, s := range list {
		want := a.Process.Pid
		if s.Name == Name(targetB) {
			want = b.Process.Pid
		}
		if !slices.Equal(s.PIDs, []int{want}) || s.Unit != s.Name+".scope" || !strings.HasSuffix(s.Cgroup, "/"+s.Unit) {
			t.Errorf("listed %+v; want PID %d", s, want)
		}
	}
	if list, err := m.List("example.com/none"); err != nil || len(list) != 0 {
		t.Errorf("List of a slice systemd does not know = %+v, %v", list, err)
	}

	if err := m.Remove(glusterfs, Name(targetA)); !errors.Is(err, ErrPopulated) {
		t.Errorf("Remove of a live scope = %v, want ErrPopulated", err)
	}
	a.Process.Kill()
	a.Wait()
	if err := m.Remove(glusterfs, Name(targetA)); err != nil {
		t.Fatal(err)
	}
	if u, _ := fake.Unit(Name(targetA) + ".scope"); !u.Stopped {
		t.Error("Remove did not stop the empty unit")
	}
	if err := m.Remove(glusterfs, Name(targetA)); err != nil {
		t.Errorf("Remove of a unit systemd no longer has = %v, want nil", err)
	}
	if list, err := m.List(glusterfs); err != nil || len(list) != 1 || list[0].Name != Name(targetB) {
		t.Errorf("List after Remove = %+v, %v", list, err)
	}
	// An empty unit of that name in another plugin's slice is not ours.
	b.Process.Kill()
	b.Wait()
	if err := m.Remove("kubernetes.io/cephfs", Name(targetB)); err == nil || !strings.Contains(err.Error(), "not ours") {
		t.Errorf("Remove through another plugin = %v; want an error", err)
	}
	if u, _ := fake.Unit(Name(targetB) + ".scope"); u.Stopped {
		t.Error("Remove through another plugin stopped the unit")
	}
	if err := m.Remove(glusterfs, Name(targetB)); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"..", "mount-x", "x.scope"} {
		if err := m.Remove(glusterfs, name); err == nil {
			t.Errorf("Remove(%q) succeeded", name)
		}
	}
}

func TestSystemdSelection(t *testing.T) {
	root := fakeHybrid(t)
	dir := t.TempDir()
	notSocket := filepath.Join(dir, "private")
	if err := os.WriteFile(notSocket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A bus on which nobody owns org.freedesktop.systemd1.
	silent := systemdtest.StartBus(t)

	sockets := []string{filepath.Join(dir, "missing"), notSocket, silent}
	m, err := New(Config{CgroupRoot: root, CgroupNS: CgroupNSOff, SystemdSockets: sockets, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if m.Backend() != BackendCgroupfs {
		t.Errorf("auto chose %s without a systemd; want cgroupfs", m.Backend())
	}
	_, err = New(Config{Backend: BackendSystemd, CgroupRoot: root, SystemdSockets: sockets, Timeout: 5 * time.Second})
	if err == nil || !errors.Is(err, errNoSystemd) {
		t.Fatalf("backend systemd without a systemd = %v", err)
	}
	for _, want := range []string{"missing: no such file", "private is not a socket", "org.freedesktop.DBus.Error.ServiceUnknown"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestSystemdSlowIsNotAbsent: a socket that takes the connection and does
// not answer within the timeout, as a systemd busy with a node's pods, is
// an error, never the choice of cgroupfs beside it.
func TestSystemdSlowIsNotAbsent(t *testing.T) {
	root := fakeHybrid(t)
	sock, _ := silentSystemd(t, "private")
	for _, b := range []Backend{BackendAuto, BackendSystemd} {
		m, err := New(Config{Backend: b, CgroupRoot: root, CgroupNS: CgroupNSOff, SystemdSockets: []string{sock}, Timeout: 200 * time.Millisecond})
		if err == nil {
			t.Errorf("backend %q: chose %s with a systemd that does not answer; want an error", b, m.Backend())
			m.Close()
			continue
		}
		if errors.Is(err, errNoSystemd) || !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), sock) {
			t.Errorf("backend %q: error %q; want it to say that systemd at %s did not answer", b, err, sock)
		}
	}
}

// silentSystemd listens at a new socket called name, takes every
// connection and never answers, as a systemd too busy to; stop closes the
// listener and removes the socket.
func silentSystemd(t *testing.T, name string) (sock string, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd") // short: a socket's path has a bound
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, name)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn // taken, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { l.Close(); <-done }) }
	t.Cleanup(stop)
	return sock, stop
}

// TestNewRetryingUntilSystemdAnswers: a systemd that took the connection
// but did not answer is asked again until it answers; the manager then is
// the systemd backend's, and every try that failed was reported.
func TestNewRetryingUntilSystemdAnswers(t *testing.T) {
	bus := systemdtest.StartBus(t)
	fake := systemdtest.Serve(t, bus)
	sock, stopSilent := silentSystemd(t, "systemd")
	defer func(f time.Duration) { retryFirst = f }(retryFirst)
	retryFirst = 10 * time.Millisecond
	var tries []error
	var waits []time.Duration
	m, err := NewRetrying(context.Background(), Config{Backend: BackendAuto, SystemdSockets: []string{sock}, Timeout: 200 * time.Millisecond},
		func(err error, wait time.Duration) {
			tries, waits = append(tries, err), append(waits, wait)
			if len(tries) == 2 {
				// systemd answers from now on: the bus, at the same path.
				stopSilent()
				if err := os.Link(bus, sock); err != nil {
					t.Error(err)
				}
			}
		})
	if err != nil {
		t.Fatalf("NewRetrying: %v; want the systemd backend once systemd answers", err)
	}
	defer m.Close()
	if m.Backend() != BackendSystemd {
		t.Errorf("backend %s; want systemd", m.Backend())
	}
	if len(tries) != 2 {
		t.Errorf("%d tries reported (%v); want the 2 that got no answer", len(tries), tries)
	}
	for _, err := range tries {
		if !errors.Is(err, ErrNoAnswer) {
			t.Errorf("reported %q; want ErrNoAnswer", err)
		}
	}
	if len(waits) == 2 && waits[1] != 2*waits[0] {
		t.Errorf("waits %v; want each twice the one before", waits)
	}
	if _, err := m.Place(glusterfs, targetA, startSleep(t).Process.Pid); err != nil {
		t.Errorf("Place through the manager: %v", err)
	}
	if _, ok := fake.Unit(Name(targetA) + ".scope"); !ok {
		t.Errorf("the fake systemd was not asked for the scope; calls %q", fake.Calls())
	}
}

// TestNewRetryingGivesUp: an error other than no answer is returned at
// once, untried again; with no answer ever, the end of ctx ends the tries
// with an error that says both.
func TestNewRetryingGivesUp(t *testing.T) {
	defer func(f time.Duration) { retryFirst = f }(retryFirst)
	retryFirst = 10 * time.Millisecond
	tried := 0
	count := func(error, time.Duration) { tried++ }
	absent := filepath.Join(t.TempDir(), "none")
	if m, err := NewRetrying(context.Background(), Config{Backend: BackendSystemd, SystemdSockets: []string{absent}}, count); err == nil || errors.Is(err, ErrNoAnswer) || tried != 0 {
		t.Errorf("no systemd at all: %v, %v, asked again %d times; want its error at once", m, err, tried)
	}

	sock, _ := silentSystemd(t, "private")
	ctx, cancel := context.WithCancel(context.Background())
	tried = 0
	m, err := NewRetrying(ctx, Config{Backend: BackendSystemd, SystemdSockets: []string{sock}, Timeout: 50 * time.Millisecond},
		func(error, time.Duration) {
			if tried++; tried == 3 {
				cancel()
			}
		})
	if err == nil {
		m.Close()
		t.Fatal("NewRetrying returned a manager from a systemd that never answers")
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNoAnswer) || tried != 3 {
		t.Errorf("error %q after %d tries; want context.Canceled and ErrNoAnswer, after 3", err, tried)
	}

	// The end of ctx during a try: NewRetrying returns without waiting for
	// the try's timeout (an hour here).
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "private"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel = context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		m, err := NewRetrying(ctx, Config{Backend: BackendSystemd, SystemdSockets: []string{l.Addr().String()}, Timeout: time.Hour}, nil)
		if m != nil {
			m.Close()
		}
		returned <- err
	}()
	conn, err := l.Accept() // the try is under way
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled during a try: %v; want context.Canceled", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("NewRetrying waited for the try under way after its context ended")
	}
}

// BenchmarkSystemdPlace measures the systemd backend against the fake
// systemd on a private dbus-daemon: "connect+place" is what one `mountpod
// scope` does (two connections with Hello, the Version probe,
// StartTransientUnit and its job signal, close), "place" one more Place on
// an open Manager. Real systemd adds its own work; this is the client's and
// the bus's share.
func BenchmarkSystemdPlace(b *testing.B) {
	sock := systemdtest.StartBus(b)
	systemdtest.Serve(b, sock)
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	cfg := Config{Backend: BackendSystemd, SystemdSockets: []string{sock}}
	n := 0
	place := func(b *testing.B, m Manager) {
		n++ // a new target each time: a new transient unit
		if _, err := m.Place(glusterfs, "/mnt/"+strconv.Itoa(n), cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("connect+place", func(b *testing.B) {
		for range b.N {
			m, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			place(b, m)
			m.Close()
		}
	})
	b.Run("place", func(b *testing.B) {
		m, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		b.ResetTimer()
		for range b.N {
			place(b, m)
		}
	})
}

func TestSystemdKill(t *testing.T) {
	fake, m := newSystemdFake(t, Config{})
	a, b, c := startSleep(t), startSleep(t), startSleep(t)
	for _, p := range []struct {
		target string
		cmd    *exec.Cmd
	}{{targetA, a}, {targetB, c}} {
		if _, err := m.Place(glusterfs, p.target, p.cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	// b as a child of a's: in its unit.
	if err := fake.AddProcess(Name(targetA)+".scope", uint32(b.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	// Through another plugin, the unit is not ours: nothing is signalled.
	if killed, err := m.Kill("kubernetes.io/cephfs", Name(targetB), time.Second); err == nil || !strings.Contains(err.Error(), "not ours") || killed != nil {
		t.Errorf("Kill through another plugin = %v, %v; want an error and nothing killed", killed, err)
	}
	killed, err := m.Kill(glusterfs, Name(targetA), 5*time.Second)
	want := []int{a.Process.Pid, b.Process.Pid}
	slices.Sort(want)
	if err != nil || !slices.Equal(killed, want) {
		t.Fatalf("Kill = %v, %v; want %v", killed, err, want)
	}
	for _, cmd := range []*exec.Cmd{a, b} {
		if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("process %d of the killed scope: %v; want killed", cmd.Process.Pid, err)
		}
	}
	if err := c.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process of the other scope: %v; want it untouched", err)
	}
	if calls := fake.Calls(); !slices.Contains(calls, "KillUnit "+Name(targetA)+".scope") || slices.Contains(calls, "KillUnit "+Name(targetB)+".scope") {
		t.Errorf("calls %q: want KillUnit of %s only", calls, Name(targetA))
	}
	// Empty now, or never made: nothing to do.
	for _, name := range []string{Name(targetA), Name("/no/such/target")} {
		if killed, err := m.Kill(glusterfs, name, time.Second); err != nil || killed != nil {
			t.Errorf("Kill of %s = %v, %v; want nothing", name, killed, err)
		}
	}
	for _, name := range []string{"..", "mount-x", "x.scope"} {
		if _, err := m.Kill(glusterfs, name, time.Second); err == nil {
			t.Errorf("Kill(%q) succeeded", name)
		}
	}
}

// Two places of a target whose unit is left empty take turns on the
// slice's directory: while another holds it, a Place stops nothing.
func TestSystemdPlaceTakesTurns(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	slice := "mountcontainers-kubernetes.io-glusterfs.slice"
	sliceDir := filepath.Join(root, slicePath(slice))
	if err := os.MkdirAll(sliceDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake, m := newSystemdFake(t, Config{CgroupRoot: root, Timeout: time.Minute})
	unit := Name(targetA) + ".scope"
	old := startSleep(t)
	if _, err := m.Place(glusterfs, targetA, old.Process.Pid); err != nil {
		t.Fatal(err)
	}
	old.Process.Kill()
	old.Wait()

	// Another place holds the slice.
	held, err := os.Open(sliceDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	before := len(fake.Calls())
	sleep := startSleep(t)
	done := make(chan error, 1)
	go func() {
		_, err := m.Place(glusterfs, targetA, sleep.Process.Pid)
		done <- err
	}()
	for start := time.Now(); !slices.Contains(fake.Calls()[before:], "StartTransientUnit "+unit); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > time.Minute { // a hang guard
			t.Fatal("Place never tried to start the unit")
		}
	}
	time.Sleep(100 * time.Millisecond) // what a Place without the lock would have done by now
	select {
	case err := <-done:
		t.Fatalf("Place returned (%v) while the slice was held", err)
	default:
	}
	if calls := fake.Calls()[before:]; slices.Contains(calls, "StopUnit "+unit) {
		t.Fatalf("calls %q: the unit was stopped while the slice was held", calls)
	}
	held.Close() // the other place is done
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Place after the other: %v", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("Place did not return once the slice was free")
	}
	if u, _ := fake.Unit(unit); u.Stopped || !slices.Equal(u.PIDs, []uint32{uint32(sleep.Process.Pid)}) {
		t.Errorf("unit after the Place: stopped %v, PIDs %v; want running with %d", u.Stopped, u.PIDs, sleep.Process.Pid)
	}
}
