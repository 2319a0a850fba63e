package scope

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// cgroupfs makes scopes by writing the cgroup file system.
type cgroupfs struct {
	cfg    Config
	layout Layout
	// ns is the cgroup namespace every operation runs in, or "" for the
	// process's own.
	ns string
	// rmdir removes an empty cgroup; tests replace it to remove the
	// plain files of their fake trees first, as the kernel does.
	rmdir func(string) error
	// noKillFile makes Kill leave cgroup.kill alone, as on a kernel
	// before 5.14 (tests).
	noKillFile bool
	// lockWait, when positive, bounds the wait for a plugin's lock: a
	// Place that cannot have it within that time fails, wrapping
	// errLockBusy (the early placement's: [EarlyPlacer]).
	lockWait time.Duration
}

// errLockBusy is wrapped by the error of a lock not had within lockWait.
var errLockBusy = errors.New("the plugin's lock is busy")

var _ Manager = (*cgroupfs)(nil)

func newCgroupfs(cfg Config) (*cgroupfs, error) {
	ns, err := hostCgroupNS(cfg)
	if err != nil {
		return nil, err
	}
	layout, err := DetectLayout(cfg.CgroupRoot)
	if err != nil {
		return nil, err
	}
	if cfg.MemoryLimit > 0 && !slices.ContainsFunc(layout.Hierarchies, func(h Hierarchy) bool { return h.Memory }) {
		return nil, fmt.Errorf("a memory limit is set but no cgroup hierarchy under %s has the memory controller", cfg.CgroupRoot)
	}
	if cfg.PidsLimit > 0 && !slices.ContainsFunc(layout.Hierarchies, func(h Hierarchy) bool { return h.Pids }) {
		return nil, fmt.Errorf("a pids limit is set but no cgroup hierarchy under %s has the pids controller", cfg.CgroupRoot)
	}
	return &cgroupfs{cfg: cfg, layout: layout, ns: ns, rmdir: rmdir}, nil
}

func (c *cgroupfs) Backend() Backend { return BackendCgroupfs }

func (c *cgroupfs) Close() error { return nil }

// pluginRel returns plugin's parent, relative to a hierarchy's root.
func (c *cgroupfs) pluginRel(plugin string) (string, error) {
	dir, err := PluginDir(plugin)
	if err != nil {
		return "", err
	}
	return path.Join(c.cfg.Parent, dir), nil
}

func (c *cgroupfs) Place(plugin, target string, pid int) (Scope, error) {
	if err := validate(plugin, target); err != nil {
		return Scope{}, err
	}
	if pid < 0 {
		return Scope{}, fmt.Errorf("invalid PID %d", pid)
	}
	if pid == 0 {
		pid = os.Getpid()
	}
	prel, _ := c.pluginRel(plugin)
	s := Scope{Plugin: plugin, Name: Name(target)}
	rel := path.Join(prel, s.Name)
	s.Cgroup = "/" + rel
	for _, h := range c.layout.Hierarchies {
		s.Paths = append(s.Paths, filepath.Join(h.Path, rel))
	}
	err := inCgroupNS(c.ns, func() error {
		// The cgroups first, without the lock. Nothing removes a parent
		// but the node's uninstall; a Remove may take an empty scope
		// away before the PID is in it, and the scope is then made again
		// under the lock (where it is there, a lookup).
		ready := true
		for _, h := range c.layout.Hierarchies {
			if err := c.prepareParents(h, prel, rel); err != nil {
				return err
			}
			if err := c.prepareScope(h, rel); gone(err) {
				ready = false // made again under the lock
			} else if err != nil {
				return err
			}
		}
		beforeLock(s)
		// The PID without the lock first: a Remove takes a scope away
		// only while it is empty, and the kernel refuses to remove a
		// cgroup with a process, so a write that succeeds is in the
		// scope. Under a wave of mounts the plugin's lock is where they
		// queued (BENCHMARKS.md, "A node under load"). A cgroup gone
		// meanwhile (ENOENT, or ENODEV from the kernel for one removed
		// as it is written) sends the Place under the lock, where it is
		// made again and every hierarchy written again; until then the
		// process may be in the scope in some hierarchies only.
		if ready {
			if err := c.join(s, pid); !gone(err) {
				return err
			}
		}
		unlock, err := c.lock(prel, true)
		if err != nil {
			return err
		}
		defer unlock()
		for _, h := range c.layout.Hierarchies {
			if err := c.prepareScope(h, rel); err != nil {
				return err
			}
		}
		return c.join(s, pid)
	})
	if err != nil {
		return s, fmt.Errorf("place process %d in scope %s of plugin %s (%s): %w", pid, s.Name, plugin, s.Cgroup, err)
	}
	return s, nil
}

// gone reports whether err is a cgroup's that a Remove took away: ENOENT,
// or the kernel's ENODEV for one removed as it was opened or written.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// join writes pid into the cgroup.procs of every hierarchy's scope s,
// those of the CPU's hierarchies first: a process of the mount pod's
// cgroup waits there for a CPU at the weight of the pod (its request).
// Only once every hierarchy is ready (Place made them): a failure of the
// first write leaves the process where it was.
func (c *cgroupfs) join(s Scope, pid int) error {
	for _, i := range cpuFirst(c.layout.Hierarchies) {
		if err := joinWrite(filepath.Join(s.Paths[i], "cgroup.procs"), strconv.Itoa(pid)+"\n", true); err != nil {
			return err
		}
	}
	return nil
}

// joinWrite is join's writeFile (a seam for the tests: the kernel's ENODEV
// for a cgroup removed as it is written cannot be had on demand).
var joinWrite = writeFile

// prepareParents creates the missing parents of the scope rel in
// hierarchy h, Config.Parent and the plugin's parent prel (copying the
// cpuset of its parent into each new cpuset cgroup), and sets the CPU
// weight and the memory and pids limits of prel. Place calls it without
// the plugin's lock.
func (c *cgroupfs) prepareParents(h Hierarchy, prel, rel string) error {
	dir := h.Path
	for _, name := range strings.Split(prel, "/") {
		parent := dir
		dir = filepath.Join(dir, name)
		if err := c.mkdir(h, parent, dir); err != nil {
			return err
		}
	}
	if h.CPU {
		// One more scope if this one is new: the weight is in place
		// before the process arrives.
		c.weigh(h, prel, btoi(!exists(filepath.Join(h.Path, rel))))
	}
	return c.limit(h, prel)
}

// prepareScope creates the scope rel in hierarchy h, whose parents
// prepareParents made, with its parent's cpuset.
func (c *cgroupfs) prepareScope(h Hierarchy, rel string) error {
	dir := filepath.Join(h.Path, rel)
	return c.mkdir(h, filepath.Dir(dir), dir)
}

// mkdir creates the cgroup dir, child of parent, in hierarchy h unless it
// exists, and gives it parent's cpuset in the cpuset hierarchy.
func (c *cgroupfs) mkdir(h Hierarchy, parent, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if h.Cpuset {
		return copyCpuset(parent, dir)
	}
	return nil
}

// beforeLock is called by Place once the scope's cgroups are made, before
// it writes the PID without the lock (a seam for the tests, which remove
// them as a concurrent Remove can).
var beforeLock = func(Scope) {}

// cpuFirst returns the indexes of hs, those of the hierarchies with the
// cpu controller first.
func cpuFirst(hs []Hierarchy) []int {
	var first, rest []int
	for i, h := range hs {
		if h.CPU {
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	return append(first, rest...)
}

// limit sets the configured memory and pids limits of the plugin's parent
// prel where h has their controllers.
func (c *cgroupfs) limit(h Hierarchy, prel string) error {
	if c.cfg.MemoryLimit > 0 && h.Memory {
		if err := c.limitMemory(h, prel); err != nil {
			return err
		}
	}
	if c.cfg.PidsLimit > 0 && h.Pids {
		return c.limitPids(h, prel)
	}
	return nil
}

// copyCpuset gives dir its parent's cpuset.cpus and cpuset.mems where they
// are empty: a new cgroup v1 cpuset starts empty and refuses processes
// (ENOSPC) until both are set.
func copyCpuset(parent, dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		cur, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if len(bytes.TrimSpace(cur)) > 0 {
			continue
		}
		val, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, f), string(val), false); err != nil {
			return err
		}
	}
	return nil
}

// CPU weight of one process at the default nice level in cgroup v1
// (cpu.shares) and v2 (cpu.weight).
const (
	sharesPerProcess = 1024
	weightPerProcess = 100
)

// maxWeighedScopes is the most scopes a parent is weighed for: however
// many mounts a node has, their daemons together never weigh more than
// this many processes at the default nice level (4096 shares, weight 400)
// against the node's other cgroups, such as kubepods.
const maxWeighedScopes = 4

// weigh gives the plugin's parent prel in h the CPU weight of as many
// processes at the default nice level as it has scopes (counting more
// that are about to be made), and Config.Parent, which holds the parents
// of every plugin, the weight of all their scopes; at least one process
// each, at most maxWeighedScopes: cpu.shares in v1, cpu.weight in v2
// (after enabling the cpu controller in every ancestor's
// cgroup.subtree_control).
//
// A cgroup competes for CPU with its siblings as one entity whatever it
// holds. At the default weight, every mount of every plugin together
// would weigh as much as one process beside Config.Parent (on a node
// without systemd, each process of the root cgroup): under load each
// mount's helpers and FUSE daemon got a small fraction of what they get
// without a scope (BENCHMARKS.md, "A node under load"). This way a scope
// does not change what its mount weighs, for the first few mounts; the
// cap keeps many mounts from outweighing the node's workloads (1024 shares
// per scope would give 64 mounts the weight of 64 busy processes).
//
// Best effort: a mount is not refused because its weight could not be set
// (cgroup v2 refuses the cpu controller while real-time processes sit in
// other cgroups). Place and Remove of other plugins may count at the same
// time; the next one corrects what they miss.
func (c *cgroupfs) weigh(h Hierarchy, prel string, more int) {
	if h.V2 && enableController(h, prel, "cpu") != nil {
		return
	}
	mine := more + countScopes(filepath.Join(h.Path, prel))
	all := more
	parent := filepath.Join(h.Path, path.Dir(prel))
	if entries, err := os.ReadDir(parent); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				all += countScopes(filepath.Join(parent, e.Name()))
			}
		}
	}
	setWeight(h, filepath.Join(h.Path, prel), mine)
	setWeight(h, parent, all)
}

// countScopes returns how many scopes dir holds.
func countScopes(dir string) int {
	n := 0
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if e.IsDir() && boundary.ValidMountKey(e.Name()) {
				n++
			}
		}
	}
	return n
}

// setWeight gives the cgroup dir of h the CPU weight of n processes, at
// least one and at most maxWeighedScopes, ignoring errors.
func setWeight(h Hierarchy, dir string, n int) {
	n = min(max(n, 1), maxWeighedScopes)
	if h.V2 {
		_ = writeFile(filepath.Join(dir, "cpu.weight"), strconv.Itoa(n*weightPerProcess), false)
		return
	}
	_ = writeFile(filepath.Join(dir, "cpu.shares"), strconv.Itoa(n*sharesPerProcess), false)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// enableController enables controller in the cgroup.subtree_control of
// every ancestor of prel in the v2 hierarchy h (none of them holds
// processes), so that prel has its files.
func enableController(h Hierarchy, prel, controller string) error {
	dir := h.Path
	for _, name := range strings.Split(prel, "/") {
		ctl := filepath.Join(dir, "cgroup.subtree_control")
		cur, err := os.ReadFile(ctl)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if !slices.Contains(strings.Fields(string(cur)), controller) {
			if err := writeFile(ctl, "+"+controller, false); err != nil {
				return err
			}
		}
		dir = filepath.Join(dir, name)
	}
	return nil
}

// limitMemory sets the memory limit of prel in h: memory.limit_in_bytes in
// v1; memory.max in v2, after enabling the memory controller in every
// ancestor's cgroup.subtree_control (none of them holds processes).
func (c *cgroupfs) limitMemory(h Hierarchy, prel string) error {
	limit := strconv.FormatInt(c.cfg.MemoryLimit, 10)
	if !h.V2 {
		return writeFile(filepath.Join(h.Path, prel, "memory.limit_in_bytes"), limit, false)
	}
	if err := enableController(h, prel, "memory"); err != nil {
		return err
	}
	return writeFile(filepath.Join(h.Path, prel, "memory.max"), limit, false)
}

// limitPids sets pids.max of prel in h, after enabling the pids controller
// in every ancestor's cgroup.subtree_control in v2.
func (c *cgroupfs) limitPids(h Hierarchy, prel string) error {
	if h.V2 {
		if err := enableController(h, prel, "pids"); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(h.Path, prel, "pids.max"), strconv.FormatInt(c.cfg.PidsLimit, 10), false)
}

func (c *cgroupfs) List(plugin string) ([]Scope, error) {
	prel, err := c.pluginRel(plugin)
	if err != nil {
		return nil, err
	}
	var scopes []Scope
	census := c.census()
	err = inCgroupNS(c.ns, func() error {
		byName := map[string]*Scope{}
		for _, h := range c.layout.Hierarchies {
			dir := filepath.Join(h.Path, prel)
			entries, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			for _, e := range entries {
				if !e.IsDir() || !boundary.ValidMountKey(e.Name()) {
					continue
				}
				s := byName[e.Name()]
				if s == nil {
					s = &Scope{Plugin: plugin, Name: e.Name(), Cgroup: "/" + path.Join(prel, e.Name())}
					byName[e.Name()] = s
				}
				p := filepath.Join(dir, e.Name())
				s.Paths = append(s.Paths, p)
				if h.Path != census.Path {
					continue
				}
				pids, err := readPIDs(filepath.Join(p, "cgroup.procs"))
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				s.PIDs = append(s.PIDs, pids...)
			}
		}
		for _, s := range byName {
			slices.Sort(s.PIDs)
			s.PIDs = slices.Compact(s.PIDs)
			scopes = append(scopes, *s)
		}
		slices.SortFunc(scopes, func(a, b Scope) int { return strings.Compare(a.Name, b.Name) })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list scopes of plugin %s: %w", plugin, err)
	}
	return scopes, nil
}

func (c *cgroupfs) Remove(plugin, name string) error {
	prel, err := c.pluginRel(plugin)
	if err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	rel := path.Join(prel, name)
	err = inCgroupNS(c.ns, func() error {
		unlock, err := c.lock(prel, false)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer unlock()
		// Every hierarchy is checked before any is touched: a scope is
		// removed everywhere or nowhere.
		var dirs []string
		for _, h := range c.layout.Hierarchies {
			dir := filepath.Join(h.Path, rel)
			pids, err := readPIDs(filepath.Join(dir, "cgroup.procs"))
			if errors.Is(err, fs.ErrNotExist) {
				if exists(dir) {
					return fmt.Errorf("%s has no cgroup.procs: not a cgroup", dir)
				}
				continue
			}
			if err != nil {
				return err
			}
			if len(pids) > 0 {
				slices.Sort(pids)
				return fmt.Errorf("%w: %v in %s", ErrPopulated, pids, dir)
			}
			dirs = append(dirs, dir)
		}
		for _, dir := range dirs {
			if err := c.rmdir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOTEMPTY) {
					return fmt.Errorf("%w (or child cgroups): %w", ErrPopulated, err)
				}
				return err
			}
		}
		for _, h := range c.layout.Hierarchies {
			if h.CPU && exists(filepath.Join(h.Path, prel)) {
				c.weigh(h, prel, 0)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove scope %s of plugin %s (%s): %w", name, plugin, "/"+rel, err)
	}
	return nil
}

func (c *cgroupfs) Kill(plugin, name string, wait time.Duration) ([]int, error) {
	prel, err := c.pluginRel(plugin)
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	rel := path.Join(prel, name)
	var killed []int
	err = inCgroupNS(c.ns, func() error {
		procs := func() ([]int, error) {
			var all []int
			for _, h := range c.layout.Hierarchies {
				pids, err := readPIDs(filepath.Join(h.Path, rel, "cgroup.procs"))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return nil, err
				}
				all = append(all, pids...)
			}
			return all, nil
		}
		kill := func(pids []int) ([]int, error) { return c.killScope(rel, pids, procs) }
		var err error
		killed, err = killUntilEmpty("/"+rel, wait, procs, kill)
		return err
	})
	if err != nil {
		return killed, fmt.Errorf("kill the processes of scope %s of plugin %s (%s): %w", name, plugin, "/"+rel, err)
	}
	return killed, nil
}

// lock takes an exclusive flock(2) on plugin's parent (prel) in the first
// hierarchy, creating the directories up to it when create is set: Removes
// serialise on it, and a Place whose scope a Remove took away meanwhile
// makes it again and fills it under it, so that no Remove takes it again
// before the PID is in. It returns the unlock function.
func (c *cgroupfs) lock(prel string, create bool) (func(), error) {
	h := c.layout.Hierarchies[0]
	if create {
		// prepareScope, called next for every hierarchy, copies the
		// cpuset.
		if err := os.MkdirAll(filepath.Join(h.Path, prel), 0o755); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(filepath.Join(h.Path, prel))
	if err != nil {
		return nil, err
	}
	if c.lockWait > 0 {
		err = flockWithin(int(f.Fd()), c.lockWait)
	} else {
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if err != unix.EINTR {
				break
			}
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// flockWithin takes the exclusive flock of fd, trying again after 1 ms,
// then twice as long each time, at most 50 ms apart, for at most wait;
// then the error wraps errLockBusy.
func flockWithin(fd int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case err == unix.EINTR:
			continue
		case err != unix.EWOULDBLOCK:
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: not had within %v", errLockBusy, wait)
		}
		time.Sleep(min(pause, left))
	}
}

// writeFile writes s to an existing cgroup file; appending for
// cgroup.procs. O_CREATE matters only for the plain directories of tests'
// fake trees: in a cgroup file system the kernel has made the file. Plain
// system calls, not an *os.File: a cgroup file can be polled, and an
// *os.File would add it to the runtime's poller and take it out again,
// four more system calls for every write, dozens in a Place.
func writeFile(name, s string, appending bool) error {
	flag := unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC
	if appending {
		flag |= unix.O_APPEND
	} else {
		flag |= unix.O_TRUNC
	}
	fd, err := retryEINTR(func() (int, error) { return unix.Open(name, flag, 0o644) })
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: err}
	}
	n, err := retryEINTR(func() (int, error) { return unix.Write(fd, []byte(s)) })
	if err == nil && n < len(s) {
		err = io.ErrShortWrite
	}
	cerr := unix.Close(fd)
	switch {
	case err != nil:
		return &fs.PathError{Op: "write", Path: name, Err: err}
	case cerr != nil:
		return &fs.PathError{Op: "close", Path: name, Err: cerr}
	}
	return nil
}

// retryEINTR calls f again while it fails with EINTR.
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// rmdir removes a cgroup directory.
func rmdir(dir string) error {
	if err := unix.Rmdir(dir); err != nil {
		return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// readPIDs reads a cgroup.procs file.
func readPIDs(name string) ([]int, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: malformed PID %q", name, f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// EventSource is a [Manager] whose scopes report their processes' exit: a
// cgroup v2 scope's "cgroup.events" file is rewritten ("populated 0") when
// its last process exits. The cgroupfs backend is one where there is a
// cgroup2 hierarchy (unified or hybrid); see [EventsOf].
type EventSource interface {
	// EventFiles returns the cgroup.events file of every scope under
	// plugin's parent, sorted. It lists one directory and reads no
	// process list: it is called after every pass of the recovery, and
	// [Manager.List] lists every hierarchy's directory and reads every
	// scope's processes (with 100 mounts, a hundred files).
	EventFiles(plugin string) ([]string, error)
	// EventDir returns the directory whose entries EventFiles lists, as
	// a path that resolves outside the host's cgroup namespace too: a
	// watcher of its entries learns of scopes made and removed, and
	// lists again only then. It may not exist yet (no scope so far).
	EventDir(plugin string) (string, error)
}

// EventsOf returns m as an [EventSource], or false when m's scopes report
// nothing: a node with cgroup v1 hierarchies only, for either backend.
func EventsOf(m Manager) (EventSource, bool) {
	switch b := m.(type) {
	case *cgroupfs:
		return b, b.v2() != nil
	case *systemd:
		return b, b.v2 != ""
	}
	return nil, false
}

// census returns the hierarchy whose cgroup.procs List reads: the cgroup2
// one where there is one (as systemd tracks a unit's processes in its own
// hierarchy), else the first v1 hierarchy. Place writes a process into
// every hierarchy before it returns, so a placed process is in each; Kill
// and Remove read every hierarchy, and never rely on List's PIDs alone.
// On a hybrid node with 100 scopes, List reads 100 files instead of a
// thousand (BenchmarkRefreshListing).
func (c *cgroupfs) census() Hierarchy {
	if h := c.v2(); h != nil {
		return *h
	}
	return c.layout.Hierarchies[0]
}

// v2 returns the cgroup2 hierarchy scopes are made in, or nil.
func (c *cgroupfs) v2() *Hierarchy {
	for i := range c.layout.Hierarchies {
		if c.layout.Hierarchies[i].V2 {
			return &c.layout.Hierarchies[i]
		}
	}
	return nil
}

func (c *cgroupfs) EventDir(plugin string) (string, error) {
	prel, err := c.pluginRel(plugin)
	if err != nil {
		return "", err
	}
	h := c.v2()
	if h == nil {
		return "", fmt.Errorf("no cgroup2 hierarchy: %w", fs.ErrNotExist)
	}
	return filepath.Join(h.Path, prel), nil
}

func (c *cgroupfs) EventFiles(plugin string) ([]string, error) {
	if c.v2() == nil {
		if _, err := c.pluginRel(plugin); err != nil {
			return nil, err
		}
		return nil, nil
	}
	dir, err := c.EventDir(plugin)
	if err != nil {
		return nil, err
	}
	var files []string
	err = inCgroupNS(c.ns, func() error {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() && boundary.ValidMountKey(e.Name()) {
				files = append(files, filepath.Join(dir, e.Name(), "cgroup.events"))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the scopes' cgroup events of plugin %s: %w", plugin, err)
	}
	return files, nil
}
