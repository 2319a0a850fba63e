package scope

import (
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
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
// otherwise); nil when m is nil or not the cgroupfs backend (the systemd
// backend's Place is a D-Bus call, which a busy systemd can hold for its
// timeout). The caller starts such a command stopped and places it before
// it runs (package startgate), so that mount(8), and the helper it forks,
// wait for a CPU and are charged memory in the scope from their start
// rather than in the mount pod's container, where a hundred mounts at
// once pile up (BENCHMARKS.md, "A node under load"). The mount helper
// places itself in the same scope as before where this failed. A failure
// is logged at debug level with the target.
func PlaceEarly(m Manager, plugin string, log *slog.Logger) func(argv []string) (place func(pid int)) {
	if m == nil || m.Backend() != BackendCgroupfs {
		return nil
	}
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

// EarlyPlacer returns [PlaceEarly]'s function for the scopes of hc, and
// what releases it, when hc has scopes on and selects the cgroupfs backend
// without asking systemd: cgroupfs, or auto with none of the systemd
// sockets present (one that is present would be asked, which costs a
// D-Bus connection, and may be systemd). Otherwise, or when the manager
// cannot be made, nil and a no-op: the helper places itself as before,
// and reports what fails.
func EarlyPlacer(hc HelperConfig, log *slog.Logger) (placer func(argv []string) (place func(pid int)), release func()) {
	none := func() {}
	if !hc.Enabled || hc.Plugin == "" {
		return nil, none
	}
	cfg, err := hc.Config.withDefaults()
	if err != nil {
		return nil, none
	}
	switch cfg.Backend {
	case BackendCgroupfs:
	case BackendAuto:
		for _, sock := range cfg.SystemdSockets {
			if fi, err := os.Stat(sock); err == nil && fi.Mode().Type() == fs.ModeSocket {
				return nil, none
			}
		}
	default:
		return nil, none
	}
	c, err := newCgroupfs(cfg)
	if err != nil {
		return nil, none
	}
	// The command waits, stopped, until the placement has returned: the
	// wait in the plugin's queue is bounded.
	c.lockWait = earlyLockWait
	return PlaceEarly(c, hc.Plugin, log), func() { c.Close() }
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
