package registrar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	// retryMin and retryMax bound the back-off of a failed write.
	retryMin = time.Second
	retryMax = 30 * time.Second
	// dirMode is the mode of a registration directory the daemon creates.
	dirMode = 0o755
)

// Daemon keeps a mount pod's registrations in place. Create it with [New]
// and call [Daemon.Run] once.
type Daemon struct {
	cfg Config
	log *slog.Logger

	// registered is closed once every registration has been written and
	// the watch is running.
	registered chan struct{}

	mu sync.Mutex
	// yielded holds, for each plugin taken over by another pod, the
	// registration that took it.
	yielded map[string]registration.Registration
	// failing holds the plugins whose last write failed, to retry.
	failing map[string]bool
	// reads and writes count registration reads and writes, for tests.
	reads, writes int
}

// New validates cfg and returns a daemon for it.
func New(cfg Config) (*Daemon, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	return &Daemon{
		cfg:        cfg,
		log:        cfg.Logger.With("pod", cfg.Pod.PodNamespace+"/"+cfg.Pod.PodName, "podUID", cfg.Pod.PodUID, "container", cfg.Pod.ContainerName),
		registered: make(chan struct{}),
		yielded:    map[string]registration.Registration{},
		failing:    map[string]bool{},
	}, nil
}

// Registered is closed once [Daemon.Run] has written every registration and
// is watching the directory.
func (d *Daemon) Registered() <-chan struct{} { return d.registered }

// Yielded returns the plugins that another pod has taken over, with the
// registration that took each one.
func (d *Daemon) Yielded() map[string]registration.Registration {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]registration.Registration, len(d.yielded))
	for p, r := range d.yielded {
		out[p] = r
	}
	return out
}

// Run checks the required tools, registers every plugin and keeps the
// registrations in place until ctx ends; it then removes those that still
// name this pod and returns nil. It returns a [*MissingToolsError] without
// registering anything if a tool is missing, and an error if a registration
// cannot be written at start or the directory is found deleted from under
// its mount.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.prepare(); err != nil {
		return err
	}
	// The watch starts before the first write, so that no change after it
	// goes unseen.
	events, stopWatch, err := d.startWatch(ctx)
	if err != nil {
		return err
	}
	defer stopWatch()
	if err := d.registerAll(); err != nil {
		return err
	}
	close(d.registered)
	d.log.Info("serving", "plugins", d.cfg.Plugins, "dir", d.cfg.Dir)
	runErr := d.keep(ctx, events)
	stopWatch()
	if err := d.removeOwned(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	return runErr
}

// prepare checks the required tools and creates the registration
// directory.
func (d *Daemon) prepare() error {
	if err := checkTools(d.cfg); err != nil {
		return err
	}
	if len(d.cfg.RequiredTools) > 0 {
		d.log.Info("required tools present", "tools", d.cfg.RequiredTools)
	}
	if os.Getpid() == 1 {
		d.log.Warn("running as PID 1: orphans of daemonizing utilities will not be reaped; run under an init such as tini")
	}
	if err := os.MkdirAll(d.cfg.Dir, dirMode); err != nil {
		return fmt.Errorf("create registration directory: %w", err)
	}
	return nil
}

// startWatch starts watching the registration files of the configured
// plugins. The returned stop function ends the watch and waits for it; it
// may be called more than once.
func (d *Daemon) startWatch(ctx context.Context) (<-chan batch, func(), error) {
	files := map[string]string{}
	for _, p := range d.cfg.Plugins {
		name, _ := registration.FileName(p)
		files[name] = p
	}
	w, err := newDirWatch(d.cfg.Dir, files, d.cfg.Debounce, d.cfg.MaxDelay)
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	events := make(chan batch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(wctx, events)
	}()
	return events, func() {
		cancel()
		<-done
	}, nil
}

// registerAll writes every registration. If one fails, it removes those
// already written and returns the error: a pod that cannot register every
// plugin crash-loops rather than serve half.
func (d *Daemon) registerAll() error {
	for _, p := range d.cfg.Plugins {
		if err := d.write(p, "registered"); err != nil {
			d.removeOwned()
			return err
		}
	}
	return nil
}

// keep keeps the registrations in place until ctx ends: it reconciles the
// plugins the watch reports, every plugin at each resync, and the failing
// ones with back-off. It returns an error when the watch ends unexpectedly
// or the directory is found deleted from under its mount.
func (d *Daemon) keep(ctx context.Context, events <-chan batch) error {
	r := newRetrier()
	defer r.stop()
	resync := time.NewTicker(d.cfg.ResyncPeriod)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case b, ok := <-events:
			if !ok {
				if ctx.Err() == nil {
					return errors.New("registration watch ended unexpectedly")
				}
				return nil
			}
			if err := d.handle(b); err != nil {
				return err
			}
		case <-r.timer.C:
			r.fired()
			for _, p := range d.failingPlugins() {
				d.reconcile(p)
			}
		case <-resync.C:
			if err := d.handle(batch{all: true}); err != nil {
				return err
			}
		}
		r.update(len(d.failingPlugins()) > 0)
	}
}

// handle reconciles the plugins of b, after checking that the directory is
// still linked when b concerns it as a whole.
func (d *Daemon) handle(b batch) error {
	if b.all {
		if err := checkDirLinked(d.cfg.Dir); err != nil {
			return err
		}
	}
	for _, p := range d.cfg.Plugins {
		if b.all || b.plugins[p] {
			d.reconcile(p)
		}
	}
	return nil
}

// retrier times the retries of failed writes with exponential back-off:
// its timer runs while some plugin's last write failed.
type retrier struct {
	timer   *time.Timer
	armed   bool
	backoff time.Duration
}

func newRetrier() *retrier {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &retrier{timer: t, backoff: retryMin}
}

// fired records that the timer fired and doubles the next wait.
func (r *retrier) fired() {
	r.armed = false
	r.backoff = min(2*r.backoff, retryMax)
}

// update arms the timer while some write fails, and resets it and the
// back-off once none does.
func (r *retrier) update(failing bool) {
	switch {
	case !failing:
		r.timer.Stop()
		r.armed, r.backoff = false, retryMin
	case !r.armed:
		r.timer.Reset(r.backoff)
		r.armed = true
	}
}

func (r *retrier) stop() { r.timer.Stop() }

// reconcile reads the registration of plugin and repairs it if needed.
func (d *Daemon) reconcile(plugin string) {
	d.mu.Lock()
	other, yielded := d.yielded[plugin]
	d.reads++
	d.mu.Unlock()
	r, ok, err := registration.Read(d.cfg.Dir, plugin)
	if yielded && d.reconcileYielded(plugin, other, r, ok, err) {
		return
	}
	switch {
	case err != nil:
		d.log.Warn("registration is unreadable, restoring it", "plugin", plugin, "err", err)
		d.write(plugin, "restored")
	case !ok:
		d.log.Warn("registration was removed, re-creating it", "plugin", plugin)
		d.write(plugin, "re-created")
	case r == d.cfg.Pod:
		d.setFailing(plugin, false)
	case r.SamePod(d.cfg.Pod):
		// Only this pod writes registrations naming it; one that
		// advertises another exec socket or batch program is stale or
		// tampered with.
		d.log.Warn("registration names this pod with another exec socket or batch program, restoring it", "plugin", plugin, "execSocket", r.ExecSocket, "execBatch", r.ExecBatch)
		d.write(plugin, "restored")
	default:
		d.yield(plugin, r)
	}
}

// yield stops asserting plugin, which r, another pod's registration, took.
// The warning is logged first: whoever sees the plugin yielded finds it.
func (d *Daemon) yield(plugin string, r registration.Registration) {
	d.log.Warn("another pod registered for the plugin; yielding: this pod is not ready for it while that registration stays",
		"plugin", plugin, "otherPod", r.PodNamespace+"/"+r.PodName, "otherPodUID", r.PodUID, "otherContainer", r.ContainerName)
	d.mu.Lock()
	d.yielded[plugin] = r
	delete(d.failing, plugin)
	d.mu.Unlock()
	d.observeState(plugin, StateYielded)
	d.observeEvent(plugin, EventYielded)
}

// reconcileYielded handles a plugin yielded to other, whose registration
// now reads as r, ok, err, and reports whether that is all (done); if not,
// the plugin is this pod's again and the caller reconciles it as such.
//
// The plugin stays yielded while another pod's registration is there (to
// the new pod if it changed hands), and while the file is unreadable: its
// owner restores it. Once the registration is gone (the other pod
// unregistered as it stopped), this pod registers again. A registration
// that names this pod ends the yielding too.
func (d *Daemon) reconcileYielded(plugin string, other, r registration.Registration, ok bool, err error) (done bool) {
	switch {
	case err != nil:
		return true
	case ok && !r.SamePod(d.cfg.Pod):
		if r != other {
			d.yield(plugin, r)
		}
		return true
	}
	d.mu.Lock()
	delete(d.yielded, plugin)
	d.mu.Unlock()
	if ok {
		return false
	}
	d.log.Info("the pod this pod yielded to has unregistered; registering again",
		"plugin", plugin, "otherPod", other.PodNamespace+"/"+other.PodName, "otherPodUID", other.PodUID)
	d.write(plugin, "registered again")
	return true
}

// write registers plugin and logs it with what; a failure is logged and
// marks the plugin for retry.
func (d *Daemon) write(plugin, what string) error {
	d.mu.Lock()
	d.writes++
	d.mu.Unlock()
	path, _ := registration.Path(d.cfg.Dir, plugin)
	if err := registration.Write(d.cfg.Dir, plugin, d.cfg.Pod); err != nil {
		d.log.Error("cannot write registration", "plugin", plugin, "path", path, "err", err)
		d.setFailing(plugin, true)
		d.observeState(plugin, StateFailing)
		return err
	}
	d.setFailing(plugin, false)
	d.observeState(plugin, StateRegistered)
	switch what {
	case "re-created":
		d.observeEvent(plugin, EventRecreated)
	case "restored":
		d.observeEvent(plugin, EventRestored)
	}
	d.log.Info(what, "plugin", plugin, "path", path)
	return nil
}

// removeOwned removes every registration that still names this pod.
func (d *Daemon) removeOwned() error {
	var errs []error
	for _, p := range d.cfg.Plugins {
		d.observeState(p, StateUnregistered)
		path, _ := registration.Path(d.cfg.Dir, p)
		removed, err := registration.RemoveIfOwned(d.cfg.Dir, p, d.cfg.Pod.PodUID)
		switch {
		case err != nil:
			d.log.Error("cannot remove registration", "plugin", p, "path", path, "err", err)
			errs = append(errs, err)
		case removed:
			d.log.Info("unregistered", "plugin", p, "path", path)
		default:
			d.log.Info("registration no longer names this pod, left in place", "plugin", p, "path", path)
		}
	}
	return errors.Join(errs...)
}

func (d *Daemon) setFailing(plugin string, failing bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if failing {
		d.failing[plugin] = true
	} else {
		delete(d.failing, plugin)
	}
}

func (d *Daemon) failingPlugins() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, p := range d.cfg.Plugins {
		if d.failing[p] {
			out = append(out, p)
		}
	}
	return out
}

// checkDirLinked fails when dir is a directory that has been deleted while
// still mounted here (link count zero): writes to it are lost.
func checkDirLinked(dir string) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil // a missing directory is re-created by the next write
	}
	if st.Nlink == 0 {
		return fmt.Errorf("registration directory %s has been deleted on the node while mounted here; restart the container to mount it again", dir)
	}
	return nil
}
