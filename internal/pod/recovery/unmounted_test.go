package recovery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// namedEvents are [Events] that name the scopes that emptied; the test
// fires them by hand, and each fire returns once Run asked for the names.
// Each Refresh, which Run calls after every pass, reports how many times
// Emptied had been called by then.
type namedEvents struct {
	c         chan struct{}
	refreshed chan int
	asked     chan struct{}

	mu      sync.Mutex
	names   []string
	emptied int
}

func (e *namedEvents) C() <-chan struct{} { return e.c }

func (e *namedEvents) Refresh() {
	e.mu.Lock()
	n := e.emptied
	e.mu.Unlock()
	e.refreshed <- n
}

func (e *namedEvents) Emptied() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emptied++
	out := e.names
	e.names = nil
	e.asked <- struct{}{}
	return out
}

func (e *namedEvents) fire(names ...string) {
	e.mu.Lock()
	e.names = names
	e.mu.Unlock()
	e.c <- struct{}{}
	<-e.asked
}

// TestUnmountsWakeNoPass: a scope that emptied after its mount went (an
// unmount) wakes no pass; one whose mount is still in the mount table (its
// daemon died under it) wakes a pass and the quick passes after it.
func TestUnmountsWakeNoPass(t *testing.T) {
	mounted := "/var/lib/kubelet/pods/a/volumes/kubernetes.io~glusterfs/live"
	gone := "/var/lib/kubelet/pods/b/volumes/kubernetes.io~glusterfs/gone"
	mi := filepath.Join(t.TempDir(), "mountinfo")
	table := "30 25 0:40 / / rw - overlay overlay rw\n" +
		fmt.Sprintf("812 30 0:77 / %s rw - fuse.glusterfs srv:/vol rw,user_id=0\n", mounted)
	if err := os.WriteFile(mi, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := &namedEvents{c: make(chan struct{}), refreshed: make(chan int, 16), asked: make(chan struct{}, 16)}
	r := &Recoverer{Dir: t.TempDir(), Plugins: []string{plugin}, Interval: time.Hour, Events: ev, MountInfo: mi}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	next := func(what string) int {
		t.Helper()
		select {
		case n := <-ev.refreshed:
			return n
		case <-time.After(30 * time.Second): // a hang guard: the poll is an hour
			t.Fatalf("no pass %s", what)
			return 0
		}
	}
	next("at start")
	<-ev.asked                   // Run's first Emptied, which starts the keeping
	ev.fire(scope.Name(gone))    // an unmount: no pass
	ev.fire(scope.Name(mounted)) // a death: a pass
	if n := next("after a death"); n != 3 {
		t.Fatalf("the pass after the death followed %d calls of Emptied, want 3: the unmount's wake-up ran a pass of its own", n)
	}
	if n := next("after the death's pass (a quick pass)"); n != 3 {
		t.Fatalf("a quick pass followed %d calls of Emptied, want 3", n)
	}
}

func TestOnlyUnmounted(t *testing.T) {
	mounted := "/var/lib/kubelet/pods/a/volumes/x/my data"
	mi := filepath.Join(t.TempDir(), "mountinfo")
	table := "30 25 0:40 / / rw - overlay overlay rw\n" +
		"812 30 0:77 / /var/lib/kubelet/pods/a/volumes/x/my\\040data rw - fuse.glusterfs srv:/vol rw\n" +
		"813 30 0:78 / /var/lib/kubelet/pods/c/volumes/x/ext rw - ext4 /dev/sda1 rw\n"
	if err := os.WriteFile(mi, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Recoverer{MountInfo: mi}
	for _, c := range []struct {
		names []string
		want  bool
		say   string
	}{
		{nil, false, "none named: unknown"},
		{[]string{scope.Name("/gone")}, true, "a mount not in the table"},
		{[]string{scope.Name("/gone"), scope.Name(mounted)}, false, "one of them still mounted (its name escaped in the table)"},
		{[]string{scope.Name("/var/lib/kubelet/pods/c/volumes/x/ext")}, true, "mounted, but not FUSE"},
	} {
		if got := r.onlyUnmounted(c.names); got != c.want {
			t.Errorf("%s: onlyUnmounted = %v, want %v", c.say, got, c.want)
		}
	}
	r.MountInfo = filepath.Join(t.TempDir(), "missing")
	if r.onlyUnmounted([]string{scope.Name("/gone")}) {
		t.Error("an unreadable mount table: onlyUnmounted = true, want false (unknown)")
	}
}

// TestRunUntilStops: RunUntil returns once stop is closed, with its context
// still live, and makes no pass after that.
func TestRunUntilStops(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(mi, []byte("30 25 0:40 / / rw - overlay overlay rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := &namedEvents{c: make(chan struct{}), refreshed: make(chan int, 16), asked: make(chan struct{}, 16)}
	r := &Recoverer{Dir: t.TempDir(), Plugins: []string{plugin}, Interval: time.Hour, Events: ev, MountInfo: mi}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); r.RunUntil(context.Background(), stop) }()
	select {
	case <-ev.refreshed:
	case <-time.After(30 * time.Second): // a hang guard: the poll is an hour
		t.Fatal("no pass at start")
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RunUntil did not return once stop was closed")
	}
	if n := len(ev.refreshed); n != 0 {
		t.Errorf("%d passes after stop was closed; want none", n)
	}
}
