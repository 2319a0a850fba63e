package outpipe

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// copyAsync runs Copy on r and returns its result and what it passed on.
func copyAsync(r *os.File) <-chan result {
	done := make(chan result, 1)
	go func() {
		var got bytes.Buffer
		ended := Copy(r, make([]byte, 4096), func(b []byte) { got.Write(b) })
		done <- result{ended, got.Bytes()}
	}()
	return done
}

type result struct {
	ended bool
	got   []byte
}

func await(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(time.Minute): // a hang guard, not a verdict on speed
		t.Fatal("Copy did not return")
		return result{}
	}
}

// TestCopyToTheEnd: without Stop, Copy passes everything to the pipe's end.
func TestCopyToTheEnd(t *testing.T) {
	r, w := pipe(t)
	want := bytes.Repeat([]byte("x"), 200<<10) // more than a pipe holds
	done := copyAsync(r)
	if _, err := w.Write(want); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if got := await(t, done); !got.ended || !bytes.Equal(got.got, want) {
		t.Fatalf("ended %v, %d bytes; want the end and %d bytes", got.ended, len(got.got), len(want))
	}
}

// TestStopPassesWhatIsHeld: after Stop, what the pipe holds is passed
// even if Copy had not read yet, and Copy returns although a writer
// remains; it reports the end only when no writer remains.
func TestStopPassesWhatIsHeld(t *testing.T) {
	for _, closed := range []bool{false, true} {
		r, w := pipe(t)
		want := bytes.Repeat([]byte("y"), 60<<10)
		if _, err := w.Write(want); err != nil {
			t.Fatal(err)
		}
		if closed {
			w.Close()
		}
		Stop(r) // before Copy ran at all: the latest a reader can be
		if got := await(t, copyAsync(r)); got.ended != closed || !bytes.Equal(got.got, want) {
			t.Errorf("writer closed %v: ended %v, %d bytes; want ended %v and %d bytes", closed, got.ended, len(got.got), closed, len(want))
		}
	}
}

// TestStopBoundsAWriterThatGoesOn: a writer that never stops does not keep
// a stopped Copy from returning.
func TestStopBoundsAWriterThatGoesOn(t *testing.T) {
	r, w := pipe(t)
	b := make([]byte, 4096)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				_, _ = w.Write(b)
			}
		}
	}()
	defer close(stop)
	done := copyAsync(r)
	Stop(r)
	if got := await(t, done); got.ended || len(got.got) == 0 {
		t.Fatalf("ended %v after %d bytes; want no end and some bytes", got.ended, len(got.got))
	}
}

// TestRun: both outputs in one writer when it is given twice, or each in
// its own; a daemon the command left holding the pipes does not hold Run,
// and what the command wrote before it exited is there; started is told
// the command's process.
func TestRun(t *testing.T) {
	var both bytes.Buffer
	var started []int
	sh, err := Run(func() *exec.Cmd { return exec.Command("sh", "-c", "echo out; echo err >&2") }, &both, &both, time.Minute, func(pid int) { started = append(started, pid) }, nil)
	if err != nil || both.String() != "out\nerr\n" {
		t.Errorf("one writer: %v, %q; want out and err", err, both.String())
	}
	if len(started) != 1 || started[0] != sh.Process.Pid {
		t.Errorf("started was told %v; want once the command's PID %d", started, sh.Process.Pid)
	}
	var out, errb bytes.Buffer
	cmds := make(chan *exec.Cmd, 1)
	done := make(chan error, 1)
	go func() {
		cmd, err := Run(func() *exec.Cmd {
			cmd := exec.Command("sh", "-c", "sleep 30 & echo started; echo e >&2; exit 3")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			return cmd
		}, &out, &errb, time.Nanosecond, nil, nil)
		cmds <- cmd
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a hang guard, not a verdict on speed
		t.Fatal("Run waited for the daemon")
	}
	syscall.Kill(-(<-cmds).Process.Pid, syscall.SIGKILL)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || out.String() != "started\n" || errb.String() != "e\n" {
		t.Errorf("a daemon holding the pipes: %v, %q, %q; want exit 3, started and e", err, out.String(), errb.String())
	}
	notStarted := func(pid int) { t.Errorf("started was told of PID %d for a tool that does not exist", pid) }
	if _, err := Run(func() *exec.Cmd { return exec.Command("/no/such/tool") }, &out, &errb, time.Minute, notStarted, nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing tool: %v, want not found", err)
	}
}
