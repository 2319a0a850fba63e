package recovery

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope/scopetest"
)

// TestScopeEventsOnARealCgroup places a process in a real scope (root; the
// machine's cgroup v2 hierarchy, unified or hybrid) and checks that its
// exit wakes the recoverer at once.
func TestScopeEventsOnARealCgroup(t *testing.T) {
	m, sleep := sleepInScope(t)
	_, unifiedErr := os.Stat(filepath.Join(scope.DefaultCgroupRoot, "unified"))
	_, v2Err := os.Stat(filepath.Join(scope.DefaultCgroupRoot, "cgroup.controllers"))
	hasV2 := unifiedErr == nil || v2Err == nil
	e, err := NewScopeEvents(m, []string{plugin}, nil)
	if errors.Is(err, ErrNoScopeEvents) && !hasV2 {
		t.Skip("no cgroup v2 hierarchy here: the recoverer polls")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Watched() != 1 {
		t.Fatalf("%d cgroup.events watched, want the one scope's", e.Watched())
	}
	drainWakes(e)
	start := time.Now()
	if err := sleep.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sleep.Wait()
	select {
	case <-e.C():
		t.Logf("woken %s after the scope's last process exited", time.Since(start).Round(time.Microsecond))
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("not woken after the scope's last process exited")
	}
}

// TestScopeEventsOnlyWhenEmptied: a live scope's cgroup.events does not read
// as emptied, whatever rewrites of it the kernel reported while the process
// ran woke nothing, and its exit wakes (root; a cgroup v2 hierarchy).
func TestScopeEventsOnlyWhenEmptied(t *testing.T) {
	m, sleep := sleepInScope(t)
	e, err := NewScopeEvents(m, []string{plugin}, nil)
	if errors.Is(err, ErrNoScopeEvents) {
		t.Skip("no cgroup v2 hierarchy here: the recoverer and the keeper poll")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	src, _ := scope.EventsOf(m)
	files, err := src.EventFiles(plugin)
	if err != nil || len(files) != 1 {
		t.Fatalf("the scope's cgroup.events: %v %v, want one file", files, err)
	}
	if emptied(files[0]) {
		t.Fatalf("%s reads as emptied while the scope's process runs", files[0])
	}
	if names := e.Emptied(); len(names) != 0 {
		t.Fatalf("the first Emptied named %v, want none (it starts keeping them)", names)
	}
	// Whatever the kernel reported while the scope was populated must not
	// have woken it.
	select {
	case <-e.C():
		t.Fatal("woken while the scope's process runs")
	default:
	}
	killWoken(t, e, sleep, "not woken after the scope's last process exited")
	if !emptied(files[0]) {
		t.Fatalf("%s does not read as emptied after the scope's process exited", files[0])
	}
	if names, want := e.Emptied(), filepath.Base(filepath.Dir(files[0])); len(names) != 1 || names[0] != want {
		t.Errorf("Emptied named %v, want the scope %s", names, want)
	}
	if names := e.Emptied(); len(names) != 0 {
		t.Errorf("Emptied named %v again, want them forgotten", names)
	}
}

func TestEmptied(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]bool{
		"populated 0\nfrozen 0\n": true,
		"populated 1\nfrozen 0\n": false,
		"populated 10\n":          false,
		"":                        false,
	} {
		p := filepath.Join(dir, "cgroup.events")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := emptied(p); got != want {
			t.Errorf("emptied(%q) = %v, want %v", content, got, want)
		}
	}
	if emptied(filepath.Join(dir, "missing")) {
		t.Error("a missing file reads as emptied")
	}
}

// sleepInScope places a sleep in a real scope of plugin under a test
// parent (root); cleanups kill it and remove the scope.
func sleepInScope(t *testing.T) (scope.Manager, *exec.Cmd) {
	t.Helper()
	parent, _ := scopetest.Parent(t)
	m, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	target := filepath.Join(t.TempDir(), "mnt")
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Place(plugin, target, sleep.Process.Pid); err != nil {
		sleep.Process.Kill()
		sleep.Wait()
		t.Fatal(err)
	}
	// Cleanups run last first: the sleep is gone before its scope goes.
	t.Cleanup(func() { scopetest.RemoveOnceEmpty(t, parent, plugin, target) })
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	return m, sleep
}

// removingSource lists the cgroup.events of systemd-style scope units
// (mount-<key>.scope) under dir; their removal is their exit.
type removingSource struct{ dir string }

func (r removingSource) EventFiles(string) ([]string, error) {
	return filepath.Glob(filepath.Join(r.dir, "*.scope", "cgroup.events"))
}

func (r removingSource) EventDir(string) (string, error) { return r.dir, nil }

func (removingSource) RemovalIsExit() bool { return true }

// TestScopeEventsRemovalIsExit: a systemd scope unit's cgroup goes as soon
// as its last process exited, maybe before its cgroup.events rewrite is
// read: the removal wakes the recoverer, and Emptied names the scope
// without the unit's suffix (scope.Name, as onlyUnmounted compares).
func TestScopeEventsRemovalIsExit(t *testing.T) {
	dir := t.TempDir()
	const key = "mount-0123456789abcdef"
	unit := filepath.Join(dir, key+".scope")
	if err := os.Mkdir(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unit, "cgroup.events"), []byte("populated 1\nfrozen 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := newScopeEvents(removingSource{dir}, []string{plugin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Watched() != 1 {
		t.Fatalf("%d files watched, want 1", e.Watched())
	}
	e.Emptied() // starts keeping the names
	if err := os.RemoveAll(unit); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.C():
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("the scope unit's removal woke nothing")
	}
	if got := e.Emptied(); len(got) != 1 || got[0] != key {
		t.Errorf("Emptied() = %q, want [%s]", got, key)
	}
}

// TestScopeEventsUnitMadeAgain: a systemd scope unit whose daemon died is
// removed by systemd and made again, at the same path, by the mount that
// brings the volume back. The watch must follow the new cgroup: kernfs
// does not report a cgroup's removal to inotify, so a path seen before is
// no proof that the file watched is the one there now (root; a real
// cgroup2 hierarchy, the machine's, standing in for systemd's).
func TestScopeEventsUnitMadeAgain(t *testing.T) {
	dir := cgroupSlice(t)
	unit := filepath.Join(dir, "mount-0123456789abcdef.scope")
	if err := os.Mkdir(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	e := rarelyFull(t, removingSource{dir})
	// systemd removes the empty unit; the remount makes it again.
	if err := os.Remove(unit); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	// After the recovery's passes: the unit's directory reported made.
	file := filepath.Join(unit, "cgroup.events")
	refreshUntil(t, e, "the unit made again watched", func() bool {
		id, err := idOf(file)
		e.mu.Lock()
		defer e.mu.Unlock()
		return err == nil && e.watched[file] == id
	})
	drainWakes(e)
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleep.Process.Kill(); sleep.Wait() }()
	if err := os.WriteFile(filepath.Join(unit, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	killWoken(t, e, sleep, "the daemon's exit in the unit made again woke nothing: the watch stayed on the removed cgroup")
}

// killWoken kills a scope's last process and fails with why unless e
// wakes within a minute (a hang guard).
func killWoken(t *testing.T, e *ScopeEvents, sleep *exec.Cmd, why string) {
	t.Helper()
	if err := sleep.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sleep.Wait()
	select {
	case <-e.C():
	case <-time.After(time.Minute):
		t.Fatal(why)
	}
}

// refreshUntil calls e.Refresh, as passes do, until cond holds; what is
// awaited is a directory's event, delivered in the background. Made by
// rarelyFull, e lists everything again only once an hour: cond holds by
// the event or not at all, and the bound is a hang guard.
func refreshUntil(t *testing.T, e *ScopeEvents, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		e.Refresh()
		if cond() {
			return
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("%s: not after a minute of Refreshes", what)
		}
	}
}

// rarelyFull starts watching the scopes of src, closed at the test's end,
// with a full Refresh (every scope listed and looked at, whatever the
// directories' watches said) only once an hour after the first: a test of
// the watches fails when one misses, not passes by the full Refresh.
func rarelyFull(t *testing.T, src scope.EventSource) *ScopeEvents {
	t.Helper()
	e, err := newScopeEvents(src, []string{plugin}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	e.mu.Lock()
	e.fullEvery = time.Hour
	e.mu.Unlock()
	return e
}

// drainWakes takes the wakes e gave so far. A wake costs a pass, nothing
// more, and the kernel may report changes of a file that are not the end
// of a process: a test drains them, so that only a wake after what it
// does counts.
func drainWakes(e *ScopeEvents) {
	for {
		select {
		case <-e.C():
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// cgroupSlice makes a directory in the machine's cgroup2 hierarchy, named
// for the test, standing in for a plugin's slice; it is removed, with the
// scopes left in it, at the test's end. It skips where no cgroup can be
// made.
func cgroupSlice(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(machineV2(t), fmt.Sprintf("mc-events-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot make a cgroup here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		units, _ := os.ReadDir(dir)
		for _, u := range units {
			if u.IsDir() {
				_ = os.Remove(filepath.Join(dir, u.Name()))
			}
		}
		_ = os.Remove(dir)
	})
	return dir
}

// countingSource is a removingSource that counts its listings.
type countingSource struct {
	removingSource
	mu    sync.Mutex
	lists int
}

func (c *countingSource) EventFiles(plugin string) ([]string, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.removingSource.EventFiles(plugin)
}

func (c *countingSource) listed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists
}

// TestScopeEventsListOnlyWhenScopesChange: Refresh, after every pass of
// the recovery, lists the scopes' directory only when a scope was made or
// removed there (its entries are watched), and until the directory
// exists; a scope made or removed is watched or forgotten by the next
// Refreshes.
func TestScopeEventsListOnlyWhenScopesChange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "slice")
	src := &countingSource{removingSource: removingSource{dir}}
	e := rarelyFull(t, src)
	makeUnit := func(key string) {
		t.Helper()
		unit := filepath.Join(dir, key+".scope")
		if err := os.MkdirAll(unit, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(unit, "cgroup.events"), []byte("populated 1\nfrozen 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// No directory yet: listed at every Refresh.
	before := src.listed()
	e.Refresh()
	e.Refresh()
	if got := src.listed() - before; got != 2 {
		t.Errorf("%d listings in 2 Refreshes without the directory; want 2", got)
	}
	makeUnit("mount-0123456789abcdef")
	refreshUntil(t, e, "the first scope watched", func() bool { return e.Watched() == 1 })
	e.Refresh() // the directory is watched from the last one on
	before = src.listed()
	for range 5 {
		e.Refresh()
	}
	if got := src.listed() - before; got != 0 {
		t.Errorf("%d listings in 5 Refreshes with nothing changed; want 0", got)
	}
	makeUnit("mount-fedcba9876543210")
	refreshUntil(t, e, "a scope made", func() bool { return e.Watched() == 2 })
	before = src.listed()
	if err := os.RemoveAll(filepath.Join(dir, "mount-0123456789abcdef.scope")); err != nil {
		t.Fatal(err)
	}
	// Its file's own removal is reported too: wait for the directory's.
	refreshUntil(t, e, "a scope removed", func() bool { return e.Watched() == 1 && src.listed() > before })
	before = src.listed()
	e.Refresh()
	if got := src.listed() - before; got != 0 {
		t.Errorf("%d listings in a Refresh after the removal was handled; want 0", got)
	}
}

// TestScopeEventsRealCgroupDirectory, on a real cgroup2 hierarchy (root;
// the machine's, standing in for systemd's): kernfs reports a scope
// directory's removal only as its parent's entry going, never to the
// watch of the file inside, so that is the exit of a systemd unit; and a
// watched directory removed and made again reports nothing at all, so
// the scopes made in the new one are found by its identity.
func TestScopeEventsRealCgroupDirectory(t *testing.T) {
	dir := cgroupSlice(t)
	const keyA, keyB, keyC = "mount-0123456789abcdef", "mount-fedcba9876543210", "mount-00112233445566ff"
	mkdir := func(p string) {
		t.Helper()
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(filepath.Join(dir, keyA+".scope"))
	e := rarelyFull(t, removingSource{dir})
	if e.Watched() != 1 {
		t.Fatalf("%d files watched, want 1", e.Watched())
	}
	e.Emptied() // starts keeping the names
	drainWakes(e)
	if err := os.Remove(filepath.Join(dir, keyA+".scope")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.C():
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("the unit's cgroup removal woke nothing")
	}
	if got := e.Emptied(); len(got) != 1 || got[0] != keyA {
		t.Errorf("Emptied() = %q, want [%s]", got, keyA)
	}
	refreshUntil(t, e, "the removed unit forgotten", func() bool { return e.Watched() == 0 })

	// The slice goes with its last unit, and comes back with the next.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mkdir(dir)
	mkdir(filepath.Join(dir, keyB+".scope"))
	refreshUntil(t, e, "a unit of the slice made again", func() bool { return e.Watched() == 1 })
	mkdir(filepath.Join(dir, keyC+".scope"))
	refreshUntil(t, e, "a second unit of the slice made again", func() bool { return e.Watched() == 2 })

	// All at once, between two Refreshes: the units go, the slice goes
	// and comes back, a unit of the same name as before is made in it
	// (no event tells of any of it but the first units' going).
	for _, k := range []string{keyB, keyC} {
		if err := os.Remove(filepath.Join(dir, k+".scope")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	mkdir(dir)
	mkdir(filepath.Join(dir, keyB+".scope"))
	fileB := filepath.Join(dir, keyB+".scope", "cgroup.events")
	refreshUntil(t, e, "the unit of the same name in the slice made again watched", func() bool {
		id, err := idOf(fileB)
		e.mu.Lock()
		defer e.mu.Unlock()
		return err == nil && e.watched[fileB] == id && len(e.watched) == 1
	})
}

// machineV2 returns the machine's cgroup2 hierarchy, unified or hybrid,
// for a test that makes cgroups in it; it skips unless run as root on a
// machine that has one.
func machineV2(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	v2 := filepath.Join(scope.DefaultCgroupRoot, "unified")
	if _, err := os.Stat(filepath.Join(scope.DefaultCgroupRoot, "cgroup.controllers")); err == nil {
		v2 = scope.DefaultCgroupRoot
	}
	if _, err := os.Stat(filepath.Join(v2, "cgroup.controllers")); err != nil {
		t.Skip("no cgroup2 hierarchy here")
	}
	return v2
}
