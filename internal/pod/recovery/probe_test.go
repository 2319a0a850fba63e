package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// hangGuard bounds the wait for a pass that should not block; it only
// turns a hang into a failure, and is never what a test measures.
const hangGuard = 30 * time.Second

const target2 = "/var/lib/kubelet/pods/b/volumes/kubernetes.io~glusterfs/logs"

// guardedPass runs a pass and fails the test if it does not return.
func (b *bed) guardedPass() map[string]Result {
	b.t.Helper()
	done := make(chan []Result, 1)
	go func() { done <- b.r.Pass(context.Background()) }()
	select {
	case res := <-done:
		out := map[string]Result{}
		for _, r := range res {
			out[r.Target] = r
		}
		return out
	case <-time.After(hangGuard):
		b.t.Fatalf("a pass did not return within %s", hangGuard)
		return nil
	}
}

// mountedBoth makes the mount table show target (0:77) and target2 (0:78),
// with a record of each.
func (b *bed) mountedBoth() {
	b.t.Helper()
	table := "30 25 0:40 / / rw - overlay overlay rw\n" +
		fmt.Sprintf("812 30 0:77 / %s rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n", target) +
		fmt.Sprintf("813 30 0:78 / %s rw - fuse.glusterfs srv:/logs rw,user_id=0,group_id=0\n", target2)
	if err := os.WriteFile(b.mountinfo, []byte(table), 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.record(glusterRecord())
	r := glusterRecord()
	r.Source, r.Target = "srv:/logs", target2
	b.record(r)
}

// A mount whose stat hangs is reported hung, pass after pass, with one
// stat outstanding at most; the other mount is checked all the while, and
// the hung one is checked again once its stat returns.
func TestHungMountStatOnce(t *testing.T) {
	b := newBed(t)
	b.mountedBoth()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var mu sync.Mutex
	calls := map[string]int{}
	hang := true // the first pass waits StatTimeout for it
	b.r.stat = func(_ context.Context, p string) error {
		mu.Lock()
		calls[p]++
		blocks := hang && p == target
		mu.Unlock()
		if blocks {
			<-release
		}
		return nil
	}
	for i := range 5 {
		res := b.guardedPass()
		if res[target].Action != "hung" || res[target2].Action != "healthy" {
			t.Fatalf("pass %d: %+v; want %s hung and %s healthy", i, res, target, target2)
		}
	}
	mu.Lock()
	if calls[target] != 1 || calls[target2] != 5 || len(b.calls) != 0 {
		t.Fatalf("stats %v, commands %q; want one stat of the hung mount, five of the other, no command", calls, b.calls)
	}
	hang = false
	mu.Unlock()
	release <- struct{}{} // the hung stat returns
	for start := time.Now(); b.guardedPass()[target].Action != "healthy"; {
		if time.Since(start) > hangGuard {
			t.Fatal("the mount whose stat returned is still reported hung")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls[target] != 2 {
		t.Errorf("%d stats of the mount; want 2, the hung one and one after it returned", calls[target])
	}
}

// The stats of a pass run at once: each of these two answers only once
// the other has started.
func TestStatsRunConcurrently(t *testing.T) {
	b := newBed(t)
	b.mountedBoth()
	b.r.statLimit = time.Hour // a pass waits for both, however slow
	started := map[string]chan struct{}{target: make(chan struct{}), target2: make(chan struct{})}
	other := map[string]string{target: target2, target2: target}
	b.r.stat = func(_ context.Context, p string) error {
		close(started[p])
		select {
		case <-started[other[p]]:
			return nil
		case <-time.After(hangGuard):
			return fmt.Errorf("stat %s: the other mount's stat never started", p)
		}
	}
	start := time.Now()
	res := b.guardedPass()
	t.Logf("pass took %s", time.Since(start))
	if res[target].Action != "healthy" || res[target2].Action != "healthy" {
		t.Errorf("%+v; want both healthy", res)
	}
}

// A mount that dies again soon after it came back backs off as after a
// failed attempt, doubling; its first death, and a death after it stayed
// up for StableAfter, are recovered at once.
func TestFlappingMountBacksOff(t *testing.T) {
	b := newBed(t)
	b.r.Backoff = time.Second
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.r.now = func() time.Time { return now }
	b.record(glusterRecord())
	mounts := func() int {
		return len(slices.DeleteFunc(slices.Clone(b.calls), func(c string) bool { return !strings.HasPrefix(c, "mount ") }))
	}
	step := func(d time.Duration, kill bool, want string, wantMounts int) {
		t.Helper()
		now = now.Add(d)
		if kill {
			b.kill()
		}
		if res := b.pass(); res.Action != want || mounts() != wantMounts {
			t.Fatalf("at +%s: %+v after %d mounts; want %s after %d", now.Sub(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)), res, mounts(), want, wantMounts)
		}
	}
	step(0, true, "recovered", 1)                     // the first death: at once
	step(time.Second, true, "waiting", 1)             // died 1 s after: waits 1 s
	step(500*time.Millisecond, false, "waiting", 1)   //
	step(500*time.Millisecond, false, "recovered", 2) //
	step(time.Second, true, "waiting", 2)             // again: waits 2 s
	step(time.Second, false, "waiting", 2)            //
	step(time.Second, false, "recovered", 3)          //
	step(StableAfter, false, "healthy", 3)            // up long enough
	step(time.Second, true, "recovered", 4)           // a new death: at once
	got := b.reports.get()
	if len(got) != 6 || !strings.HasPrefix(got[1], "failed "+target+" attempt 1 retry in 1s: it died again 1s after it came back") ||
		!strings.HasPrefix(got[3], "failed "+target+" attempt 2 retry in 2s: ") {
		t.Errorf("reported %q; want each early death reported as a failed attempt", got)
	}
}

// noEvents is an [Events] that never fires: a poll pass of a Recoverer
// woken by events. It watches the targets not in unwatched.
type noEvents struct{ unwatched map[string]bool }

// clockedBed is a bed of both mounts and their records, whose recoverer's
// clock is *now, with events that watch every scope and never fire.
func clockedBed(t *testing.T) (*bed, *time.Time) {
	t.Helper()
	b := newBed(t)
	b.mountedBoth()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.r.now = func() time.Time { return now }
	b.r.Events = noEvents{}
	return b, &now
}

func (noEvents) C() <-chan struct{}           { return nil }
func (noEvents) Refresh()                     {}
func (e noEvents) Watches(target string) bool { return !e.unwatched[target] }

// With events waking the recoverer, a poll pass stats a mount that
// answered only once ProbeEvery has passed since; a pass woken by an
// event and every pass for ProbeEvery after it, a mount that did not
// answer, and a mount with a recovery under way are stat-ed every pass. Without events, every poll pass stats all.
func TestPollPassesStatAnsweredMountsEveryProbeEvery(t *testing.T) {
	b, now := clockedBed(t)
	stats := map[string]int{}
	b.r.stat = func(_ context.Context, p string) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		stats[p]++
		return b.health[p]
	}
	pass := func(woken string, d time.Duration) map[string]Result {
		t.Helper()
		*now = now.Add(d)
		b.r.mu.Lock()
		b.r.woken = woken
		b.r.mu.Unlock()
		b.mu.Lock()
		clear(stats)
		b.mu.Unlock()
		return b.guardedPass()
	}
	want := func(step string, res map[string]Result, statted ...string) {
		t.Helper()
		b.mu.Lock()
		defer b.mu.Unlock()
		got, results := slices.Sorted(maps.Keys(stats)), slices.Sorted(maps.Keys(res))
		slices.Sort(statted)
		if !slices.Equal(got, statted) || !slices.Equal(results, statted) {
			t.Errorf("%s: stat-ed %q, results for %q; want both %q", step, got, results, statted)
		}
	}
	want("first poll", pass("poll", 0), target, target2)
	want("poll 1 s later", pass("poll", time.Second))
	want("event", pass("event", time.Second), target, target2)
	// A dead daemon's connection may be torn down after the event's
	// quick passes: for ProbeEvery after an event, every pass stats all.
	want("poll 1 s after the event", pass("poll", time.Second), target, target2)
	want("poll just short of ProbeEvery after the event", pass("poll", ProbeEvery-time.Second-time.Millisecond), target, target2)
	want("poll ProbeEvery after the event", pass("poll", time.Millisecond))
	// Due at the grid's next mark after the last answer (the grid of
	// ProbeEvery from the first answer, 10 s after it here), not
	// ProbeEvery after the answer.
	want("poll just short of the grid's mark", pass("poll", 3*time.Second-time.Millisecond))
	want("poll at the grid's mark", pass("poll", time.Millisecond), target, target2)

	// A mount that did not answer is stat-ed every pass.
	b.mu.Lock()
	b.health[target2] = syscall.EACCES // an answer, not a healthy one
	b.mu.Unlock()
	want("poll, target2 failing", pass("poll", ProbeEvery), target, target2)
	want("poll, target2 failing, 1 s later", pass("poll", time.Second), target2)

	// A death without an exit (a connection aborted under a live daemon),
	// found by the poll at most ProbeEvery late; then, with its recovery
	// under way, stat-ed every pass until it is stable.
	b.kill()
	want("poll after a death without an exit", pass("poll", time.Second), target2)
	res := pass("poll", ProbeEvery-2*time.Second)
	want("poll ProbeEvery after the last answer", res, target, target2)
	if res[target].Action != "recovered" {
		t.Errorf("the dead mount, stat-ed again: %+v; want recovered", res[target])
	}
	// The bed's remount left the new mount alone in the table.
	table := "30 25 0:40 / / rw - overlay overlay rw\n" +
		fmt.Sprintf("812 30 0:%d / %s rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n", b.newMinor-1, target) +
		fmt.Sprintf("813 30 0:78 / %s rw - fuse.glusterfs srv:/logs rw,user_id=0,group_id=0\n", target2)
	if err := os.WriteFile(b.mountinfo, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	want("poll 1 s after the recovery", pass("poll", time.Second), target, target2)
	want("poll, answered 0.5 s ago but not stable yet", pass("poll", 500*time.Millisecond), target, target2)
	want("poll, stable", pass("poll", StableAfter), target, target2)
	want("poll, stable, 1 s later", pass("poll", time.Second), target2)

	// A mount whose scope the events do not watch (a daemon adopted from
	// outside the scopes) is stat-ed every pass.
	b.mu.Lock()
	delete(b.health, target2)
	b.mu.Unlock()
	// target answered 23.5 s after the first answer, target2 25.5 s
	// after: target is due at the mark of 25 s, and from then on both are
	// due together.
	want("poll, both answered, target at the grid's mark", pass("poll", time.Second), target, target2)
	want("poll, both answered, 1 s later", pass("poll", time.Second))
	want("poll, both answered, at the grid's mark", pass("poll", 3500*time.Millisecond), target, target2)
	b.r.Events = noEvents{unwatched: map[string]bool{target2: true}}
	want("poll, target2's scope not watched", pass("poll", time.Second), target2)

	// Without events the poll is all there is: every pass stats all.
	b.r.Events = nil
	want("poll without events", pass("poll", time.Millisecond), target, target2)
}

// TestPassesNoteAnswers: a pass notes each answer of its stats in
// Answers, for the mount the stat reached (the last at the target), and
// forgets a mount whose stat failed and one whose record is gone, so
// that the keeper's surveys take only what the recovery saw.
func TestPassesNoteAnswers(t *testing.T) {
	b := newBed(t)
	b.mountedBoth()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.r.now = func() time.Time { return now }
	b.r.Answers = &livemount.Answers{}
	mi := func(id, minor int, target string) mount.MountInfo {
		source := "srv:/vol"
		if target == target2 {
			source = "srv:/logs"
		}
		return mount.MountInfo{ID: id, ParentID: 30, Major: 0, Minor: minor, MountPoint: target, Source: source}
	}
	answered := func(m mount.MountInfo) bool { return b.r.Answers.AnsweredSince(m, now) }
	b.guardedPass()
	if !answered(mi(812, 77, target)) || !answered(mi(813, 78, target2)) {
		t.Fatal("after a pass that stat-ed both mounts: not both answered")
	}
	if answered(mi(811, 77, target)) || answered(mi(812, 76, target)) {
		t.Error("the answer of target counts for another mount ID or device there")
	}
	b.mu.Lock()
	b.health[target2] = syscall.EACCES
	b.mu.Unlock()
	now = now.Add(time.Second)
	b.guardedPass()
	if !answered(mi(812, 77, target)) || answered(mi(813, 78, target2)) {
		t.Error("after target2's stat failed: want target answered now, target2 forgotten")
	}
	b.mu.Lock()
	delete(b.health, target2)
	b.mu.Unlock()
	b.guardedPass()
	if !answered(mi(813, 78, target2)) {
		t.Fatal("target2 answering again: not answered")
	}
	if err := mountrecord.Remove(filepath.Join(b.r.Dir, mountrecord.Dir), target2); err != nil {
		t.Fatal(err)
	}
	b.guardedPass()
	if answered(mi(813, 78, target2)) {
		t.Error("target2's record gone: its answer kept")
	}
}

// TestPollRestsUntilAMountIsDue: after a pass in which every record's
// mount answered, is watched by the events and has nothing under way, the
// poll runs no pass until the first of them is due (the grid's next
// mark): such a pass would stat none and find nothing to do. A record
// written or removed meanwhile (the records' directory changed) ends the
// rest; a mount that failed, one not watched, a back-off, a recent event
// or no events at all keep the poll from resting after the pass that
// sees them.
func TestPollRestsUntilAMountIsDue(t *testing.T) {
	b, now := clockedBed(t)
	records := filepath.Join(b.r.Dir, mountrecord.Dir)
	pass := func(d time.Duration) {
		t.Helper()
		*now = now.Add(d)
		b.r.mu.Lock()
		b.r.woken = "poll"
		b.r.mu.Unlock()
		b.guardedPass()
	}
	rests := func(step string, d time.Duration, want bool) {
		t.Helper()
		*now = now.Add(d)
		if got := b.r.resting(); got != want {
			t.Errorf("%s: resting %v, want %v", step, got, want)
		}
	}
	// The directory's times set back, so that a record written after the
	// pass shows in them whatever the clock's grain.
	old := time.Now().Add(-time.Hour)
	backdate := func() {
		t.Helper()
		if err := os.Chtimes(records, old, old); err != nil {
			t.Fatal(err)
		}
	}
	backdate()
	pass(0)
	rests("1 s after both answered", time.Second, true)
	rests("just short of the grid's mark", ProbeEvery-time.Second-time.Millisecond, true)
	rests("at the grid's mark", time.Millisecond, false)

	pass(0)
	rests("both answered again", time.Second, true)
	rec := glusterRecord()
	rec.Options = append(rec.Options, "rw")
	b.record(rec) // written again, by rename
	rests("a record written", 0, false)
	backdate()
	pass(0)
	rests("the record passed", 0, true)
	if err := mountrecord.Remove(records, target2); err != nil {
		t.Fatal(err)
	}
	rests("a record removed", 0, false)

	b.mountedBoth()
	backdate()
	pass(0)
	rests("both again", 0, true)
	b.mu.Lock()
	b.health[target2] = syscall.EACCES
	b.mu.Unlock()
	pass(ProbeEvery)
	rests("target2 failing", 0, false)
	b.mu.Lock()
	delete(b.health, target2)
	b.mu.Unlock()
	pass(0)
	rests("target2 answering again", 0, true)

	b.r.Events = noEvents{unwatched: map[string]bool{target2: true}}
	pass(ProbeEvery)
	rests("target2's scope not watched", 0, false)
	b.r.Events = nil
	pass(0)
	rests("no events", 0, false)
	b.r.Events = noEvents{}
	pass(0)
	rests("events again", 0, true)

	// An event: every pass for ProbeEvery after it stats all.
	*now = now.Add(time.Second)
	b.r.mu.Lock()
	b.r.woken = "event"
	b.r.mu.Unlock()
	b.guardedPass()
	rests("after an event", 0, false)
	pass(ProbeEvery - time.Millisecond)
	rests("a poll just short of ProbeEvery after the event", 0, false)
	pass(time.Millisecond)
	rests("a poll ProbeEvery after the event", 0, true)

	b.kill()
	pass(ProbeEvery) // recovered: stable only StableAfter later
	rests("a recovery", 0, false)
	// The bed's remount left the new mount alone in the table.
	table := "30 25 0:40 / / rw - overlay overlay rw\n" +
		fmt.Sprintf("812 30 0:%d / %s rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n", b.newMinor-1, target) +
		fmt.Sprintf("813 30 0:78 / %s rw - fuse.glusterfs srv:/logs rw,user_id=0,group_id=0\n", target2)
	if err := os.WriteFile(b.mountinfo, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	pass(StableAfter / 2)
	rests("healthy again, not stable yet", 0, false)
	pass(StableAfter)
	rests("stable", 0, true)
}

// countingEvents are events that fire when the test sends on c, watch
// every scope and count their Refreshes.
type countingEvents struct {
	c         chan struct{}
	refreshes atomic.Int32
}

func (e *countingEvents) C() <-chan struct{} { return e.c }
func (e *countingEvents) Refresh()           { e.refreshes.Add(1) }
func (*countingEvents) Watches(string) bool  { return true }

// TestRunUntilRests runs the poll, a tick every millisecond: while every
// mount answered a moment ago it runs no pass but refreshes the events at
// each tick; a pass runs once a mount is due, once the records'
// directory changes, and at an event.
func TestRunUntilRests(t *testing.T) {
	b := newBed(t)
	b.mountedBoth()
	var mu sync.Mutex
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	b.r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ev := &countingEvents{c: make(chan struct{}, 1)}
	b.r.Events, b.r.Interval = ev, time.Millisecond
	var passes atomic.Int32
	b.r.afterPass = func() { passes.Add(1) }
	records := filepath.Join(b.r.Dir, mountrecord.Dir)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(records, old, old); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.r.RunUntil(ctx, nil) }()
	defer func() { cancel(); <-done }()
	await := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
			if time.Since(start) > hangGuard {
				t.Fatalf("%s: not within %s", what, hangGuard)
			}
		}
	}
	await("the first pass", func() bool { return passes.Load() == 1 })
	refreshed := ev.refreshes.Load()
	await("fifty ticks", func() bool { return ev.refreshes.Load() >= refreshed+50 })
	if n := passes.Load(); n != 1 {
		t.Errorf("%d passes in fifty ticks while both mounts answered a moment ago, want the first only", n)
	}
	mu.Lock()
	now = now.Add(ProbeEvery)
	mu.Unlock()
	await("a pass once the mounts are due", func() bool { return passes.Load() >= 2 })
	n := passes.Load()
	refreshed = ev.refreshes.Load()
	await("fifty ticks more", func() bool { return ev.refreshes.Load() >= refreshed+50 })
	if got := passes.Load(); got != n {
		t.Errorf("%d passes in fifty ticks after the mounts answered again, want none", got-n)
	}
	if err := os.Chtimes(records, old, old); err != nil {
		t.Fatal(err)
	}
	await("a pass after the directory's times changed", func() bool { return passes.Load() > n })
	n = passes.Load()
	refreshed = ev.refreshes.Load()
	await("fifty ticks after it", func() bool { return ev.refreshes.Load() >= refreshed+50 })
	if got := passes.Load(); got != n {
		t.Errorf("%d passes in fifty ticks after the directory's pass, want none", got-n)
	}
	b.record(glusterRecord())
	await("a pass after a record was written", func() bool { return passes.Load() > n })
	n = passes.Load()
	ev.c <- struct{}{}
	await("a pass after an event", func() bool { return passes.Load() > n })
}

// TestProbesAtOnce: a pass's stats of 24 mounts run probesAtOnce at a
// time, and each answers; stats still under way when their pass's bound
// passes give their places up (their mounts hung), and the next pass's
// stats run.
func TestProbesAtOnce(t *testing.T) {
	var mu sync.Mutex
	in, most := 0, 0
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return in, most
	}
	release := make(chan struct{})
	hung := make(chan struct{}) // the second pass's stats wait for it
	defer close(hung)
	r := &Recoverer{statLimit: hangGuard}
	r.stat = func(_ context.Context, p string) error {
		mu.Lock()
		in++
		most = max(most, in)
		mu.Unlock()
		defer func() {
			mu.Lock()
			in--
			mu.Unlock()
		}()
		switch {
		case strings.HasPrefix(p, "/hung/"):
			<-hung
		case strings.HasPrefix(p, "/slow/"):
			<-release
		}
		return nil
	}
	paths := func(prefix string, n int) []string {
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf("%s%d", prefix, i))
		}
		return ps
	}
	done := make(chan map[string]error, 1)
	go func() { done <- r.probeAll(context.Background(), paths("/slow/", 24)) }()
	// Every place taken; then a moment for more to come in, were there no
	// bound (the 16 others wait for a place meanwhile).
	for n, _ := count(); n < probesAtOnce; n, _ = count() {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	held, _ := count()
	close(release)
	var out map[string]error
	select {
	case out = <-done:
	case <-time.After(hangGuard):
		t.Fatalf("the pass did not return within %s", hangGuard)
	}
	if _, most := count(); held != probesAtOnce || most != probesAtOnce {
		t.Errorf("%d stats at once while the first were held, at most %d; want %d", held, most, probesAtOnce)
	}
	for p, err := range out {
		if err != nil {
			t.Errorf("stat %s: %v", p, err)
		}
	}
	if len(out) != 24 {
		t.Errorf("%d answers, want 24", len(out))
	}

	// Stats that hang hold every place until their pass's bound passes.
	r.statLimit = 100 * time.Millisecond
	for p, err := range r.probeAll(context.Background(), paths("/hung/", probesAtOnce)) {
		if !errors.Is(err, errHung) {
			t.Errorf("stat %s: %v; want hung", p, err)
		}
	}
	for p, err := range r.probeAll(context.Background(), paths("/next/", probesAtOnce)) {
		if err != nil {
			t.Errorf("stat %s after the hung ones' pass: %v; want an answer (the hung ones gave their places up)", p, err)
		}
	}
}
