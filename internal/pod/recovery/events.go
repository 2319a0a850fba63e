package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// Events wakes a [Recoverer] as soon as something may have died, rather
// than at its next poll.
type Events interface {
	// C receives a value when a pass should run now.
	C() <-chan struct{}
	// Refresh is called after every pass: the set of things to watch may
	// have changed.
	Refresh()
}

// ScopeEvents watches the cgroup v2 "cgroup.events" file of every scope of
// its plugins: the kernel rewrites it ("populated 0") when the scope's
// last process, the FUSE daemon, exits, and C receives a value then (and
// for no other rewrite of the file). The mount pod runs two: one wakes the
// [Recoverer], the other the keeper of live mounts (package livemount),
// which removes the scope of a volume that was unmounted. Both backends'
// scopes have the file where there is a cgroup2 hierarchy (cgroup v2, or
// hybrid; the systemd backend's are its units' cgroups, which systemd
// removes once empty, so there a removal is news too). Where there is none
// (cgroup v1 only) [NewScopeEvents] fails with [ErrNoScopeEvents] and the
// Recoverer's poll finds dead mounts alone.
type ScopeEvents struct {
	scopes  scope.EventSource
	plugins []string
	// removalIsExit: the source's scopes go by themselves once empty
	// (scope.RemovalIsExit).
	removalIsExit bool
	w             *fsnotify.Watcher
	c             chan struct{}
	done          chan struct{}

	// Logger, when set, gets a line whenever the set of watched files
	// changes, and the watcher's errors.
	Logger *slog.Logger

	mu sync.Mutex
	// watched maps each watched file to the file it was when watched: a
	// scope made again at the same path (a systemd unit, removed once
	// empty and made again by the remount) is another file, and kernfs
	// does not tell inotify that the old one went.
	watched map[string]fileID
	// dirs are the plugins' scope directories (EventDir) whose entries
	// are watched: a scope made or removed there marks the set of files
	// to watch changed (dirty), and made names the scopes made since the
	// last Refresh, whose files are looked at again. A Refresh with
	// every directory watched and nothing changed lists nothing, but for
	// one every fullRefresh in any case.
	dirs     map[string]bool
	dirty    bool
	made     map[string]bool
	lastFull time.Time
	// names are the scopes that emptied since the last [ScopeEvents.Emptied],
	// kept once it was first called (the keeper's events never are).
	track bool
	names map[string]bool
}

// ErrNoScopeEvents: the scopes of the manager report nothing (cgroup v1
// only); dead mounts are found by polling.
var ErrNoScopeEvents = errors.New("the scopes give no cgroup events (a cgroup2 hierarchy only: cgroup v2 or hybrid)")

// NewScopeEvents starts watching the scopes of plugins; Close stops it.
// It fails with [ErrNoScopeEvents] when m's scopes report nothing. log may
// be nil.
func NewScopeEvents(m scope.Manager, plugins []string, log *slog.Logger) (*ScopeEvents, error) {
	src, ok := scope.EventsOf(m)
	if !ok {
		return nil, fmt.Errorf("%s backend: %w", m.Backend(), ErrNoScopeEvents)
	}
	return newScopeEvents(src, plugins, log)
}

func newScopeEvents(src scope.EventSource, plugins []string, log *slog.Logger) (*ScopeEvents, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	e := &ScopeEvents{scopes: src, plugins: plugins, w: w, c: make(chan struct{}, 1), done: make(chan struct{}),
		watched: map[string]fileID{}, dirs: map[string]bool{}, made: map[string]bool{}, Logger: log}
	if r, ok := src.(scope.RemovalIsExit); ok {
		e.removalIsExit = r.RemovalIsExit()
	}
	go e.loop()
	e.Refresh()
	return e, nil
}

func (e *ScopeEvents) loop() {
	defer close(e.done)
	for {
		select {
		case ev, ok := <-e.w.Events:
			if !ok {
				return
			}
			if e.dirEvent(ev) {
				continue
			}
			removed := ev.Has(fsnotify.Remove)
			if removed {
				// The scope went (and the watch with it): the next
				// Refresh watches it again if it comes back.
				e.mu.Lock()
				delete(e.watched, ev.Name)
				e.mu.Unlock()
			}
			// Only a death is news: the file is rewritten for other
			// changes too (a process joining the scope). A cgroupfs
			// scope is removed only once it was empty, which woke us
			// then; systemd removes a unit's cgroup itself once it is
			// empty, maybe before the rewrite could be read.
			if (ev.Has(fsnotify.Write) && emptied(ev.Name)) || (removed && e.removalIsExit) {
				e.mu.Lock()
				if e.track {
					// The scope's name: its directory's, without the
					// unit suffix of a systemd scope.
					e.names[strings.TrimSuffix(filepath.Base(filepath.Dir(ev.Name)), ".scope")] = true
				}
				e.mu.Unlock()
				select {
				case e.c <- struct{}{}:
				default: // a pass is due already
				}
			}
		case err, ok := <-e.w.Errors:
			if !ok {
				return
			}
			if e.Logger != nil {
				e.Logger.Warn("watching the scopes' cgroup events", "err", err)
			}
		}
	}
}

// dirEvent notes an event of a watched scope directory or of one of its
// entries, and reports whether ev was one: a scope made or removed
// there, or the directory itself removed, marks the set of files to
// watch changed; the kernel's rewrites of the directory's own files
// (its cgroup.events among them) are nothing here.
func (e *ScopeEvents) dirEvent(ev fsnotify.Event) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.dirs[ev.Name]:
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			delete(e.dirs, ev.Name)
			e.dirty = true
		}
		return true
	case e.dirs[filepath.Dir(ev.Name)]:
		if ev.Has(fsnotify.Create) {
			e.made[ev.Name] = true
			e.dirty = true
		}
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			e.dirty = true
		}
		return true
	}
	return false
}

// fullRefresh is how often a Refresh lists the scopes and looks at every
// watched file again whatever its directories' watches said.
const fullRefresh = time.Minute

// C implements [Events].
func (e *ScopeEvents) C() <-chan struct{} { return e.c }

// Emptied returns the names of the scopes (scope.Name of their mounts'
// targets) that emptied since its last call, and forgets them. Its first
// call starts keeping them: it returns none then, and a caller must take
// none to mean "unknown".
func (e *ScopeEvents) Emptied() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.track {
		e.track, e.names = true, map[string]bool{}
		return nil
	}
	out := make([]string, 0, len(e.names))
	for n := range e.names {
		out = append(out, n)
	}
	clear(e.names)
	return out
}

// Refresh watches the cgroup.events of every scope there is now, and
// forgets those of scopes that are gone. It runs after every pass of the
// recovery: it lists the scopes' directories only when a scope was made
// or removed there since (their entries are watched), or when one of
// them is not watched yet, or once every fullRefresh; and it looks again
// only at the files of scopes made since, and at files not watched yet.
func (e *ScopeEvents) Refresh() {
	e.mu.Lock()
	full := time.Since(e.lastFull) >= fullRefresh
	if !full && !e.dirty && len(e.dirs) == len(e.plugins) {
		e.mu.Unlock()
		return
	}
	if full {
		e.lastFull = time.Now()
	}
	made := e.made
	e.made, e.dirty = map[string]bool{}, false
	e.mu.Unlock()

	// The directories first: a scope made after its directory is watched
	// is reported, and one made before it is in the listing below.
	var dirErr error
	for _, p := range e.plugins {
		dir, err := e.scopes.EventDir(p)
		if err != nil {
			dirErr = err
			continue
		}
		e.mu.Lock()
		watching := e.dirs[dir]
		e.mu.Unlock()
		if watching {
			continue
		}
		if err := e.w.Add(dir); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				dirErr = err
			}
			continue // no scope yet: listed at each Refresh until there is
		}
		e.mu.Lock()
		e.dirs[dir] = true
		e.mu.Unlock()
	}
	now := map[string]bool{}
	var listErr error
	for _, p := range e.plugins {
		files, err := e.scopes.EventFiles(p)
		if err != nil {
			listErr = err
			continue
		}
		for _, f := range files {
			now[f] = true
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	before := len(e.watched)
	var addErr error
	for f := range now {
		if _, ok := e.watched[f]; ok && !full && !made[filepath.Dir(f)] {
			continue // watched, and its scope not made again since
		}
		id, err := idOf(f)
		if err != nil {
			continue // a scope removed since the listing: no error
		}
		old, ok := e.watched[f]
		if ok && old == id {
			continue
		}
		if ok {
			// The scope was made again: drop the old file's watch.
			_ = e.w.Remove(f)
			delete(e.watched, f)
		}
		if err := e.w.Add(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			addErr = err
		} else if err == nil {
			e.watched[f] = id
		}
	}
	if addErr != nil || listErr != nil || dirErr != nil {
		e.dirty = true // again at the next Refresh
	}
	defer func() {
		if e.Logger != nil && (len(e.watched) != before || addErr != nil || listErr != nil || dirErr != nil) {
			e.Logger.Info("watching the scopes' cgroup events", "files", len(e.watched), "dirs", len(e.dirs), "listErr", listErr, "addErr", addErr, "dirErr", dirErr)
		}
	}()
	for f := range e.watched {
		if !now[f] {
			if err := e.w.Remove(f); err != nil && !errors.Is(err, fsnotify.ErrNonExistentWatch) {
				continue
			}
			delete(e.watched, f)
		}
	}
}

// fileID tells one file from another at the same path.
type fileID struct{ dev, ino uint64 }

func idOf(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), st.Ino}, nil
}

// Watched returns how many files are watched.
func (e *ScopeEvents) Watched() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.watched)
}

// Close stops watching.
func (e *ScopeEvents) Close() error {
	err := e.w.Close()
	<-e.done
	return err
}

// emptied reports whether the cgroup.events file at path says the cgroup
// has no process left. A file that cannot be read (the scope is being
// removed) is not news: the removal was someone's pass already.
func emptied(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "populated 0" {
			return true
		}
	}
	return false
}
