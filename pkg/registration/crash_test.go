package registration

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// crashChildEnv makes the test binary act as a writer that never stops; the
// crash test kills it.
const crashChildEnv = "REGISTRATION_TEST_CRASH_WRITER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashWriter(dir)
		os.Exit(0)
	}
	if dir := os.Getenv(watchChildEnv); dir != "" {
		watchChild(dir)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// generation returns the n-th registration the crash writer writes; all
// generations are distinct and valid.
func generation(n int) Registration {
	r := validReg()
	r.PodName = fmt.Sprintf("glusterfs-mount-%d", n)
	r.PodUID = fmt.Sprintf("uid-%d", n)
	return r
}

func crashWriter(dir string) {
	for n := 0; ; n++ {
		if err := Write(dir, plugin, generation(n)); err != nil {
			fmt.Fprintln(os.Stderr, "crash writer:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stdout, n) // the parent learns how far it got
	}
}

func TestCrashAtomicity(t *testing.T) {
	kills := 200
	if testing.Short() {
		kills = 50
	}
	dir := regDir(t)
	mustWrite(t, dir, plugin, generation(-1))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i := range kills {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait until the writer has completed one write, then kill it at
		// a random moment of the writes that follow.
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatalf("crash writer did not start: %v", err)
		}
		time.Sleep(time.Duration(rand.IntN(20000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		got, ok, err := Read(dir, plugin)
		if err != nil || !ok {
			t.Fatalf("kill %d: Read = %+v, %v, %v; want a complete registration", i, got, ok, err)
		}
		if got.Validate() != nil || got.PodUID != "uid-"+got.PodName[len("glusterfs-mount-"):] {
			t.Fatalf("kill %d: torn registration %+v", i, got)
		}
	}
	// A later write removes whatever the killed writers left behind.
	mustWrite(t, dir, plugin, generation(1<<30))
	assertNoTemps(t, dir)
}

func TestConcurrentReadersNeverTear(t *testing.T) {
	dir := regDir(t)
	a, b := generation(1), generation(2)
	mustWrite(t, dir, plugin, a)
	// Every write syncs the disk, so writes are slow; the readers run
	// tens of thousands of times meanwhile.
	writes := 300
	if testing.Short() {
		writes = 50
	}
	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				got, ok, err := Read(dir, plugin)
				if err != nil || !ok || (got != a && got != b) {
					errs <- fmt.Errorf("torn read: %+v, %v, %v", got, ok, err)
					return
				}
				reads.Add(1)
			}
		}()
	}
	for i := range writes {
		r := a
		if i%2 == 0 {
			r = b
		}
		if err := Write(dir, plugin, r); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() < int64(writes) {
		// The readers must really have overlapped the writer.
		t.Fatalf("only %d reads during %d writes", reads.Load(), writes)
	}
	t.Logf("%d reads during %d writes, none torn", reads.Load(), writes)
	assertNoTemps(t, dir)
}
