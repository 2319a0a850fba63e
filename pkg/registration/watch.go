package registration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// DefaultDebounce is how long the directory must stay quiet before a
	// burst of changes is reported.
	DefaultDebounce = 100 * time.Millisecond
	// DefaultMaxDelay bounds how long a change waits under continuous
	// change: at most one report per MaxDelay, as the kubelet's Flexvolume
	// prober does.
	DefaultMaxDelay = time.Second

	// eventBuffer is how many events fsnotify may queue for the watcher.
	eventBuffer = 1024
)

// WatchOptions tunes [Watch]. The zero value gives the defaults.
type WatchOptions struct {
	// Debounce is the quiet period that ends a burst (DefaultDebounce).
	Debounce time.Duration
	// MaxDelay is the longest a change is held back (DefaultMaxDelay).
	MaxDelay time.Duration
	// Logger receives fsnotify errors and rescans (slog.Default()).
	Logger *slog.Logger
}

// Event says that the registration of Plugin may have changed: it was
// created, overwritten or removed. Read it again to learn its state.
type Event struct {
	// Plugin is the plugin whose file changed.
	Plugin string
}

// Watch reports changes to the registrations in dir until ctx is done, when
// the returned channel is closed. The parent of dir must exist; dir itself
// may be missing, removed or created again at any time. Events of one burst
// are coalesced: each plugin is reported once per batch, in name order.
func Watch(ctx context.Context, dir string, opts WatchOptions) (<-chan Event, error) {
	w, err := newWatcher(dir, opts)
	if err != nil {
		return nil, err
	}
	go w.run(ctx)
	return w.out, nil
}

func newWatcher(dir string, opts WatchOptions) (*watcher, error) {
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.MaxDelay < opts.Debounce {
		opts.MaxDelay = opts.Debounce
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dir = filepath.Clean(dir)
	// A buffer lets fsnotify queue a burst while the watcher sleeps.
	fw, err := fsnotify.NewBufferedWatcher(eventBuffer)
	if err != nil {
		return nil, fmt.Errorf("watch registrations in %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if err := fw.Add(parent); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watch registrations in %s: watch parent %s: %w", dir, parent, err)
	}
	w := &watcher{
		dir:     dir,
		opts:    opts,
		fw:      fw,
		known:   map[string]bool{},
		pending: map[string]bool{},
		out:     make(chan Event, 16),
	}
	w.addDir()
	for _, p := range w.scan() {
		w.known[p] = true
	}
	return w, nil
}

type watcher struct {
	dir  string
	opts WatchOptions
	fw   *fsnotify.Watcher
	// known holds every plugin seen, so that a rescan can report the ones
	// whose files vanished.
	known   map[string]bool
	pending map[string]bool
	// first is when the oldest pending change arrived.
	first time.Time
	out   chan Event
}

// addDir (re)adds the watch on dir; a missing dir is fine, the parent watch
// sees it come back.
func (w *watcher) addDir() {
	if err := w.fw.Add(w.dir); err != nil && !isNotExist(err) {
		w.opts.Logger.Warn("cannot watch registration directory", "dir", w.dir, "err", err)
	}
}

// scan lists the plugins that have a registration file now.
func (w *watcher) scan() []string {
	entries, err := List(w.dir)
	if err != nil {
		w.opts.Logger.Warn("cannot list registration directory", "dir", w.dir, "err", err)
	}
	var plugins []string
	for _, e := range entries {
		if e.Plugin != "" {
			plugins = append(plugins, e.Plugin)
		}
	}
	return plugins
}

// rescan marks every known and present plugin pending.
func (w *watcher) rescan() {
	for _, p := range w.scan() {
		w.known[p] = true
	}
	for p := range w.known {
		w.mark(p)
	}
}

func (w *watcher) mark(plugin string) {
	if len(w.pending) == 0 {
		w.first = time.Now()
	}
	w.pending[plugin] = true
	w.known[plugin] = true
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	defer w.fw.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		// Idle: block until something happens.
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			w.handleError(err)
		}
		// Collecting: rather than waking up for every event of a burst,
		// sleep a debounce period at a time and take what queued up
		// meanwhile, until a period passes quietly or MaxDelay is reached.
		// Under a storm this reads the queue a few times per MaxDelay
		// instead of once per event.
		for {
			timer.Reset(w.opts.Debounce)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			n, ok := w.drain()
			if !ok {
				return
			}
			if n == 0 || time.Since(w.first) >= w.opts.MaxDelay {
				break
			}
		}
		if len(w.pending) > 0 && !w.flush(ctx) {
			return
		}
	}
}

// drain handles every event and error queued now, without waiting, and
// returns how many there were; ok is false when the watcher was closed.
func (w *watcher) drain() (n int, ok bool) {
	for {
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return n, false
			}
			w.handle(ev)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return n, false
			}
			w.handleError(err)
		default:
			return n, true
		}
		n++
	}
}

func (w *watcher) handleError(err error) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		w.opts.Logger.Warn("registration watch overflowed, rescanning", "dir", w.dir)
	} else {
		w.opts.Logger.Warn("registration watch error, rescanning", "dir", w.dir, "err", err)
	}
	w.addDir()
	w.rescan()
}

func (w *watcher) handle(ev fsnotify.Event) {
	name := filepath.Clean(ev.Name)
	switch {
	case name == w.dir:
		// The directory itself appeared, vanished or was replaced (seen
		// through the parent watch or its own).
		if ev.Has(fsnotify.Create) {
			w.addDir()
		}
		w.rescan()
	case filepath.Dir(name) == w.dir:
		base := filepath.Base(name)
		if strings.HasPrefix(base, ".") {
			return
		}
		if plugin, err := PluginFromFileName(base); err == nil {
			w.mark(plugin)
		}
	}
}

// flush sends the pending events; false when ctx ended.
func (w *watcher) flush(ctx context.Context) bool {
	plugins := make([]string, 0, len(w.pending))
	for p := range w.pending {
		plugins = append(plugins, p)
	}
	clear(w.pending)
	sort.Strings(plugins)
	for _, p := range plugins {
		select {
		case w.out <- Event{Plugin: p}:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
