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
	source  scope.EventSource
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
	// scopes maps the name of each watched file's scope (scope.Name of
	// its mount's target) to the file.
	scopes map[string]string
	// dirs are the plugins' scope directories (EventDir) whose entries
	// are watched, each with the directory it was when watched (kernfs
	// reports no removal of a watched cgroup directory: one removed and
	// made again is found by its identity, at every Refresh). A scope
	// made or removed there marks the set of files to watch changed
	// (dirty), and made names the scopes made since the last Refresh,
	// whose files are looked at again. A Refresh with every directory
	// watched, as it was, and nothing changed lists nothing, but for one
	// every fullRefresh in any case.
	dirs      map[string]fileID
	dirty     bool
	made      map[string]bool
	lastFull  time.Time
	fullEvery time.Duration // fullRefresh; a test's own
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
	e := &ScopeEvents{source: src, plugins: plugins, w: w, c: make(chan struct{}, 1), done: make(chan struct{}),
		watched: map[string]fileID{}, scopes: map[string]string{}, dirs: map[string]fileID{}, made: map[string]bool{}, fullEvery: fullRefresh, Logger: log}
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
				e.unwatched(ev.Name)
				e.mu.Unlock()
			}
			// Only a death is news: the file is rewritten for other
			// changes too (a process joining the scope). A cgroupfs
			// scope is removed only once it was empty, which woke us
			// then; systemd removes a unit's cgroup itself once it is
			// empty, maybe before the rewrite could be read.
			if (ev.Has(fsnotify.Write) && emptied(ev.Name)) || (removed && e.removalIsExit) {
				e.mu.Lock()
				e.exited(filepath.Dir(ev.Name))
				e.mu.Unlock()
			}
		case err, ok := <-e.w.Errors:
			if !ok {
				return
			}
			// Events may have been lost (the queue overflowed): the
			// next Refresh lists and looks at everything.
			e.mu.Lock()
			e.dirty, e.lastFull = true, time.Time{}
			e.mu.Unlock()
			if e.Logger != nil {
				e.Logger.Warn("watching the scopes' cgroup events", "err", err)
			}
		}
	}
}

// exited notes that the scope whose directory is dir lost its last
// process, and wakes the recoverer; e.mu is held.
func (e *ScopeEvents) exited(dir string) {
	if e.track {
		e.names[scopeName(dir)] = true
	}
	select {
	case e.c <- struct{}{}:
	default: // a pass is due already
	}
}

// scopeName returns the name of the scope whose directory is dir: its
// base name, without the unit suffix of a systemd scope (scope.Name of
// its mount's target).
func scopeName(dir string) string {
	return strings.TrimSuffix(filepath.Base(dir), ".scope")
}

// dirEvent notes an event of a watched scope directory or of one of its
// entries, and reports whether ev was one: a scope made or removed
// there, or the directory itself removed, marks the set of files to
// watch changed; a scope removed is an exit too where removal is one
// (systemd's units: the kernel reports no removal of the watched file
// inside a cgroup, only its parent's entry going); the kernel's rewrites
// of the directory's own files (its cgroup.events among them) are
// nothing here.
func (e *ScopeEvents) dirEvent(ev fsnotify.Event) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	gone := ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)
	if _, ok := e.dirs[ev.Name]; ok {
		if gone {
			delete(e.dirs, ev.Name)
			e.dirty = true
		}
		return true
	}
	if _, ok := e.dirs[filepath.Dir(ev.Name)]; !ok {
		return false
	}
	if ev.Has(fsnotify.Create) {
		e.made[ev.Name] = true
		e.dirty = true
	}
	if gone {
		e.dirty = true
		if e.removalIsExit {
			if _, ok := e.scopes[scopeName(ev.Name)]; ok {
				e.exited(ev.Name)
			}
		}
	}
	return true
}

// watch and unwatched keep e.watched and e.scopes together; e.mu is
// held.
func (e *ScopeEvents) watch(file string, id fileID) {
	e.watched[file] = id
	e.scopes[scopeName(filepath.Dir(file))] = file
}

func (e *ScopeEvents) unwatched(file string) {
	delete(e.watched, file)
	if name := scopeName(filepath.Dir(file)); e.scopes[name] == file {
		delete(e.scopes, name)
	}
}

// Watches reports whether the death of the daemon of the mount at target
// wakes the recoverer: its scope's file is watched.
func (e *ScopeEvents) Watches(target string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.scopes[scope.Name(target)]
	return ok
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
// recovery: it stats each scope directory (one removed and made again is
// watched anew), and lists them only when a scope was made or removed
// there since (their entries are watched), or when one of them is not
// watched yet or was made again, or when the watcher reported an error
// (events lost), or once every fullRefresh; and it looks again only at
// the files of scopes made since, and at files not watched yet.
func (e *ScopeEvents) Refresh() {
	// The directories first: a scope made after its directory is watched
	// is reported, and one made before it is in the listing below.
	var dirErr error
	for _, p := range e.plugins {
		dir, err := e.source.EventDir(p)
		if err != nil {
			dirErr = err
			continue
		}
		id, err := idOf(dir)
		e.mu.Lock()
		old, watching := e.dirs[dir]
		if watching && (err != nil || old != id) {
			// Removed, or removed and made again, unreported; and so
			// were the scopes in it, which a scope of the same name
			// in the new one does not tell: every file is looked at.
			_ = e.w.Remove(dir)
			delete(e.dirs, dir)
			watching, e.dirty, e.lastFull = false, true, time.Time{}
		}
		if watching || err != nil {
			e.mu.Unlock()
			continue // watched, or none yet: listed at each Refresh until there is
		}
		// Marked before it is watched, so that an event of it in between
		// is one of the directory's.
		e.dirs[dir], e.dirty = id, true
		e.mu.Unlock()
		if err := e.w.Add(dir); err != nil {
			e.mu.Lock()
			delete(e.dirs, dir)
			e.mu.Unlock()
			if !errors.Is(err, fs.ErrNotExist) {
				dirErr = err
			}
		}
	}
	e.mu.Lock()
	full := time.Since(e.lastFull) >= e.fullEvery
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

	now := map[string]bool{}
	var listErr error
	for _, p := range e.plugins {
		files, err := e.source.EventFiles(p)
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
			e.unwatched(f)
		}
		if err := e.w.Add(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			addErr = err
		} else if err == nil {
			e.watch(f, id)
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
			e.unwatched(f)
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
