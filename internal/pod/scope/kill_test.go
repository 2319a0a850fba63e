package scope

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestKillUntilEmpty(t *testing.T) {
	// A process that appears after the first signal is signalled too.
	rounds := [][]int{{7, 3}, {3, 9}, nil}
	var signalled [][]int
	killed, err := killUntilEmpty("scope", time.Second,
		func() ([]int, error) { r := rounds[0]; rounds = rounds[1:]; return r, nil },
		func(pids []int) ([]int, error) { signalled = append(signalled, pids); return pids, nil })
	if err != nil || !slices.Equal(killed, []int{3, 7, 9}) || len(signalled) != 2 {
		t.Errorf("killUntilEmpty = %v, %v after signalling %v; want [3 7 9]", killed, err, signalled)
	}

	// One that never goes: ErrPopulated after the wait, naming it.
	start := time.Now()
	withinAMinute(t, func() {
		killed, err = killUntilEmpty("/a/scope", 100*time.Millisecond,
			func() ([]int, error) { return []int{42}, nil },
			func(pids []int) ([]int, error) { return pids, nil })
	})
	if !errors.Is(err, ErrPopulated) || !strings.Contains(err.Error(), "[42] in /a/scope") || !slices.Equal(killed, []int{42}) {
		t.Errorf("a process that stays: %v, %v; want ErrPopulated naming 42", killed, err)
	}
	t.Logf("the wait of 100ms ended after %s", time.Since(start))

	// An error of either function ends it.
	boom := errors.New("boom")
	if _, err := killUntilEmpty("s", time.Second, func() ([]int, error) { return nil, boom }, nil); !errors.Is(err, boom) {
		t.Errorf("procs failing: %v", err)
	}
	if _, err := killUntilEmpty("s", time.Second, func() ([]int, error) { return []int{1}, nil }, func([]int) ([]int, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("kill failing: %v", err)
	}
	// A process listed but not signalled (it left the scope before its
	// signal): not reported, and the wait still ends.
	start = time.Now()
	withinAMinute(t, func() {
		killed, err = killUntilEmpty("/a/scope", 100*time.Millisecond,
			func() ([]int, error) { return []int{0}, nil },
			func([]int) ([]int, error) { return nil, nil })
	})
	if !errors.Is(err, ErrPopulated) || killed != nil {
		t.Errorf("a process never signalled: %v, %v; want ErrPopulated and nothing signalled", killed, err)
	}
	t.Logf("the wait of 100ms ended after %s", time.Since(start))
	// Nothing there: nothing signalled.
	if killed, err := killUntilEmpty("s", time.Second, func() ([]int, error) { return nil, nil }, func([]int) ([]int, error) { t.Error("signalled nothing"); return nil, nil }); killed != nil || err != nil {
		t.Errorf("empty scope: %v, %v", killed, err)
	}
}

// withinAMinute runs f, failing the test if it has not returned within a
// minute (a hang guard: how long it takes is no verdict).
func withinAMinute(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("still waiting after a minute")
	}
}
