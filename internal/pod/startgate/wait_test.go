package startgate

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// TestGatedStartsLeaveNoThread: 32 gated starts at once, each held at its
// gate until all are there, hold 32 threads meanwhile (each traces its
// child); once they are over, the threads are gone, not kept idle by the
// runtime for the rest of the process's life.
func TestGatedStartsLeaveNoThread(t *testing.T) {
	if !tracingWorks() {
		t.Skip("tracing refused here: no gated start holds a thread")
	}
	const n = 32
	before := threads(t)
	var atGate sync.WaitGroup
	atGate.Add(n)
	var most atomic.Int64
	cmds := make([]*exec.Cmd, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmds[i], errs[i] = Start(func() *exec.Cmd { return exec.Command("/bin/sh", "-c", "exit 0") }, func(int) {
				atGate.Done()
				atGate.Wait()
				if m, err := countThreads(); err == nil && int64(m) > most.Load() {
					most.Store(int64(m))
				}
			}, nil)
		})
	}
	wg.Wait()
	for i, cmd := range cmds {
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
		if err := Wait(cmd); err != nil {
			t.Errorf("command %d: %v", i, err)
		}
	}
	// A thread ends as its goroutine does; a hang guard of 5 s for the
	// kernel to show it.
	after := threads(t)
	for end := time.Now().Add(5 * time.Second); after >= before+n/2 && time.Now().Before(end); after = threads(t) {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("threads: %d before, %d while %d starts were at their gates, %d after", before, most.Load(), n, after)
	if most.Load() < n {
		t.Errorf("threads: %d while %d starts were at their gates; want one for each start at least", most.Load(), n)
	}
	if after >= before+n/2 {
		t.Errorf("threads: %d before, %d after %d gated starts: the runtime kept theirs", before, after, n)
	}
}
