package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// errHung: a mount's stat did not answer within the bound, or an earlier
// stat of it still has not. A hung mount is neither healthy nor dead: it is
// left alone.
var errHung = errors.New("no answer")

// probeAll stats each of paths, all at once, and returns what each
// answered. Each stat runs in a goroutine of its own, one at most per path:
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
	c := make(chan error, 1)
	go func() {
		err := stat(ctx, path)
		r.probeMu.Lock()
		delete(r.probing, path)
		r.probeMu.Unlock()
		c <- err
	}()
	return c, true
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
