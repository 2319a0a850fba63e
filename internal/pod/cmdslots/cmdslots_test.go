package cmdslots

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The test binary run with holdEnv set takes every slot of the directory
// it names, says so on standard output and waits to be killed.
const holdEnv = "CMDSLOTS_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		s, err := Open(dir, 2)
		if err != nil {
			os.Exit(2)
		}
		for range s.Count() {
			if _, err := s.Acquire(context.Background()); err != nil {
				os.Exit(3)
			}
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Hour) // killed before
		runtime.KeepAlive(s)  // its files' finalizers would free the slots
		os.Exit(4)
	}
	os.Exit(m.Run())
}

func rootOnly(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the slots' directory must be root's")
	}
}

// TestSlotsBoundTheContainer: two openers of one directory (two open
// files, as two processes have) share its slots: what one holds the other
// waits for, and gets as soon as it is freed.
func TestSlotsBoundTheContainer(t *testing.T) {
	rootOnly(t)
	dir := filepath.Join(t.TempDir(), "slots")
	a, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	r1, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := a.Acquire(short); err == nil || !strings.Contains(err.Error(), "all 2 command slots of the container busy") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a third slot of two: %v, want a busy error naming %s", err, dir)
	}
	got := make(chan error, 1)
	go func() {
		r, err := a.Acquire(ctx) // a hang guard below: it waits for b's
		if err == nil {
			r()
		}
		got <- err
	}()
	r2()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the slot freed by the other opener was never taken")
	}
	r1()
	r1() // a second call is harmless
}

// TestSlotsAtOnce: many goroutines of one process never hold more than
// the count at once, and all get through. The first holders keep their
// slots until the count is reached, so that it is reached whatever the
// machine's load.
func TestSlotsAtOnce(t *testing.T) {
	rootOnly(t)
	s, err := Open(filepath.Join(t.TempDir(), "slots"), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var now, most atomic.Int32
	full := make(chan struct{})
	var fullOnce sync.Once
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := s.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			n := now.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if n == 3 {
				fullOnce.Do(func() { close(full) })
			}
			select {
			case <-full:
			case <-time.After(30 * time.Second): // a hang guard
				t.Error("the count was never reached")
			}
			// Held a while longer, so that a slot given twice shows.
			time.Sleep(time.Millisecond)
			now.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if m := most.Load(); m != 3 {
		t.Errorf("at most %d held at once, want 3 (the count, reached with 40 callers)", m)
	}
}

// TestKilledHolderLeaksNothing: the slots of a process that was killed
// while it held them are free.
func TestKilledHolderLeaksNothing(t *testing.T) {
	rootOnly(t)
	dir := filepath.Join(t.TempDir(), "slots")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 5)
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "held\n" {
		t.Fatalf("holder said %q (%v)", buf[:n], err)
	}
	s, err := Open(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(short); err == nil {
		t.Fatal("got a slot while another process held them all")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel2()
	release, err := s.Acquire(ctx)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	release()
}

// TestOpenRefuses: a bad count, a directory others can write or that is a
// symlink, and a slot that is a symlink, a FIFO, a directory or a device
// are refused with an error naming them, without blocking.
func TestOpenRefuses(t *testing.T) {
	rootOnly(t)
	for _, n := range []int{0, -1, MaxCount + 1} {
		if _, err := Open(t.TempDir(), n); err == nil || !strings.Contains(err.Error(), "count "+strconv.Itoa(n)) {
			t.Errorf("count %d: %v, want an error naming it", n, err)
		}
	}
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(open, 1); err == nil || !strings.Contains(err.Error(), "writable by root alone") {
		t.Errorf("a directory anyone can write: %v, want refused", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link, 1); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("a symlinked directory: %v, want refused, naming it", err)
	}
	for name, plant := range map[string]func(string) error{
		"fifo":    func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"symlink": func(p string) error { return os.Symlink("/etc/passwd", p) },
		"dir":     func(p string) error { return os.Mkdir(p, 0o700) },
		// /dev/null's numbers: opening a device can act, so it is not.
		"device": func(p string) error { return syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|3) },
	} {
		dir := t.TempDir()
		if err := plant(filepath.Join(dir, "slot-1")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			s, err := Open(dir, 2)
			if err == nil {
				s.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "slot-1")) {
				t.Errorf("slot-1 a %s: %v, want refused, naming it", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("slot-1 a %s: Open blocked", name)
		}
	}
}
