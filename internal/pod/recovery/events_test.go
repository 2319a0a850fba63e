package recovery

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope/scopetest"
)

// TestScopeEventsOnARealCgroup places a process in a real scope (root; the
// machine's cgroup v2 hierarchy, unified or hybrid) and checks that its
// exit wakes the recoverer at once.
func TestScopeEventsOnARealCgroup(t *testing.T) {
	parent, _ := scopetest.Parent(t)
	m, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
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
	// A wake-up costs a pass, nothing more: the kernel may report
	// changes of the file that are not the end of the process. Drain them,
	// so that only a wake-up after the kill counts.
	for drained := false; !drained; {
		select {
		case <-e.C():
		case <-time.After(200 * time.Millisecond):
			drained = true
		}
	}
	start := time.Now()
	if err := sleep.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sleep.Wait()
	select {
	case <-e.C():
		t.Logf("woken %s after the scope's last process exited", time.Since(start).Round(time.Microsecond))
	case <-time.After(2 * time.Second):
		t.Fatal("not woken within 2 s of the scope's last process exiting")
	}
}
