package startgate

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threads is this process's number of OS threads.
func threads(t *testing.T) int {
	t.Helper()
	n, err := countThreads()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func countThreads() (int, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Threads: in /proc/self/status")
}

// TestWaitHoldsNoThread: 64 commands waited for at once cost no OS thread
// each (exec.Cmd.Wait in their place: 64 more threads); each still gets
// its own exit status.
func TestWaitHoldsNoThread(t *testing.T) {
	const n = 64
	before := threads(t)
	// Each command waits on standard input until the test closes it.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var waiting atomic.Int32
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		cmd, err := Start(func() *exec.Cmd {
			c := exec.Command("/bin/sh", "-c", "read x; exit $0", strconv.Itoa(i%5))
			c.Stdin = r
			return c
		}, nil, nil)
		if err != nil {
			w.Close()
			wg.Wait()
			t.Fatal(err)
		}
		wg.Go(func() {
			waiting.Add(1)
			errs[i] = Wait(cmd)
		})
	}
	// Blocked system calls get threads as the runtime takes their Ps back
	// (in microseconds to milliseconds): a hang guard of 2 s, left early
	// once the threads show the waits hold them.
	most := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && most < before+n/2; time.Sleep(10 * time.Millisecond) {
		if waiting.Load() == n {
			most = max(most, threads(t))
		}
	}
	w.Close() // every read ends, and every command with it
	wg.Wait()
	t.Logf("threads: %d before, at most %d while %d commands were waited for", before, most, n)
	if most >= before+n/2 {
		t.Errorf("threads: %d before, %d while %d commands were waited for: each wait holds a thread", before, most, n)
	}
	for i, err := range errs {
		var ee *exec.ExitError
		switch want := i % 5; {
		case want == 0 && err != nil:
			t.Errorf("command %d: Wait = %v; want nil", i, err)
		case want != 0 && (!errors.As(err, &ee) || ee.ExitCode() != want):
			t.Errorf("command %d: Wait = %v; want exit status %d", i, err, want)
		}
	}
}

// TestTracedStartsAtOnce: 24 gated starts at once, each gate held until
// no more come in, are traced at most tracedAtOnce at a time, and all
// traced (none waits past tracedSlotWait here); the process keeps no more
// threads after them than that bound adds (without it: one per start).
func TestTracedStartsAtOnce(t *testing.T) {
	if !tracingWorks() {
		t.Skip("tracing refused here: no start is traced")
	}
	const n = 24
	before := threads(t)
	var mu sync.Mutex
	in, most := 0, 0
	hold := make(chan struct{})
	gate := func(int) {
		mu.Lock()
		in++
		most = max(most, in)
		mu.Unlock()
		<-hold
		mu.Lock()
		in--
		mu.Unlock()
	}
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return in, most
	}
	cmds := make([]*exec.Cmd, n)
	gated := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmds[i] = exec.Command("/bin/sh", "-c", "exit 0")
			gated[i], errs[i] = startOnce(cmds[i], gate)
		})
	}
	// Every slot taken; then a moment for more to come in, were there no
	// bound (the others wait for a slot meanwhile, up to tracedSlotWait).
	for c, _ := count(); c < tracedAtOnce; c, _ = count() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	held, _ := count()
	close(hold)
	wg.Wait()
	for i, cmd := range cmds {
		if errs[i] != nil || !gated[i] {
			t.Errorf("start %d: gated %v, %v; want gated", i, gated[i], errs[i])
			continue
		}
		if err := Wait(cmd); err != nil {
			t.Errorf("command %d: %v", i, err)
		}
	}
	_, most = count()
	if held != tracedAtOnce || most != tracedAtOnce {
		t.Errorf("%d at their gates at once while the first were held, at most %d; want %d", held, most, tracedAtOnce)
	}
	// A locked thread ends as its goroutine does; a hang guard of 5 s for
	// the kernel to show it.
	after := threads(t)
	for end := time.Now().Add(5 * time.Second); after > before+tracedAtOnce && time.Now().Before(end); after = threads(t) {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("threads: %d before %d gated starts, %d after", before, n, after)
	if after > before+tracedAtOnce {
		t.Errorf("threads: %d before %d gated starts, %d after; want at most %d more", before, n, after, tracedAtOnce)
	}
}

// TestThreadOfItsOwnEnds: the thread a traced start ran on ends with it,
// and a panic goes on in the caller.
func TestThreadOfItsOwnEnds(t *testing.T) {
	var tid int
	// Go never ends the process's main thread: a goroutine that ends
	// locked to it parks it for good instead, and the next runs elsewhere.
	for range 3 {
		ok, err := onThreadOfItsOwn(func() (bool, error) {
			tid = unix.Gettid()
			return true, errors.New("its error")
		})
		if !ok || err == nil || err.Error() != "its error" {
			t.Fatalf("onThreadOfItsOwn = %v, %v; want f's true, its error", ok, err)
		}
		if tid != os.Getpid() {
			break
		}
		t.Logf("the start ran on the main thread")
	}
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	// The kernel shows the thread gone soon after; a hang guard of 5 s.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if _, err := os.Stat(task); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("thread %d of the start is still there (%v): the runtime kept it", tid, err)
	}
	func() {
		defer func() {
			if r := recover(); r != "f's" {
				t.Errorf("recovered %v; want f's panic", r)
			}
		}()
		_, _ = onThreadOfItsOwn(func() (bool, error) { panic("f's") })
	}()
}
