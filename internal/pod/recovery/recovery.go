// Package recovery brings back, in place, a FUSE mount whose daemon died:
// on the node and inside every workload container that uses it, without a
// restart of the workload.
//
// It runs in the mount pod (`mountpod serve`), which holds the tools, runs
// with hostPID and sees the kubelet's directory with Bidirectional
// propagation. Each pass (at start, for mounts that died while no mount pod
// ran, then every [DefaultInterval]) reads the mount records
// (internal/shared/mountrecord) of the plugins this pod is registered for, and for
// each one:
//
//   - target not mounted (or gone): the mount was removed by other means;
//     the record is dropped.
//   - target answers stat: healthy, nothing to do.
//   - stat answers ENOTCONN, ECONNABORTED, EIO or ESTALE: the daemon is
//     dead. Unless [Recoverer.Allow] refuses the record (the mount pod
//     checks its servers against the allow-list as it is now: the mount
//     is then left dead, and checked again at the next pass), the dead
//     mount is detached lazily (umount -l; the detach
//     propagates to the node), mounted again with the recorded source,
//     type and options (mount(8) in this pod, so the helper puts the new
//     daemon in a new scope), and then every other mount namespace that
//     still holds the dead mount (found through /proc/PID/mountinfo by the
//     dead mount's device number, file-system type and source together,
//     and only in a FUSE mount that root made: see [Identity]) gets the
//     new one at the same place: see [Reattach].
//     Before each mount, whatever still runs in the mount's scope is
//     killed ([Recoverer.StopLeftovers]): a hung daemon whose connection
//     was aborted, or the daemon of a failed attempt, must not live on
//     beside the new one. A failure is retried with exponential back-off
//     (from [DefaultBackoff] to [MaxBackoff]) and logged at each attempt,
//     never in a hot loop. A mount that dies again within [StableAfter] of
//     coming back waits the same back-off, as a failed attempt.
//   - stat does not answer within [StatTimeout]: hung, left alone. The
//     stats of a pass run at most [probesAtOnce] at a time, and a mount
//     whose earlier stat has not returned is not stat again until it does
//     (see [Recoverer.probeAll]).
//
// Detection is event-driven where the kernel offers it: with a cgroup v2
// hierarchy, the "cgroup.events" file of the mount's scope changes when its
// last process, the daemon, exits ([ScopeEvents]), and a pass runs at once.
// Everywhere, a bounded poll also runs: a stat per recorded mount per
// interval (1 s), so a dead mount is found within about a second even
// without events; where the events watch a mount's scope, every
// [ProbeEvery], the poll resting between (see [Recoverer.RunUntil]). Files a workload
// had open on the dead connection stay broken (the kernel cannot move an
// open file to a new connection); the next open works.
//
// # Entering a container's mount namespace
//
// setns(2) into a mount namespace needs a single-threaded process, and a
// Go process never is one. So the attach runs in a child: util-linux
// nsenter (in the image) enters the workload's mount and PID namespaces and
// executes this program again, through a descriptor inherited as fd 3
// (/proc/self/fd/3: nsenter forks into the PID namespace, so /proc/self is
// the child in the container's own procfs, and the program need not exist in
// the container's file system), with the new mount, already cloned by
// open_tree(OPEN_TREE_CLONE) at the bind's root and made private (and
// read-only for a read-only bind), as fd 4. The child ([ReattachMain])
// detaches the dead mount at the path and attaches fd 4 there with
// move_mount(2). A container whose mount is a slave of the node's
// (mountPropagation: HostToContainer) received the detach and the new mount
// by propagation already: it no longer holds the dead mount, so it is not
// touched again.
package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/outpipe"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Defaults of [Recoverer].
const (
	DefaultInterval = time.Second
	DefaultBackoff  = time.Second
	MaxBackoff      = time.Minute
	// ProbeEvery is how often a poll pass stats a mount that answered
	// its last stat, when [Recoverer.Events] wakes the recoverer at its
	// daemon's exit (the mount's scope is watched): the poll is then a
	// backstop for deaths without an exit (a connection aborted under a
	// live daemon, a daemon whose child keeps its scope populated), and stat-ing a
	// hundred mounts every second kept the Go runtime's monitor thread
	// busy retaking processors from the blocked stats. A pass woken by an
	// event and every pass for ProbeEvery after one (the kernel may tear
	// the dead daemon's connection down after the quick passes), a mount
	// that did not answer or has a recovery under way, and a mount not
	// stat-ed yet are stat-ed every pass.
	ProbeEvery = 5 * time.Second
	// StatTimeout bounds the health check of one mount.
	StatTimeout = 2 * time.Second
	// StableAfter is how long a mount must stay up after it came back for
	// its next death to be recovered at once: one that dies sooner is
	// flapping (a server that takes the client and drops it again), and
	// waits as after a failed attempt. Short, so that a daemon killed now
	// and then (an OOM kill, an administrator) comes back at once each time.
	StableAfter = 2 * time.Second
	// CommandTimeout bounds each mount, umount and attach.
	CommandTimeout = 30 * time.Second
)

// Recoverer finds dead FUSE mounts of its plugins and brings them back.
type Recoverer struct {
	// Dir is the registration directory; records are in its
	// mountrecord.Dir.
	Dir string
	// Plugins are the plugins this mount pod serves; PodUID is its UID:
	// only the records of plugins whose registration names PodUID are
	// processed, so that of two mount pods of a plugin on a node (during a
	// surge rollout) only the registered one acts.
	Plugins []string
	PodUID  string
	// Interval between passes; default DefaultInterval.
	Interval time.Duration
	// Backoff is the first wait after a failed attempt, doubled after each
	// one up to MaxBackoff; default DefaultBackoff.
	Backoff time.Duration
	// Logger receives one line per recovery, failure and dropped record.
	Logger *slog.Logger
	// Events, when set, makes Run pass at once when something may have
	// died (see [ScopeEvents]), besides every Interval.
	Events Events
	// Reporter, when set, hears of every recovery and failed attempt
	// (the mount pod records Kubernetes Events from it), besides the log.
	Reporter Reporter
	// Observer, when set, is told of dead mounts and recoveries (the
	// mount pod's metrics).
	Observer Observer
	// Allow, when set, is asked before a dead mount is made again, at each
	// pass while it is dead: a record it refuses is left as it is, dead
	// (nothing is detached, killed or mounted), and is logged, observed as
	// [OutcomeNotRecoverable] and reported ([Reporter.Refused]) once until
	// it is allowed again, when it is brought back. The mount pod checks
	// the servers the record names against its Flexvolume driver's
	// allow-list, which may have changed since the mount was made.
	Allow func(ctx context.Context, rec mountrecord.Record) error

	// MountInfo is the mount table to read; default /proc/self/mountinfo.
	MountInfo string
	// ProcRoot is the proc file system; default /proc.
	ProcRoot string
	// Command runs mount(8) and umount(8) in this pod; default os/exec.
	Command func(ctx context.Context, name string, args ...string) ([]byte, error)
	// StopLeftovers, when set, stops whatever still runs for target's
	// dead mount before it is mounted again, and returns what it stopped:
	// a daemon that hung and whose connection was aborted (the remedy for
	// a hung FUSE mount) still runs, as may the daemon of an attempt whose
	// mount(8) failed; left alone, each would hold its detached mount and
	// its memory for good, beside the new daemon. The mount pod kills the
	// processes of the target's scope ([scope.Manager.Kill]).
	StopLeftovers func(ctx context.Context, target string) ([]int, error)
	// Answers, when set, get the answers of the probes' stats (the
	// keeper's surveys take them for the mounts' health).
	Answers *livemount.Answers
	// Reattach attaches the new mount in the namespaces holding the dead
	// one; default [Reattach].
	Reattach func(ctx context.Context, procRoot string, dead DeadMount, newTarget string) ([]Attached, error)

	// stat checks a mount, and may block for as long as the mount's
	// daemon makes it (see [Recoverer.probeAll]); default os.Stat.
	stat func(ctx context.Context, path string) error
	// statLimit bounds a pass's wait for the stats; default StatTimeout.
	statLimit time.Duration
	// now tells the time of back-offs; default time.Now.
	now func() time.Time
	// afterPass, when set, is called after each pass of RunUntil.
	afterPass func()

	probeMu sync.Mutex
	probing map[string]bool // targets whose stat has not returned
	// probeSlots holds a token for each stat under way within its
	// pass's bound (see probesAtOnce).
	probeSlots chan struct{}

	// answered is when each target last answered its stat (see
	// ProbeEvery); a target whose stat failed or hung is not in it.
	// probeGrid is the start of the grid of [Recoverer.probeDue].
	answered  map[string]time.Time
	probeGrid time.Time
	// eventAt is when the last pass woken by an event ran.
	eventAt time.Time

	mu     sync.Mutex
	woken  string              // what started the pass: "start", "event" or "poll"
	state  map[string]*attempt // target -> back-off state
	warned map[string]bool     // targets whose record was refused or not recoverable, logged once
	// refused are the targets whose dead mount Allow refused, reported
	// once until Allow lets it come back or its record goes.
	refused map[string]bool
	// records lists the records every pass, reading again only those
	// whose file changed.
	records mountrecord.Lister
	// table is the mount table every pass reads, read again only once
	// the kernel marks it changed.
	table *mountinfo.Table
	// restUntil is until when the poll runs no pass (see
	// [Recoverer.RunUntil]); zero: it runs one at every tick. recordsDir
	// is what the records' directory was at the last pass's start.
	restUntil  time.Time
	recordsDir dirStamp
}

// dirStamp is a directory as a stat of it found it: a record written
// (renamed into it) or removed changes its mtime and ctime.
type dirStamp struct {
	ok           bool
	dev, ino     uint64
	mtime, ctime unix.Timespec
}

// stampOf stats dir, not following a symlink; a stat that fails gives
// the zero stamp, unlike any found.
func stampOf(dir string) dirStamp {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return dirStamp{}
	}
	return dirStamp{ok: true, dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}
}

// attempt is the back-off state of a dead mount, kept after it came back
// until it has stayed up for StableAfter.
type attempt struct {
	failures int
	next     time.Time
	// cameBack is when the mount came back; zero while it is dead.
	cameBack time.Time
}

// Result is what one pass did for one record.
type Result struct {
	Target string
	// Action: "healthy", "hung" (its stat did not answer in time, or an
	// earlier one still has not: neither healthy nor dead, left alone),
	// "dropped", "recovered", "failed", "waiting" (back-off),
	// "not-recoverable", "refused" (a bad record, or one that Allow
	// refused).
	Action string
	// Attached are the containers' mounts replaced, when recovered.
	Attached []Attached
	// Took is how long the recovery took, from detection; Remount and
	// Attach how long the node's mount and the containers' attach took.
	Took, Remount, Attach time.Duration
	Err                   error
}

// Run makes a pass every Interval until ctx ends (see
// [Recoverer.RunUntil]).
func (r *Recoverer) Run(ctx context.Context) { r.RunUntil(ctx, nil) }

// RunUntil is [Recoverer.Run] that also returns when stop is closed,
// between two passes: a pass under way is not cut short, and the
// Recoverer's fields may be changed once it has returned.
//
// A tick of the poll runs no pass while the last pass found every
// record's mount answering, watched by the events and with nothing under
// way, until the first of them is due again ([Recoverer.probeDue]), and
// while the records' directory shows the times it had at that pass's
// start (a record written or removed changes them); it refreshes the
// events all the same. An event runs a pass at once, as ever.
func (r *Recoverer) RunUntil(ctx context.Context, stop <-chan struct{}) {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var wake <-chan struct{}
	if r.Events != nil {
		wake = r.Events.C()
	}
	woken := "start"
	// After an event, a few quick passes: the kernel may report the
	// daemon's exit a moment before the mount answers "not connected".
	var burst <-chan time.Time
	burstLeft := 0
	// Emptied scopes whose mounts are gone (unmounts) are no news: a
	// wave of a hundred unmounts would otherwise cost a hundred passes
	// and their quick passes.
	named, _ := r.Events.(emptiedNamer)
	if named != nil {
		named.Emptied() // start keeping the names
	}
	skip := false
	for {
		if !skip {
			r.mu.Lock()
			r.woken = woken
			r.mu.Unlock()
			r.Pass(ctx)
			if r.Events != nil {
				r.Events.Refresh()
			}
			if r.afterPass != nil {
				r.afterPass()
			}
			if burstLeft > 0 {
				burstLeft--
				burst = time.After(burstInterval)
			} else {
				burst = nil
			}
		}
		skip = false
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
			woken = "poll"
			if r.resting() {
				// The scopes made since are watched all the same.
				skip = true
				if r.Events != nil {
					r.Events.Refresh()
				}
			}
		case <-wake:
			if named != nil && r.onlyUnmounted(named.Emptied()) {
				skip = true // quick passes under way go on
			} else {
				woken, burstLeft = "event", burstPasses
			}
		case <-burst:
			woken = "event"
		}
	}
}

// TryNow ends the back-off of every dead mount, so that the next pass
// tries each at once: the mount pod calls it between two runs, once it
// has the scopes that a mount needs (systemd answered late). Each keeps
// its count of failed attempts.
func (r *Recoverer) TryNow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.state {
		a.next = time.Time{}
	}
}

// emptiedNamer is [Events] that name the scopes that emptied: see
// [ScopeEvents.Emptied].
type emptiedNamer interface {
	Emptied() []string
}

// onlyUnmounted reports whether none of the scopes names (scope.Name of a
// target) is that of a FUSE mount in the mount table: their daemons exited
// after their mounts went, as an unmount ends. None named, or a mount
// table that cannot be read, is unknown: false.
func (r *Recoverer) onlyUnmounted(names []string) bool {
	if len(names) == 0 {
		return false
	}
	infos, err := mountinfo.ParseFile(r.mountInfo())
	if err != nil {
		return false
	}
	emptied := make(map[string]bool, len(names))
	for _, n := range names {
		emptied[n] = true
	}
	for _, mi := range infos {
		if livemount.IsFUSE(mi.FsType) && emptied[scope.Name(mi.MountPoint)] {
			return false
		}
	}
	return true
}

// After an event wakes the recoverer, burstPasses more passes run
// burstInterval apart.
const (
	burstPasses   = 8
	burstInterval = 100 * time.Millisecond
)

func (r *Recoverer) log() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

// Pass checks every record once and recovers the dead mounts whose
// back-off has passed.
func (r *Recoverer) Pass(ctx context.Context) []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state, r.warned, r.refused = map[string]*attempt{}, map[string]bool{}, map[string]bool{}
	}
	dir := filepath.Join(r.Dir, mountrecord.Dir)
	// Stamped before the listing: a record written after it changes the
	// stamp, and the poll runs the next pass.
	r.recordsDir, r.restUntil = stampOf(dir), time.Time{}
	entries, err := r.records.List(dir)
	if err != nil {
		// Logged once per error (the key below cannot be a path), not
		// every second.
		if key := "list: " + err.Error(); !r.warned[key] {
			r.warned[key] = true
			r.log().Warn("cannot read the mount records", "dir", dir, "err", err)
		}
		return nil
	}
	held := map[string]bool{}
	for _, p := range r.Plugins {
		reg, ok, err := registration.Read(r.Dir, p)
		held[p] = err == nil && ok && reg.PodUID == r.PodUID
	}
	var results []Result
	var todo []mountrecord.Record
	live := map[string]bool{}
	for _, e := range entries {
		if e.Err != nil {
			if !r.warned[e.Path] {
				r.warned[e.Path] = true
				r.log().Warn("mount record refused", "file", e.Path, "err", e.Err)
			}
			results = append(results, Result{Target: e.Path, Action: "refused", Err: e.Err})
			continue
		}
		if held[e.Record.Plugin] {
			live[e.Record.Target] = true
			todo = append(todo, e.Record)
		}
	}
	// The mount table is read only when there is a record to check: on a
	// node with hundreds of mounts, parsing it every second was most of
	// what the idle daemon allocated (about 0.8 MB/s, BENCHMARKS.md); and
	// then only when it changed since (mountinfo.Table). The records were
	// listed first: a record is written once its mount is made, so the
	// table read or kept here has the mount of every record listed.
	if len(todo) > 0 {
		infoPath := r.mountInfo()
		if r.table == nil {
			r.table = mountinfo.NewTable(infoPath)
		}
		infos, err := r.table.Read()
		if err != nil {
			r.log().Warn("cannot read the mount table", "file", infoPath, "err", err)
			return nil
		}
		states := readStates(dir)
		probe, skip := r.toProbe(dir, mountedTargets(todo, infos), states)
		statAt := r.clock()
		health := r.probeAll(ctx, probe)
		r.noteAnswers(health, infos, statAt)
		for _, rec := range todo {
			if !skip[rec.Target] {
				results = append(results, r.check(ctx, dir, rec, infos, states, health[rec.Target]))
			}
		}
		r.restUntil = r.restingUntil(todo, results)
	}
	for t := range r.state {
		if !live[t] {
			delete(r.state, t)
		}
	}
	for t := range r.answered {
		if !live[t] {
			delete(r.answered, t)
		}
	}
	if r.Answers != nil {
		r.Answers.Retain(func(t string) bool { return live[t] })
	}
	for t := range r.refused {
		if !live[t] {
			delete(r.refused, t)
		}
	}
	removeOrphanStates(dir)
	return results
}

// watcher is [Events] that tell whether a mount's death wakes the
// recoverer ([ScopeEvents.Watches]).
type watcher interface {
	Watches(target string) bool
}

// toProbe returns which of the mounted targets this pass stats, and those
// it leaves until later (no result this pass): in a poll pass with
// [Recoverer.Events] set and no event for [ProbeEvery], a target whose
// daemon's death the events watch, that answered less than ProbeEvery
// ago and has no recovery under way (its back-off state, or a state file
// in states) is left; every other pass stats them all.
func (r *Recoverer) toProbe(dir string, mounted []string, states passStates) (probe []string, skip map[string]bool) {
	now := r.clock()
	if r.woken == "event" {
		r.eventAt = now
	}
	w, ok := r.Events.(watcher)
	if r.woken != "poll" || !ok || now.Sub(r.eventAt) < ProbeEvery {
		return mounted, nil
	}
	skip = map[string]bool{}
	for _, t := range mounted {
		at, ok := r.answered[t]
		if ok && now.Before(r.probeDue(at)) && r.state[t] == nil && w.Watches(t) {
			if _, under := states.of(dir, t); !under {
				skip[t] = true
				continue
			}
		}
		probe = append(probe, t)
	}
	return probe, skip
}

// restingUntil returns until when the poll may run no pass after this one,
// which checked the records todo (of the held plugins) and found results
// (a refused record's too): zero, unless [Recoverer.Events] watch the
// scope of every record's mount, no event came for ProbeEvery, no mount
// has a back-off state (a recovery under way, or not stable yet), each
// record's mount answered its last stat, and every result of this pass
// is healthy (a record whose target is not mounted, or with a state file
// left by a recovery under way, gives another). Then it is when the first of those mounts is due again
// ([Recoverer.probeDue]): until then a poll pass would stat none of them
// ([Recoverer.toProbe]), and find nothing it could do.
func (r *Recoverer) restingUntil(todo []mountrecord.Record, results []Result) time.Time {
	w, ok := r.Events.(watcher)
	now := r.clock()
	if !ok || len(todo) == 0 || len(r.state) > 0 || now.Sub(r.eventAt) < ProbeEvery {
		return time.Time{}
	}
	for _, res := range results {
		if res.Action != "healthy" {
			return time.Time{}
		}
	}
	var until time.Time
	for _, rec := range todo {
		at, answered := r.answered[rec.Target]
		if !answered || !w.Watches(rec.Target) {
			return time.Time{}
		}
		if u := r.probeDue(at); until.IsZero() || u.Before(until) {
			until = u
		}
	}
	return until
}

// resting reports whether the poll may skip its pass now (see
// [Recoverer.RunUntil]).
func (r *Recoverer) resting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clock().Before(r.restUntil) && stampOf(filepath.Join(r.Dir, mountrecord.Dir)) == r.recordsDir
}

// probeDue returns when a poll pass stats again a mount that answered at
// at (see [Recoverer.toProbe]): the first mark of a grid of ProbeEvery
// after at, the grid starting at the recoverer's first answer. Not at +
// ProbeEvery: mounts that answered at different moments (made at
// different moments) are due together, at the grid's marks, so that the
// poll rests between them rather than stat a few at every tick.
func (r *Recoverer) probeDue(at time.Time) time.Time {
	n := at.Sub(r.probeGrid) / ProbeEvery
	if n < 0 {
		n = 0
	}
	return r.probeGrid.Add((n + 1) * ProbeEvery)
}

// noteAnswers keeps that each target of health answered its stat, made
// at now (before the stats, which may take their bound), and forgets
// those that did not; and so do r.Answers, of the mount infos shows last
// at the target (the one the stat reached).
func (r *Recoverer) noteAnswers(health map[string]error, infos []mount.MountInfo, now time.Time) {
	if r.answered == nil {
		r.answered, r.probeGrid = map[string]time.Time{}, now
	}
	for t, err := range health {
		if err == nil {
			r.answered[t] = now
		} else {
			delete(r.answered, t)
		}
		if r.Answers != nil {
			if mi, ok := lastMountAt(infos, t); ok {
				r.Answers.Note(mi, now, err)
			}
		}
	}
}

// mountedTargets returns the targets of recs that infos shows mounted.
func mountedTargets(recs []mountrecord.Record, infos []mount.MountInfo) []string {
	var out []string
	for _, rec := range recs {
		if _, ok := lastMountAt(infos, rec.Target); ok {
			out = append(out, rec.Target)
		}
	}
	return out
}

// check handles one record, whose target's stat answered health when it
// is mounted; states are the pass's state files.
func (r *Recoverer) check(ctx context.Context, dir string, rec mountrecord.Record, infos []mount.MountInfo, states passStates, health error) Result {
	res := Result{Target: rec.Target}
	// A recovery under way (this pod's, or one that an earlier pod did not
	// finish) has left the dead mount's identity in the record's state file.
	unfinished, hasState := states.of(dir, rec.Target)
	mi, mounted := lastMountAt(infos, rec.Target)
	var err error
	switch {
	case mounted && errors.Is(health, errHung):
		res.Action, res.Err = "hung", health
		return res
	case mounted:
		err = health
		if !IsDead(err) {
			res.Action = "healthy"
			if hasState {
				// The node's mount is back; containers may still hold
				// the dead one.
				return r.retryAttach(ctx, dir, rec, unfinished, mi)
			}
			r.forgetIfStable(rec.Target)
			delete(r.refused, rec.Target)
			return res
		}
	case hasState:
		// Detached by a recovery whose remount has not worked yet.
		err = fmt.Errorf("detached; its remount has not worked yet")
	default:
		// Dropped for good: on the table as it is now, not one kept
		// from an earlier pass (mountinfo.Table), whatever a missed
		// change mark would have left in it.
		fresh, err := mountinfo.ParseFile(r.mountInfo())
		if err != nil {
			res.Action, res.Err = "waiting", err
			return res
		}
		if _, now := lastMountAt(fresh, rec.Target); now {
			return r.check(ctx, dir, rec, fresh, states, health)
		}
		res.Action = "dropped"
		if err := mountrecord.Remove(dir, rec.Target); err != nil {
			res.Err = err
		}
		r.log().Info("mount record dropped: its target is no longer mounted", "path", rec.Target, "plugin", rec.Plugin, "err", res.Err)
		return res
	}
	if rec.NotRecoverable != "" {
		res.Action = "not-recoverable"
		if !r.warned[rec.Target] {
			r.warned[rec.Target] = true
			r.observeDead(rec.Plugin)
			r.observeAttempt(rec.Plugin, OutcomeNotRecoverable)
			r.log().Error("FUSE mount is dead and cannot come back by itself", "path", rec.Target, "plugin", rec.Plugin, "why", rec.NotRecoverable, "err", err)
		}
		return res
	}
	if r.Allow != nil {
		if aerr := r.Allow(ctx, rec); aerr != nil {
			return r.refuse(rec, err, aerr)
		}
		delete(r.refused, rec.Target)
	}
	a := r.died(rec)
	if r.clock().Before(a.next) {
		res.Action = "waiting"
		return res
	}
	start := time.Now()
	dead := unfinished
	if !hasState {
		dead = DeadMount{Target: rec.Target}
	}
	if mounted {
		// The dead mount, or the new mount of an unfinished recovery,
		// dead in its turn: containers attached to it before are
		// replaced too.
		if id, ok := identityOf(mi); ok {
			dead = dead.with(id)
		} else {
			r.log().Warn("the dead mount at the target was not made by root: it is mounted again, but no container's mount is taken for it",
				"path", rec.Target, "plugin", rec.Plugin, "fstype", mi.FsType, "source", mi.Source, "superOptions", strings.Join(mi.SuperOptions, ","))
		}
	}
	attached, rerr := r.recover(ctx, dir, rec, dead, !mounted, &res)
	res.Took, res.Attached = time.Since(start), attached
	if errors.Is(rerr, errUnmounted) {
		delete(r.state, rec.Target)
		clearState(dir, rec.Target)
		res.Action = "dropped"
		r.observeAttempt(rec.Plugin, OutcomeUnmounted)
		r.log().Info("a dead mount was unmounted by its volume host during its recovery: left unmounted", "path", rec.Target, "plugin", rec.Plugin)
		return res
	}
	if rerr != nil {
		res.Action, res.Err = "failed", rerr
		r.observeAttempt(rec.Plugin, OutcomeFailed)
		r.failed(rec, a, rerr)
		return res
	}
	a.cameBack = r.clock()
	r.observeAttempt(rec.Plugin, OutcomeRecovered)
	res.Action = "recovered"
	attrs := []any{"path", rec.Target, "plugin", rec.Plugin, "source", rec.Source, "was", err.Error(), "foundBy", r.woken, "took", res.Took.Round(time.Millisecond),
		"remount", res.Remount.Round(time.Millisecond), "attach", res.Attach.Round(time.Millisecond)}
	if len(attached) > 0 {
		// One key for them all: "container" is a container's name.
		mounts := make([]string, len(attached))
		for i, at := range attached {
			mounts[i] = at.String()
		}
		attrs = append(attrs, "attached", mounts)
	}
	r.log().Warn("FUSE mount came back after its daemon died; files open at the time must be reopened", attrs...)
	if r.Reporter != nil {
		r.Reporter.Recovered(rec, res)
	}
	return res
}

// refuse handles a dead mount that Allow refused (why): nothing is done to
// it, and the refusal is logged, observed and reported once until it is
// allowed again. was is what showed it dead.
func (r *Recoverer) refuse(rec mountrecord.Record, was, why error) Result {
	res := Result{Target: rec.Target, Action: "refused", Err: why}
	if r.refused[rec.Target] {
		return res
	}
	r.refused[rec.Target] = true
	// One death, however long it stays refused: once allowed, it is
	// brought back at once, as a first death.
	if a := r.state[rec.Target]; a == nil || !a.cameBack.IsZero() {
		r.state[rec.Target] = &attempt{}
		r.observeDead(rec.Plugin)
	}
	r.observeAttempt(rec.Plugin, OutcomeNotRecoverable)
	r.log().Error("FUSE mount is dead and is not made again: refused; checked again at each pass", "path", rec.Target, "plugin", rec.Plugin, "source", rec.Source,
		"was", was, "err", why)
	if r.Reporter != nil {
		r.Reporter.Refused(rec, why)
	}
	return res
}

// Reporter hears what the recovery does, as it happens; its methods must
// not block.
type Reporter interface {
	// Recovered: rec's mount came back (res says how).
	Recovered(rec mountrecord.Record, res Result)
	// Failed: an attempt to bring rec's mount back failed; the next one is
	// in retryIn.
	Failed(rec mountrecord.Record, attempt int, retryIn time.Duration, err error)
	// Refused: rec's mount is dead and is not made again, because
	// [Recoverer.Allow] refused it (err says why); said once until it is
	// allowed again.
	Refused(rec mountrecord.Record, err error)
}

// failed counts a failed attempt, sets the back-off and logs it.
func (r *Recoverer) failed(rec mountrecord.Record, a *attempt, err error) {
	a.failures++
	base := r.Backoff
	if base <= 0 {
		base = DefaultBackoff
	}
	backoff := min(base<<min(a.failures-1, 16), MaxBackoff)
	a.next = r.clock().Add(backoff)
	r.log().Error("FUSE mount is dead; bringing it back failed", "path", rec.Target, "plugin", rec.Plugin, "source", rec.Source,
		"attempt", a.failures, "retryIn", backoff, "err", err)
	if r.Reporter != nil {
		r.Reporter.Failed(rec, a.failures, backoff, err)
	}
}

// retryAttach attaches the node's mount, node, which is back, in the
// containers that still hold the dead one (their attach failed before, or
// the pod that started the recovery ended first). Once none holds it, the
// state is removed and nothing is attached any more.
func (r *Recoverer) retryAttach(ctx context.Context, dir string, rec mountrecord.Record, dead DeadMount, node mount.MountInfo) Result {
	res := Result{Target: rec.Target, Action: "waiting"}
	a := r.state[rec.Target]
	if a == nil {
		a = &attempt{}
		r.state[rec.Target] = a
	}
	if r.clock().Before(a.next) {
		return res
	}
	start := time.Now()
	dead, err := r.stillHeld(dir, dead.without(deviceOf(node)))
	var attached []Attached
	if err == nil && len(dead.Mounts) > 0 {
		attached, err = r.reattach(ctx, dead)
	}
	res.Took, res.Attached = time.Since(start), attached
	if err != nil {
		res.Action, res.Err = "failed", err
		r.observeAttempt(rec.Plugin, OutcomeFailed)
		r.failed(rec, a, err)
		return res
	}
	a.cameBack = r.clock()
	clearState(dir, rec.Target)
	r.observeAttempt(rec.Plugin, OutcomeRecovered)
	res.Action = "recovered"
	r.log().Warn("FUSE mount is back in every container that used it", "path", rec.Target, "plugin", rec.Plugin, "containers", len(attached))
	return res
}

func (r *Recoverer) reattach(ctx context.Context, dead DeadMount) ([]Attached, error) {
	reattach := r.Reattach
	if reattach == nil {
		reattach = Reattach
	}
	return reattach(ctx, r.procRoot(), dead, dead.Target)
}

func (r *Recoverer) procRoot() string {
	if r.ProcRoot == "" {
		return "/proc"
	}
	return r.ProcRoot
}

func (r *Recoverer) mountInfo() string {
	if r.MountInfo == "" {
		return "/proc/self/mountinfo"
	}
	return r.MountInfo
}

// stillHeld returns dead with only the mounts that some other mount
// namespace still holds, and keeps the state file in step. A dead mount
// that nothing holds is gone for good, and the kernel may hand its device
// number to any mount from then on: it is forgotten, never looked for again.
func (r *Recoverer) stillHeld(dir string, dead DeadMount) (DeadMount, error) {
	held := map[Identity]bool{}
	if len(dead.Mounts) > 0 {
		holders, err := Holders(r.procRoot(), dead.Mounts)
		if err != nil {
			return dead, fmt.Errorf("find what still holds the dead mount: %w", err)
		}
		for _, h := range holders {
			for _, mi := range h.mounts {
				if id, ok := identityOf(mi); ok {
					held[id] = true
				}
			}
			h.Close()
		}
	}
	kept := dead.keep(held)
	if len(kept.Mounts) == len(dead.Mounts) {
		return dead, nil
	}
	return kept, writeState(dir, kept)
}

// mountAt returns the device number of the topmost mount at target in
// this process's mount table.
func (r *Recoverer) mountAt(target string) (Device, error) {
	infos, err := mountinfo.ParseFile(r.mountInfo())
	if err != nil {
		return Device{}, fmt.Errorf("read the mount table: %w", err)
	}
	mi, ok := lastMountAt(infos, target)
	if !ok {
		return Device{}, fmt.Errorf("the new mount at %s is not in the mount table", target)
	}
	return deviceOf(mi), nil
}

// recover detaches the dead mount at rec.Target (unless detached already),
// mounts rec again and attaches the new mount wherever the dead one still
// is. Until it is done, the dead mount's identity is kept in the record's
// state file, so that a later pass, or the next mount pod, carries on; it
// is forgotten as soon as no other mount namespace holds the dead mount.
func (r *Recoverer) recover(ctx context.Context, dir string, rec mountrecord.Record, dead DeadMount, detached bool, res *Result) (attached []Attached, err error) {
	start := time.Now()
	recordPath := filepath.Join(dir, mountrecord.FileName(rec.Target))
	run := r.Command
	if run == nil {
		run = runCommand
	}
	// The volume host removes the record when it unmounts (the kubelet
	// tearing the volume down): a record gone meanwhile means the mount is
	// not wanted any more, and one made anyway is undone.
	gone := func() bool {
		_, err := os.Lstat(recordPath)
		return errors.Is(err, os.ErrNotExist)
	}
	if !detached {
		if err := writeState(dir, dead); err != nil {
			return nil, err
		}
		if out, err := run(ctx, "umount", "-l", rec.Target); err != nil {
			return nil, fmt.Errorf("detach the dead mount: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
	if gone() {
		return nil, errUnmounted
	}
	if r.StopLeftovers != nil {
		stopped, err := r.StopLeftovers(ctx, rec.Target)
		if err != nil {
			return nil, fmt.Errorf("stop what still runs for the dead mount: %w", err)
		}
		if len(stopped) > 0 {
			r.log().Warn("killed what still ran in the dead mount's scope, before mounting it again",
				"path", rec.Target, "plugin", rec.Plugin, "pids", stopped)
		}
	}
	if dead, err = r.stillHeld(dir, dead); err != nil {
		return nil, err
	}
	args := []string{"-t", rec.FSType}
	if len(rec.Options) > 0 {
		args = append(args, "-o", strings.Join(rec.Options, ","))
	}
	args = append(args, rec.Source, rec.Target)
	if out, err := run(ctx, "mount", args...); err != nil {
		return nil, fmt.Errorf("mount %s at %s again: %w: %s", rec.Source, rec.Target, err, strings.TrimSpace(string(out)))
	}
	if gone() {
		if out, err := run(ctx, "umount", rec.Target); err != nil {
			return nil, fmt.Errorf("undo the mount at %s, whose volume host unmounted it meanwhile: %w: %s", rec.Target, err, strings.TrimSpace(string(out)))
		}
		return nil, errUnmounted
	}
	if err := r.probe(ctx, rec.Target); err != nil {
		return nil, fmt.Errorf("the new mount at %s does not answer: %w", rec.Target, err)
	}
	node, err := r.mountAt(rec.Target)
	if err != nil {
		return nil, err
	}
	res.Remount = time.Since(start)
	start = time.Now()
	if dead = dead.without(node); len(dead.Mounts) > 0 {
		attached, err = r.reattach(ctx, dead)
	}
	res.Attach = time.Since(start)
	if err == nil {
		clearState(dir, rec.Target)
	}
	return attached, err
}

// died returns the back-off state of rec's dead mount, and counts a new
// death. The first death is tried at once; a mount that dies again within
// StableAfter of coming back is flapping: that counts as a failed attempt,
// with the same back-off.
func (r *Recoverer) died(rec mountrecord.Record) *attempt {
	a := r.state[rec.Target]
	switch {
	case a == nil:
		a = &attempt{}
		r.state[rec.Target] = a
	case a.cameBack.IsZero():
		return a // the same death
	case r.clock().Sub(a.cameBack) >= StableAfter:
		*a = attempt{}
	default:
		up := r.clock().Sub(a.cameBack).Round(time.Millisecond)
		a.cameBack = time.Time{}
		r.observeDead(rec.Plugin)
		r.failed(rec, a, fmt.Errorf("it died again %s after it came back", up))
		return a
	}
	r.observeDead(rec.Plugin)
	return a
}

// forgetIfStable drops target's back-off state once its mount is up and
// has been for StableAfter since it came back (or was not brought back by
// this recoverer).
func (r *Recoverer) forgetIfStable(target string) {
	if a := r.state[target]; a == nil || a.cameBack.IsZero() || r.clock().Sub(a.cameBack) >= StableAfter {
		delete(r.state, target)
	}
}

func (r *Recoverer) clock() time.Time {
	if r.now == nil {
		return time.Now()
	}
	return r.now()
}

// errUnmounted: the record went away during a recovery.
var errUnmounted = errors.New("unmounted by its volume host meanwhile")

// lastMountAt returns the topmost mount at target in infos, whose mount
// points are decoded ([mountinfo.ParseFile]).
func lastMountAt(infos []mount.MountInfo, target string) (mount.MountInfo, bool) {
	var found mount.MountInfo
	ok := false
	for _, mi := range infos {
		if mi.MountPoint == target {
			found, ok = mi, true
		}
	}
	return found, ok
}

// IsDead reports whether err, from a stat of a FUSE mount, says the mount's
// daemon is gone: ENOTCONN ("transport endpoint is not connected"),
// ECONNABORTED, EIO or ESTALE.
func IsDead(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EIO) || errors.Is(err, syscall.ESTALE)
}

func runCommand(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	// The FUSE daemon mount(8) starts may keep inherited pipes open: a
	// bounded wait for their end, then what they hold.
	var out bytes.Buffer
	_, err := outpipe.Run(func() *exec.Cmd { return exec.CommandContext(ctx, name, args...) }, &out, &out, outputGrace, nil, nil)
	return out.Bytes(), err
}

// outputGrace is how long runCommand waits for the end of a command's
// output after it exited.
const outputGrace = time.Second
