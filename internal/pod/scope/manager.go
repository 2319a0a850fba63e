package scope

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// ErrPopulated is returned, wrapped, by Remove for a scope that still has
// processes, and by Kill for one that still has some after its wait.
var ErrPopulated = errors.New("scope still has processes")

// Scope is one mount's cgroup.
type Scope struct {
	// Plugin is the volume plugin whose parent holds the scope.
	Plugin string
	// Name is the scope's name, [Name] of the mount target.
	Name string
	// Cgroup is the scope's path relative to the root of every hierarchy,
	// as /proc/PID/cgroup shows it from the host's cgroup namespace, such
	// as "/mountcontainers/kubernetes.io~glusterfs/mount-0123456789abcdef"
	// (cgroupfs) or "/mountcontainers.slice/.../mount-0123456789abcdef.scope"
	// (systemd).
	Cgroup string
	// Paths are the scope's directories, one per hierarchy (cgroupfs
	// backend only).
	Paths []string
	// Unit is the scope unit, such as "mount-0123456789abcdef.scope"
	// (systemd backend only).
	Unit string
	// PIDs are the processes in the scope, sorted (List only): those
	// of one hierarchy, the cgroup2 one where there is one (cgroupfs:
	// see census; systemd: its own). A process placed in a v1 hierarchy's
	// scope only (by a hand, or a Place that failed half-way) is not
	// among them; Kill and Remove see it.
	PIDs []int
}

// Manager places processes into scopes, lists them and removes empty ones.
// Its methods are safe for concurrent use.
type Manager interface {
	// Place moves process pid, or the calling process for pid 0, into
	// the scope of target under plugin's parent, creating the scope and
	// its parents as needed. A scope that exists already is joined.
	Place(plugin, target string, pid int) (Scope, error)
	// List returns the scopes under plugin's parent with their processes
	// (see [Scope.PIDs]), sorted by name. The cgroupfs backend lists empty scopes too; systemd
	// collects those itself, so its list has only live ones.
	List(plugin string) ([]Scope, error)
	// Remove removes the scope named name (see [Name]) under plugin's
	// parent. It fails with an error wrapping [ErrPopulated] while the
	// scope has processes, and does nothing for a scope that does not
	// exist.
	Remove(plugin, name string) error
	// Kill sends SIGKILL to every process of the scope named name under
	// plugin's parent, again to any that appears meanwhile, until the
	// scope has none or wait has passed (then the error wraps
	// [ErrPopulated] and names what is left). It returns the processes it
	// signalled, sorted; a scope that does not exist has none.
	Kill(plugin, name string, wait time.Duration) ([]int, error)
	// Backend names the backend in use: cgroupfs or systemd.
	Backend() Backend
	// Close releases the manager's connections.
	Close() error
}

// New returns the Manager cfg selects: the systemd backend when
// cfg.Backend is systemd, or auto and systemd answers on one of
// cfg.SystemdSockets; the cgroupfs backend otherwise.
func New(cfg Config) (Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// Never a nil *cgroupfs or *systemd in a non-nil Manager.
	cgroupfsOrNil := func() (Manager, error) {
		c, err := newCgroupfs(cfg)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	switch cfg.Backend {
	case BackendCgroupfs:
		return cgroupfsOrNil()
	case BackendSystemd:
		s, err := newSystemd(cfg)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	m, err := newSystemd(cfg)
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, errNoSystemd) {
		return nil, err
	}
	return cgroupfsOrNil()
}

// validate checks a plugin name and a mount target for Place.
func validate(plugin, target string) error {
	if _, err := PluginDir(plugin); err != nil {
		return err
	}
	return ValidateTarget(target)
}

// checkName checks a scope name for Remove.
func checkName(name string) error {
	if !boundary.ValidMountKey(name) {
		return fmt.Errorf("invalid scope name %q: want %s and 16 lowercase hexadecimal digits", name, boundary.MountKeyPrefix)
	}
	return nil
}

// killInterval is how often Kill looks again at a scope it signalled.
const killInterval = 20 * time.Millisecond

// killUntilEmpty is Kill's loop: procs lists the scope's processes (nil for
// a scope that does not exist), kill signals them and returns those it
// signalled (a process that left the scope meanwhile is not). It signals
// every process it finds, waits killInterval and looks again, until none is
// left or wait has passed, and returns every process it signalled, sorted.
func killUntilEmpty(where string, wait time.Duration, procs func() ([]int, error), kill func([]int) ([]int, error)) ([]int, error) {
	deadline := time.Now().Add(wait)
	var killed []int
	for tried := false; ; tried = true {
		pids, err := procs()
		if err != nil {
			return killed, err
		}
		if len(pids) == 0 {
			return killed, nil
		}
		slices.Sort(pids)
		pids = slices.Compact(pids)
		if tried && time.Now().After(deadline) {
			return killed, fmt.Errorf("%w: %v in %s, %s after SIGKILL", ErrPopulated, pids, where, wait)
		}
		signalled, err := kill(pids)
		for _, pid := range signalled {
			if i, found := slices.BinarySearch(killed, pid); !found {
				killed = slices.Insert(killed, i, pid)
			}
		}
		if err != nil {
			return killed, err
		}
		time.Sleep(killInterval)
	}
}

// The waits of [NewRetrying] between two tries: the first, and the
// longest. Variables for the tests.
var (
	retryFirst = time.Second
	retryMax   = 30 * time.Second
)

// NewRetrying is [New], asked again while its error is [ErrNoAnswer]
// (systemd took the connection but did not answer: busy, not absent):
// after a second, then twice as long each time, at most
// 30 seconds apart, until ctx ends. retrying, when not nil, gets each such
// error and the wait before the next try. Any other error of New is
// returned at once; when ctx ends first, the error wraps ctx's and the
// last answer of New. A try under way when ctx ends is not waited for
// (each takes up to Config.Timeout per socket); the manager it may still
// give is closed.
func NewRetrying(ctx context.Context, cfg Config, retrying func(err error, wait time.Duration)) (Manager, error) {
	wait := retryFirst
	var err error
	for {
		type answer struct {
			m   Manager
			err error
		}
		c := make(chan answer, 1)
		go func() {
			m, err := New(cfg)
			c <- answer{m, err}
		}()
		var a answer
		select {
		case a = <-c:
		case <-ctx.Done():
			go func() {
				if a := <-c; a.m != nil {
					a.m.Close()
				}
			}()
			if err == nil {
				return nil, fmt.Errorf("%w while waiting for systemd", context.Cause(ctx))
			}
			return nil, fmt.Errorf("%w while waiting for systemd: %w", context.Cause(ctx), err)
		}
		m := a.m
		if err = a.err; err == nil || !errors.Is(err, ErrNoAnswer) {
			return m, err
		}
		if retrying != nil {
			retrying(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w while waiting for systemd: %w", context.Cause(ctx), err)
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
	}
}
