package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// errHung: a mount's stat did not answer within the bound, or an earlier
// stat of it still has not. A hung mount is neither healthy nor dead: it is
// left alone.
var errHung = errors.New("no answer")

// probeAll stats each of paths, at most [probesAtOnce] at a time within the
// pass's bound, and returns what each answered. A stat that finds no place
// before the bound passes answers errHung, as a late one does. Each stat
// runs in a goroutine of its own, one at most per path:
// a path whose earlier stat has not returned yet is not stat again and
// answers errHung at once, as does one whose stat does not answer within
// the bound (its goroutine is left to finish, and is the one at most).
func (r *Recoverer) probeAll(ctx context.Context, paths []string) map[string]error {
	ctx, cancel := context.WithTimeout(ctx, r.statTimeout())
	defer cancel()
	answers := make(map[string]<-chan error, len(paths))
	out := make(map[string]error, len(paths))
	for _, p := range paths {
		if c, ok := r.startProbe(ctx, p); ok {
			answers[p] = c
		} else {
			out[p] = fmt.Errorf("stat %s: %w: an earlier stat has not returned yet", p, errHung)
		}
	}
	for p, c := range answers {
		select {
		case err := <-c:
			out[p] = err
		case <-ctx.Done():
			out[p] = late(c, fmt.Errorf("stat %s: %w within %s", p, errHung, r.statTimeout()))
		}
	}
	return out
}

// late returns the answer on c if it is there already, else hung: once
// the bound has passed, the answers that came in time still count.
func late(c <-chan error, hung error) error {
	select {
	case err := <-c:
		return err
	default:
		return hung
	}
}

// probe stats path as [Recoverer.probeAll] does.
func (r *Recoverer) probe(ctx context.Context, path string) error {
	return r.probeAll(ctx, []string{path})[path]
}

// startProbe starts a stat of path and returns where its answer will be,
// unless a stat of path is still outstanding.
func (r *Recoverer) startProbe(ctx context.Context, path string) (<-chan error, bool) {
	r.probeMu.Lock()
	defer r.probeMu.Unlock()
	if r.probing[path] {
		return nil, false
	}
	if r.probing == nil {
		r.probing = map[string]bool{}
	}
	r.probing[path] = true
	stat := r.stat
	if stat == nil {
		stat = osStat
	}
	if r.probeSlots == nil {
		r.probeSlots = make(chan struct{}, probesAtOnce)
	}
	slots := r.probeSlots
	c := make(chan error, 1)
	go func() {
		err := statInTurn(ctx, slots, stat, path)
		r.probeMu.Lock()
		delete(r.probing, path)
		r.probeMu.Unlock()
		c <- err
	}()
	return c, true
}

// probesAtOnce bounds the stats of a Recoverer under way at once within
// their pass's bound. A stat of a FUSE mount waits in the kernel until its
// daemon answers, and a wait in a system call holds an OS thread, which Go
// keeps, idle, for the rest of the process's life: stats of a hundred
// mounts at once, while a hundred new daemons start, were the most
// frequent place where the mount pod's threads blocked through a wave of
// mounts, after which it kept about 90 threads (BENCHMARKS.md, "A node
// under load"). A stat still under way when its pass's bound passes gives
// its place up (its mount is hung, left alone, as before).
const probesAtOnce = 8

// statInTurn waits for a place among slots, then stats path; the place is
// given up when the stat returns or ctx ends, whichever is first. A place
// not had before ctx ends is a stat that did not answer in time.
func statInTurn(ctx context.Context, slots chan struct{}, stat func(context.Context, string) error, path string) error {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("stat %s: %w: its turn did not come within the bound", path, errHung)
	}
	var once sync.Once
	giveUp := func() { once.Do(func() { <-slots }) }
	stop := context.AfterFunc(ctx, giveUp)
	defer func() {
		stop()
		giveUp()
	}()
	return stat(ctx, path)
}

func (r *Recoverer) statTimeout() time.Duration {
	if r.statLimit <= 0 {
		return StatTimeout
	}
	return r.statLimit
}

func osStat(_ context.Context, path string) error {
	_, err := os.Stat(path)
	return err
}
