package scope

import (
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// MountCommandTarget returns the mount target of a mount(8) command line
// that mounts a FUSE client's file system ([boundary.FUSEClientType]:
// glusterfs, fuse.*, ...), as the volume hosts send it:
// `mount -t TYPE [-o OPTIONS] SOURCE TARGET`, TARGET absolute and clean.
// Any other command line, an option other than -t and -o among them, is
// not one: ok is false.
func MountCommandTarget(argv []string) (target string, ok bool) {
	if len(argv) == 0 || filepath.Base(argv[0]) != "mount" {
		return "", false
	}
	var fstype string
	var operands []string
	for i := 1; i < len(argv); i++ {
		switch a := argv[i]; {
		case (a == "-t" || a == "-o") && i+1 < len(argv):
			if a == "-t" {
				fstype = argv[i+1]
			}
			i++
		case len(a) > 0 && a[0] == '-':
			return "", false
		default:
			operands = append(operands, a)
		}
	}
	if len(operands) != 2 || !boundary.FUSEClientType(fstype) {
		return "", false
	}
	target = operands[1]
	if ValidateTarget(target) != nil || path.Clean(target) != target {
		return "", false
	}
	return target, true
}

// PlaceEarly returns what tells, for a command about to start, whether it
// is a mount of a FUSE client ([MountCommandTarget]), and if so gives what
// places its process in its mount's scope under plugin's parent (nil
// otherwise); nil when m is nil. The caller starts such a command stopped
// and places it before it runs (package startgate), so that mount(8), and
// the helper it forks, wait for a CPU and are charged memory in the scope
// from their start rather than in the mount pod's container, where a
// hundred mounts at once pile up (BENCHMARKS.md, "A node under load"). The
// mount helper places itself in the same scope as before where this
// failed. A failure is logged at debug level with the target. The command
// waits, stopped, for the placement: m's waits must be bounded
// ([EarlyPlacer] bounds them).
func PlaceEarly(m Manager, plugin string, log *slog.Logger) func(argv []string) (place func(pid int)) {
	if m == nil {
		return nil
	}
	return placeEarly(func() Manager { return m }, plugin, log)
}

// placeEarly is [PlaceEarly] with the manager got, for each command that
// is placed, from get (nil: not placed).
func placeEarly(get func() Manager, plugin string, log *slog.Logger) func(argv []string) (place func(pid int)) {
	if log == nil {
		log = slog.Default()
	}
	return func(argv []string) func(pid int) {
		target, ok := MountCommandTarget(argv)
		if !ok {
			return nil
		}
		return func(pid int) {
			if pid <= 0 {
				return
			}
			m := get()
			if m == nil {
				return
			}
			if _, err := m.Place(plugin, target, pid); err != nil {
				log.Debug("a mount's early placement in its scope failed; its helper places itself", "path", target, "pid", pid, "err", err)
			}
		}
	}
}

// earlyLockWait bounds an early placement's wait for the plugin's lock,
// which it needs only where a Remove took the scope away as it was placing
// (the command waits, stopped, meanwhile). Past it, the helper places
// itself, as it would have without the early placement.
const earlyLockWait = time.Second

// earlySystemdTimeout bounds each call of an early placement to systemd,
// the connection's set-up included (the command waits, stopped,
// meanwhile), where the scopes' timeout ([Config.Timeout]) is longer. Past
// it, the helper places itself with the scopes' timeout, as it would have
// without the early placement; a job systemd finishes later moves the
// process into the same scope.
const earlySystemdTimeout = 2 * time.Second

// earlyRetry is how long an early placer that could not reach systemd
// leaves it alone before it tries again: meanwhile each helper places
// itself, and no command waits for a systemd that does not answer.
const earlyRetry = 30 * time.Second

// EarlyPlacer returns [PlaceEarly]'s function for the scopes of hc, and
// what releases it, when hc has scopes on for one plugin; otherwise nil and
// a no-op, and the helper places itself as before, and reports what fails.
//
// With the cgroupfs backend (or auto where none of the systemd sockets is
// present) the manager is made at once, and a placement waits at most
// [earlyLockWait] for the plugin's lock; when it cannot be made, nil. With
// systemd (or auto where a socket is present) the connection is made at
// the first FUSE mount, not before (a CRI batch of other commands never
// connects), each call is bounded by [earlySystemdTimeout], and a
// connection that fails is tried again [earlyRetry] later, the helpers
// placing themselves meanwhile.
func EarlyPlacer(hc HelperConfig, log *slog.Logger) (placer func(argv []string) (place func(pid int)), release func()) {
	none := func() {}
	if !hc.Enabled || hc.Plugin == "" {
		return nil, none
	}
	cfg, err := hc.Config.withDefaults()
	if err != nil {
		return nil, none
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.Backend == BackendCgroupfs || (cfg.Backend == BackendAuto && !anySocket(cfg.SystemdSockets)) {
		c, err := newCgroupfs(cfg)
		if err != nil {
			return nil, none
		}
		// The command waits, stopped, until the placement has returned:
		// the wait in the plugin's queue is bounded.
		c.lockWait = earlyLockWait
		return PlaceEarly(c, hc.Plugin, log), func() { c.Close() }
	}
	cfg.Timeout = min(cfg.Timeout, earlySystemdTimeout)
	l := &lazyManager{cfg: cfg, log: log}
	return placeEarly(l.get, hc.Plugin, log), l.close
}

// anySocket reports whether one of paths is a socket.
func anySocket(paths []string) bool {
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Type() == fs.ModeSocket {
			return true
		}
	}
	return false
}

// lazyManager makes its Manager at its first use, and again [earlyRetry]
// after a failure to.
type lazyManager struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	m        Manager
	failedAt time.Time
	closed   bool
}

// get returns the manager, nil while it cannot be had. The calls that come
// while it is being made wait for it (each for a command of its own that
// waits too, at most the connection's bound).
func (l *lazyManager) get() Manager {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m != nil || l.closed || (!l.failedAt.IsZero() && time.Since(l.failedAt) < earlyRetry) {
		return l.m
	}
	m, err := New(l.cfg)
	if err != nil {
		l.failedAt = time.Now()
		l.log.Debug("mounts are not placed early: no scope manager; each mount's helper places itself", "retry", earlyRetry, "err", err)
		return nil
	}
	if c, ok := m.(*cgroupfs); ok {
		c.lockWait = earlyLockWait // auto, and no systemd on its sockets
	}
	l.m = m
	return m
}

func (l *lazyManager) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.m != nil {
		l.m.Close()
		l.m = nil
	}
}

// InItsScope reports whether the calling process is in the scope of
// target under plugin's parent in every hierarchy, by its own
// /proc/self/cgroup: the mount helper, forked by a mount(8) that was
// placed early, is born there and need not Place itself (each Place
// writes the parents' weights and limits and every hierarchy's
// cgroup.procs). cgroupfs backend only, and only
// where the process sees the host's cgroup paths (its own namespace is
// the host's); false otherwise, and the helper places itself.
func InItsScope(m Manager, plugin, target string) bool {
	c, ok := m.(*cgroupfs)
	if !ok || validate(plugin, target) != nil {
		return false
	}
	prel, err := c.pluginRel(plugin)
	if err != nil {
		return false
	}
	own, err := readMembershipOf(c.cfg.ProcRoot, "self")
	return err == nil && own.In("/"+path.Join(prel, Name(target)))
}
