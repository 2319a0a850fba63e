package livemount

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// fakeEvents is an [Events] the test fires by hand.
type fakeEvents struct {
	c         chan struct{}
	refreshes atomic.Int32
}

func (e *fakeEvents) C() <-chan struct{} { return e.c }
func (e *fakeEvents) Refresh()           { e.refreshes.Add(1) }

type keeperPass struct {
	r       Report
	removed []Scope
}

// TestKeeperWokenByEvents: a keeper whose period is an hour removes the
// scope of a gone mount as soon as its Events say a scope emptied, and
// refreshes what they watch after every survey.
func TestKeeperWokenByEvents(t *testing.T) {
	const plugin = "x.io/glusterfs"
	fs := &fakeScopes{scopes: map[string][]scope.Scope{}}
	ev := &fakeEvents{c: make(chan struct{}, 1)}
	passes := make(chan keeperPass, 4)
	k := &Keeper{
		Options:   Options{KubeletDir: t.TempDir(), Plugins: []string{plugin}, Scopes: fs},
		Period:    time.Hour,
		Events:    ev,
		WakeDelay: 10 * time.Millisecond,
		Observe:   func(r Report, removed []Scope) { passes <- keeperPass{r, removed} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.Run(ctx) }()
	defer func() { cancel(); <-done }()

	next := func(what string) keeperPass {
		t.Helper()
		select {
		case p := <-passes:
			return p
		case <-time.After(10 * time.Second): // a hang guard: the period is an hour
			t.Fatalf("no survey %s", what)
			return keeperPass{}
		}
	}
	if p := next("at start"); len(p.removed) != 0 {
		t.Fatalf("the first survey removed %v, want nothing", p.removed)
	}
	// A mount went and its daemon exited: its scope is empty, and the
	// events say so. (Written before the wake-up: the channel orders it
	// before the keeper's next survey.)
	gone := scope.Scope{Plugin: plugin, Name: scope.Name("/var/lib/kubelet/pods/a/volumes/v/mnt")}
	fs.scopes[plugin] = []scope.Scope{gone}
	ev.c <- struct{}{}
	p := next("after the wake-up")
	if want := []Scope{{Plugin: plugin, Name: gone.Name}}; !reflect.DeepEqual(scopeNames(p.removed), scopeNames(want)) {
		t.Fatalf("the woken survey removed %v, want %v", p.removed, want)
	}
	if n := ev.refreshes.Load(); n < 1 {
		t.Fatalf("the events were refreshed %d times after the surveys, want at least once", n)
	}
}

func scopeNames(s []Scope) []string {
	var names []string
	for _, x := range s {
		names = append(names, x.Plugin+"/"+x.Name)
	}
	return names
}

// TestSurveyKind: the keeper's first survey reads every process whole;
// then it surveys in the scopes, with a full survey every
// FullSurveyPeriod, which skips the quiet processes but for one every
// DeepSurveyPeriod.
func TestSurveyKind(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name                 string
		first                bool
		sinceFull, sinceDeep time.Duration
		inScopes, skipQuiet  bool
	}{
		{"first", true, 0, 0, false, false},
		{"in the scopes", false, 10 * s, 10 * s, true, true},
		{"in the scopes, a deep one due", false, 10 * s, DeepSurveyPeriod, true, true},
		{"full", false, FullSurveyPeriod, FullSurveyPeriod, false, true},
		{"full, just short of a deep one", false, FullSurveyPeriod, DeepSurveyPeriod - s, false, true},
		{"deep", false, FullSurveyPeriod, DeepSurveyPeriod, false, false},
	} {
		inScopes, skipQuiet := surveyKind(c.first, c.sinceFull, c.sinceDeep)
		if inScopes != c.inScopes || skipQuiet != c.skipQuiet {
			t.Errorf("%s: in the scopes %v, skipping the quiet %v; want %v, %v", c.name, inScopes, skipQuiet, c.inScopes, c.skipQuiet)
		}
	}
}
