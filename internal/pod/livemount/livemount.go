// Package livemount finds the live FUSE mounts a mount pod serves, the
// daemons behind them and the scopes they run in (package scope), so that a
// mount pod can report the mounts it adopted from its predecessors
// (`mountpod status`), a rollout can tell whether a mount pod may be
// replaced in place, and scopes whose mount and processes are gone can be
// removed.
//
// # What is a mount's daemon
//
// A mount's daemon is a process that holds the mount's FUSE connection: an
// open /dev/fuse descriptor attached to it. Since Linux 6.16 the kernel
// names a /dev/fuse descriptor's connection in /proc/PID/fdinfo
// ("fuse_connection:"), and that number is the mount's device number, so a
// process counts when one of its descriptors names the connection of the
// mount. A descriptor is attached to a connection only by mounting with it
// or by being handed over by a process that holds it, so no other user can
// get hold of the connection of a mount root made.
//
// That number alone does not name one connection for good: the kernel
// gives the device number of a mount that is gone to the next one, while
// a process may still hold the old mount's connection (a daemon that
// ignored its end, or was stopped). So the connection a descriptor holds
// must also be live. Where more than one process serves a mount, the
// survey checks the descriptors of those in the plugins' scopes (which
// the mount pod started): it takes a copy of each (pidfd_getfd(2),
// through a pidfd opened before the scopes are listed again, so that the
// process is still a scope's), checks that the copy is the FUSE device
// and names the same connection, and polls it, which the kernel answers
// with POLLERR once the connection has ended. The mount of a live
// connection is the only one of its number, and a live connection has a
// holder, so a stale holder is found beside the mount's daemon, where
// every process is read (`mountpod status`); a survey that reads the
// scopes only may miss the daemon of a mount outside them.
//
// The number decides as before for every other process: a copy of
// another process's descriptor could be a file of a FUSE mount it serves
// itself (it may replace the descriptor between the read of its fdinfo
// and the copy), whose close waits for its answer, which it need never
// give, and makes the mount pod unkillable. An extra daemon outside a
// mount's scope only makes the mount unscoped, which keeps a rollout from
// replacing the mount pod in place. The number also decides where a
// check tells nothing (no pidfd_getfd, an exiting process, a security
// module or ptrace policy that refuses it, or an earlier check still
// waiting on its process; see connectionEnded).
//
// A /dev/fuse descriptor whose fdinfo names no connection (an older
// kernel, or a descriptor not yet mounted with) is matched as before by
// the command line: the process counts when one of its arguments is the
// mount target, as FUSE clients (glusterfs, ceph-fuse, sshfs, ...) are
// started with the mount point on their command line. Either way the process must run as
// root (every UID in /proc/PID/status is 0) and hold /dev/fuse open: a
// process that only names a target, such as `sleep 1000 <target>` run by
// any user, never counts. A daemon is "scoped" when it is in the scope
// named after the mount target ([boundary.MountKey]), or, for a bind with
// no scope of its own, after another target of the same FUSE connection
// that has one (the node's shared mount a pod's directory binds, a CSI
// staging its publish binds): the same daemons serve both.
//
// # Caveats
//
// The report is a snapshot: a mount made or removed while it is taken may
// or may not be in it. A mount whose daemon died answers stat with "transport
// endpoint is not connected" (ENOTCONN): it is reported as not healthy.
// Checks of a hung mount are bounded by [Options.StatTimeout].
package livemount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/boundary/livestatus"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
)

// DefaultStatTimeout bounds the health check of one mount.
const DefaultStatTimeout = 2 * time.Second

// The report's types are the format `mountpod status` prints and the
// rollout reads (package livestatus).
type (
	Mount  = livestatus.Mount
	Scope  = livestatus.Scope
	Report = livestatus.Report
)

// Options configure a [Survey].
type Options struct {
	// KubeletDir: only mounts at or below it are reported.
	KubeletDir string
	// Plugins whose scopes are listed.
	Plugins []string
	// Scopes lists the scopes; nil: no scope is known (scopes off).
	Scopes scope.Manager
	// MountInfo is the mount table to read; default /proc/self/mountinfo.
	MountInfo string
	// ProcRoot is the proc file system; default /proc.
	ProcRoot string
	// StatTimeout bounds the health check of each mount; default
	// [DefaultStatTimeout].
	StatTimeout time.Duration
	// DaemonsInScopes, with Scopes, looks for daemons among the processes
	// of the plugins' scopes first, and among all processes only when a
	// mount that has one of those scopes shows no daemon there. The
	// daemons of the other mounts (another plugin's, or one made without
	// a scope) are then not looked for (their Daemons is empty), and a
	// process outside a mount's scope that also holds its connection is
	// not seen. Reading every process's descriptors is most of a
	// survey's cost on a node running a hundred pods; the keeper's
	// surveys between its full ones set this, `mountpod status` never.
	DaemonsInScopes bool
	// Known, when set, is what the surveys remember of the daemons they
	// found (see [Known]); a [Keeper] sets its own.
	Known *Known
	// SkipQuiet, with Known, skips in a read of every process those
	// that Known counts quiet (see [Known]), and reads every process
	// whole after all when that leaves a mount without a daemon. The
	// keeper's full surveys set it, but for one every [DeepSurveyPeriod].
	SkipQuiet bool
	// Answers, when set, are the mounts' recent answers to another
	// part's stats: a mount that answered less than [MaxAnswerAge] ago
	// is healthy without a stat of the survey's own. The mount pod's
	// keeper takes the recovery's; `mountpod status` stats every mount.
	Answers *Answers

	// ended, in tests of a fake ProcRoot, tells the connections that
	// ended in place of [connectionEnded], which is used where ProcRoot
	// is the proc file system of this process's PID namespace.
	ended endedFunc
}

// Known is what the surveys remember of the daemons they found: of a
// process, known by its PID and its start time (a PID goes to another
// process only once its process is gone, and that one starts later), the
// descriptors through which it held FUSE connections. A survey that looks
// in the scopes ([Options.DaemonsInScopes]) reads only those descriptors
// of a process it knows, rather than every one (a glusterfs daemon has a
// few dozen), and still checks its UIDs and, for each of them, that its
// link is /dev/fuse and that its fdinfo names a connection. A connection
// the process got since through another descriptor is not seen then,
// until the next survey of every process and every descriptor (one every
// [FullSurveyPeriod]); sooner where that leaves a mount with no
// daemon in its scope, which sends the survey to every process at once.
// Only the keeper's logs and metrics read this; `mountpod status` and
// the removal of empty scopes never do. Its methods are safe for
// concurrent use.
//
// Known also counts, of each root process (known by its PID, start time
// and name), the reads of every process in a row that found it holding no
// /dev/fuse descriptor. After two, a process is quiet: a read of every
// process with [Options.SkipQuiet] reads only its stat, to know it is the
// same process. A process that does not run as root is read every time
// (its status, no dearer than its stat): an exec of a set-user-ID program
// can make it root. The keeper's reads of every process are minutes
// apart (ten seconds at least, when a daemon is missing from its scope),
// and a FUSE daemon opens /dev/fuse as it starts: a new daemon is read
// whole. An exec changes a process's name but for a program of the same
// name; a process that gets a connection later and keeps all three (it
// opens /dev/fuse and mounts itself, or execs a program of its own name)
// is seen then in a plugin's scope, by a read without SkipQuiet (the
// keeper's, one every [DeepSurveyPeriod]), or by the read of every process
// whole that follows a skipping one that left a mount without a daemon.
// A read that skips every process (no FUSE mount) ends every row.
type Known struct {
	mu    sync.Mutex
	procs map[int]knownProc
	quiet map[int]quietProc
}

// quietProc is a root process read without a /dev/fuse descriptor.
type quietProc struct {
	start string // field 22 of /proc/PID/stat
	comm  string // its name there, which an exec changes
	reads int    // reads of every process in a row that found it so
}

// quietReads is how many reads in a row must find a process without a
// /dev/fuse descriptor before it is quiet.
const quietReads = 2

type knownProc struct {
	start string   // the start time, field 22 of /proc/PID/stat
	fds   []string // the /dev/fuse descriptors that named a connection
}

func (k *Known) get(pid int) (knownProc, bool) {
	if k == nil {
		return knownProc{}, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.procs[pid]
	return p, ok
}

// replace makes procs what k knows, and quiet what it counts, unless
// nil (a survey that did not read every process).
func (k *Known) replace(procs map[int]knownProc, quiet map[int]quietProc) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.procs = procs
	if quiet != nil {
		k.quiet = quiet
	}
}

// forgetQuiet forgets what k counts: a read of every process that was
// not made breaks every process's row.
func (k *Known) forgetQuiet() {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.quiet = nil
}

// quietOf returns what k counts of pid.
func (k *Known) quietOf(pid int) quietProc {
	if k == nil {
		return quietProc{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.quiet[pid]
}

// IsFUSE reports whether fstype is a FUSE file system type
// ([livestatus.IsFUSE]).
func IsFUSE(fstype string) bool { return livestatus.IsFUSE(fstype) }

// Survey reports the live FUSE mounts under o.KubeletDir, their daemons
// and scopes, and the plugins' scopes that have no mount.
func Survey(ctx context.Context, o Options) (Report, error) {
	if o.MountInfo == "" {
		o.MountInfo = "/proc/self/mountinfo"
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.StatTimeout <= 0 {
		o.StatTimeout = DefaultStatTimeout
	}
	if !filepath.IsAbs(o.KubeletDir) {
		return Report{}, fmt.Errorf("kubelet directory %q is not an absolute path", o.KubeletDir)
	}
	// Mount points decoded: they are compared with the kubelet's
	// directory and the daemons' arguments, and stat'ed.
	infos, err := mountinfo.ParseFile(o.MountInfo)
	if err != nil {
		return Report{}, fmt.Errorf("read mount table %s: %w", o.MountInfo, err)
	}
	dir := filepath.Clean(o.KubeletDir)
	var mounts []Mount
	seen := map[string]bool{}
	conns := map[uint64][]string{}
	connOf := map[string]uint64{}
	// top is the last mount at each target, the one a stat reaches.
	top := map[string]mount.MountInfo{}
	for _, mi := range infos {
		if mi.MountPoint != dir && !strings.HasPrefix(mi.MountPoint, dir+"/") {
			continue
		}
		top[mi.MountPoint] = mi
		if !IsFUSE(mi.FsType) || seen[mi.MountPoint] {
			continue
		}
		seen[mi.MountPoint] = true
		c := connection(mi.Major, mi.Minor)
		conns[c] = append(conns[c], mi.MountPoint)
		connOf[mi.MountPoint] = c
		mounts = append(mounts, Mount{Target: mi.MountPoint, Source: mountinfo.Unescape(mi.Source), FSType: mi.FsType})
	}
	type known struct {
		plugin string
		s      scope.Scope
	}
	scopes := map[string]known{}
	var orphans []Scope
	if o.Scopes != nil {
		for _, p := range o.Plugins {
			list, err := o.Scopes.List(p)
			if err != nil {
				return Report{}, fmt.Errorf("list scopes of %s: %w", p, err)
			}
			for _, s := range list {
				scopes[s.Name] = known{p, s}
			}
		}
	}
	// Only the processes of the scopes, which the mount pod started, are
	// asked whether a connection they hold ended: see [connectionEnded].
	var checks endedChecks
	if o.Scopes != nil {
		inScopes := map[int]bool{}
		for _, k := range scopes {
			for _, pid := range k.s.PIDs {
				inScopes[pid] = true
			}
		}
		checks = func(pids []int) ([]int, endedFunc, func()) {
			pids = slices.DeleteFunc(slices.Clone(pids), func(pid int) bool { return !inScopes[pid] })
			switch {
			case len(pids) == 0:
				return nil, nil, func() {}
			case o.ended != nil:
				return pids, func(pid int, fd string, c uint64) bool {
					return slices.Contains(pids, pid) && o.ended(pid, fd, c)
				}, func() {}
			case !ownProc(o.ProcRoot):
				return nil, nil, func() {}
			}
			return pinned(pids, func() (map[int]bool, error) { return scopePIDs(o.Scopes, o.Plugins) })
		}
	}
	var daemons map[string][]int
	if o.DaemonsInScopes && o.Scopes != nil {
		pids := []int{}
		for _, k := range scopes {
			pids = append(pids, k.s.PIDs...)
		}
		daemons = findDaemons(o.ProcRoot, pids, seen, conns, o.Known, true, false, checks)
		for _, m := range mounts {
			if _, ok := scopes[boundary.MountKey(m.Target)]; ok && len(daemons[m.Target]) == 0 {
				daemons = nil // a daemon gone or outside its scope: look everywhere
				break
			}
		}
	}
	if daemons == nil {
		daemons = findDaemons(o.ProcRoot, nil, seen, conns, o.Known, false, o.SkipQuiet, checks)
		if o.SkipQuiet && slices.ContainsFunc(mounts, func(m Mount) bool { return len(daemons[m.Target]) == 0 }) {
			// A daemon may be a quiet process that got its connection
			// since (an exec in place): every process is read whole.
			daemons = findDaemons(o.ProcRoot, nil, seen, conns, o.Known, false, false, checks)
		}
	}
	// A mount with no scope of its own is a bind of another mount of the
	// same FUSE connection (the node's mount of a volume a pod's
	// directory binds, a CSI staging its publish binds): the same
	// daemons serve it, from the scope of the mount they were started
	// for (on a kernel that does not name a descriptor's connection
	// they are found by that mount's target, which they name).
	type owner struct {
		k      known
		target string
	}
	connScope := map[uint64]owner{}
	for _, m := range mounts {
		c := connOf[m.Target]
		if k, ok := scopes[boundary.MountKey(m.Target)]; ok {
			if _, taken := connScope[c]; !taken {
				connScope[c] = owner{k, m.Target}
			}
		}
	}
	used := map[string]bool{}
	for i := range mounts {
		m := &mounts[i]
		m.Daemons = daemons[m.Target]
		k, ok := scopes[boundary.MountKey(m.Target)]
		if !ok {
			var o owner
			if o, ok = connScope[connOf[m.Target]]; ok {
				k = o.k
				if len(m.Daemons) == 0 {
					m.Daemons = daemons[o.target]
				}
			}
		}
		if ok {
			used[k.s.Name] = true
			m.Plugin, m.Scope = k.plugin, k.s.Name
			m.Scoped = len(m.Daemons) > 0
			for _, pid := range m.Daemons {
				if !slices.Contains(k.s.PIDs, pid) {
					m.Scoped = false
				}
			}
		}
		// The age bound at each mount: a stat of the one before may
		// have taken its StatTimeout.
		if o.Answers.AnsweredSince(top[m.Target], time.Now().Add(-MaxAnswerAge)) {
			m.Healthy = true
		} else if err := StatWithin(ctx, m.Target, o.StatTimeout); err != nil {
			m.Error = err.Error()
		} else {
			m.Healthy = true
		}
	}
	for name, k := range scopes {
		if !used[name] {
			orphans = append(orphans, Scope{Plugin: k.plugin, Name: name, Cgroup: k.s.Cgroup, Processes: k.s.PIDs})
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return mounts[i].Target < mounts[j].Target })
	sort.Slice(orphans, func(i, j int) bool { return orphans[i].Cgroup < orphans[j].Cgroup })
	return Report{Mounts: mounts, Orphans: orphans}, nil
}

// RemoveEmptyOrphans removes the orphan scopes of r that have no process
// left, and returns those it removed; a scope that gained a process since
// is left alone (the backend refuses it).
func RemoveEmptyOrphans(m scope.Manager, r Report) (removed []Scope, err error) {
	var errs []error
	for _, s := range r.Orphans {
		if len(s.Processes) > 0 {
			continue
		}
		if err := m.Remove(s.Plugin, s.Name); err != nil {
			if !errors.Is(err, scope.ErrPopulated) {
				errs = append(errs, err)
			}
			continue
		}
		removed = append(removed, s)
	}
	return removed, errors.Join(errs...)
}

// fuseDevice is what the /proc link of a /dev/fuse descriptor names.
const fuseDevice = "/dev/fuse"

// connection returns the number the kernel gives the FUSE connection of a
// mount of device major:minor in fdinfo: the kernel's own encoding of the
// device number (MKDEV), which for the anonymous device of a fuse mount
// (major 0) is the minor number.
func connection(major, minor int) uint64 {
	return uint64(major)<<20 | uint64(minor)
}

// findDaemons returns, for each target, the PIDs of the processes that
// serve it: see the package documentation. conns maps a FUSE connection
// to the targets it is mounted at. It reads the processes pids, or every
// process when pids is nil. With known, a process known there is checked
// through its known descriptors first when useKnown (a survey in the
// scopes; see [Known]), and the processes read either way are what known
// knows after. A read of every process counts the quiet ones in known,
// and, when skipQuiet, skips those known quiet. With checks, the
// processes found serving a target with another are read again, their
// descriptors checked for ended connections (see [connectionEnded]).
func findDaemons(procRoot string, pids []int, targets map[string]bool, conns map[uint64][]string, known *Known, useKnown, skipQuiet bool, checks endedChecks) map[string][]int {
	out := map[string][]int{}
	if len(targets) == 0 {
		if pids == nil {
			known.forgetQuiet()
		}
		return out
	}
	var quiet map[int]quietProc
	if pids == nil && known != nil {
		quiet = map[int]quietProc{}
	}
	if pids == nil {
		entries, err := os.ReadDir(procRoot)
		if err != nil {
			return out
		}
		pids = []int{}
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
	}
	next := map[int]knownProc{}
	for _, pid := range pids {
		dir := filepath.Join(procRoot, strconv.Itoa(pid))
		var start, comm string
		if known != nil {
			start, comm = startTime(dir)
		}
		var q quietProc
		if quiet != nil && start != "" {
			if q = known.quietOf(pid); q.start != start || q.comm != comm {
				q = quietProc{start: start, comm: comm}
			}
			if skipQuiet && q.reads >= quietReads {
				quiet[pid] = q
				continue
			}
		}
		var ts, fds []string
		checked, none := false, false
		if k, ok := known.get(pid); useKnown && ok && start != "" && k.start == start {
			ts, fds, checked = servedThrough(dir, k.fds, conns)
		}
		if !checked {
			ts, fds, none = served(dir, pid, targets, conns, nil)
		}
		if start != "" && len(fds) > 0 {
			next[pid] = knownProc{start: start, fds: fds}
		}
		if quiet != nil && start != "" && none {
			q.reads++
			quiet[pid] = q
		}
		for _, t := range ts {
			if !slices.Contains(out[t], pid) {
				out[t] = append(out[t], pid)
			}
		}
	}
	if checks != nil {
		recheck(procRoot, out, next, targets, conns, checks)
	}
	if known != nil {
		known.replace(next, quiet)
	}
	for _, pids := range out {
		sort.Ints(pids)
	}
	return out
}

// recheck reads again, with their descriptors checked for ended
// connections, the processes that out finds serving a target with
// another process, and corrects out and next (what Known will know) for
// them. A process that holds the connection of a mount that is gone, whose
// number the kernel gave to a mount since, is found serving that mount
// with its daemon; a target served by one process alone needs no check.
func recheck(procRoot string, out map[string][]int, next map[int]knownProc, targets map[string]bool, conns map[uint64][]string, checks endedChecks) {
	var shared []int
	sharedTargets := map[string]bool{}
	for t, pids := range out {
		if len(pids) > 1 {
			sharedTargets[t] = true
			for _, pid := range pids {
				if !slices.Contains(shared, pid) {
					shared = append(shared, pid)
				}
			}
		}
	}
	if len(shared) == 0 {
		return
	}
	sort.Ints(shared)
	checked, ended, release := checks(shared)
	defer release()
	if ended == nil {
		return
	}
	// Only the connections of the targets served together are asked
	// about.
	askOf := func(pid int, fd string, c uint64) bool {
		return slices.ContainsFunc(conns[c], func(t string) bool { return sharedTargets[t] }) && ended(pid, fd, c)
	}
	for _, pid := range checked {
		ts, fds, _ := served(filepath.Join(procRoot, strconv.Itoa(pid)), pid, targets, conns, askOf)
		for t, pids := range out {
			if pids = slices.DeleteFunc(pids, func(p int) bool { return p == pid }); len(pids) > 0 {
				out[t] = pids
			} else {
				delete(out, t)
			}
		}
		for _, t := range ts {
			if !slices.Contains(out[t], pid) {
				out[t] = append(out[t], pid)
			}
		}
		if k, ok := next[pid]; ok {
			if len(fds) > 0 {
				k.fds = fds
				next[pid] = k
			} else {
				delete(next, pid)
			}
		}
	}
}

// served returns the targets that process pid, whose /proc directory is
// dir, serves: those of the live connections its /dev/fuse descriptors
// name and, when one of them names none, those its command line names. A
// process that does not run as root serves none. fds are the descriptors
// that named a live connection, when none named none (else nil: the
// command line may have counted, which the descriptors alone do not
// tell). none is whether the process runs as root and holds no /dev/fuse
// descriptor (but those of ended connections, where ended is given): a
// process that does not run as root is read again every time (a read of its status, as cheap as the
// skip's read of its stat), since an exec of a set-user-ID program can
// make it root.
func served(dir string, pid int, targets map[string]bool, conns map[uint64][]string, ended endedFunc) (ts, fds []string, none bool) {
	if !runsAsRoot(dir) {
		return nil, nil, false
	}
	all, allFDs, unnamed := fuseConnections(dir)
	var held []uint64
	for i, c := range all {
		if len(conns[c]) > 0 && ended.of(pid, allFDs[i], c) {
			continue
		}
		held, fds = append(held, c), append(fds, allFDs[i])
	}
	none = len(held) == 0 && !unnamed
	for _, c := range held {
		ts = append(ts, conns[c]...)
	}
	if unnamed && !kernelNamesConnections {
		ts = append(ts, namedTargets(dir, targets)...)
	}
	if unnamed {
		fds = nil
	}
	return ts, fds, none
}

// servedThrough is served for a process known to hold its connections
// through the descriptors fds: ok is false, and nothing else is returned,
// when one of them no longer links to /dev/fuse or names no connection
// (the process is read as any other then). A process that no longer runs
// as root serves none.
func servedThrough(dir string, fds []string, conns map[uint64][]string) (ts, held []string, ok bool) {
	if !runsAsRoot(dir) {
		return nil, nil, true
	}
	for _, fd := range fds {
		c, named, ok := fuseConnection(dir, fd)
		if !ok || !named {
			return nil, nil, false
		}
		ts = append(ts, conns[c]...)
	}
	return ts, fds, true
}

// startTime returns the start time of the process whose /proc directory is
// dir (field 22 of its stat, in clock ticks since boot) and its name (the
// comm field, which an exec changes), "" when they cannot be read.
func startTime(dir string) (start, comm string) {
	data, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return "", ""
	}
	// "pid (comm) state ppid ...": comm may hold anything but a last ")".
	i, j := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
	if i < 0 || j < i {
		return "", ""
	}
	f := strings.Fields(string(data[j+1:]))
	if len(f) < 20 {
		return "", ""
	}
	return f[19], string(data[i+1 : j])
}

// kernelNamesConnections is whether this kernel names a /dev/fuse
// descriptor's connection in its fdinfo (Linux 6.16 on). There, a daemon's
// descriptor always names one: a descriptor that names none serves no
// mount, whatever its process's command line says (a container's root can
// hold a file it calls /dev/fuse). The command-line fallback is for older
// kernels only.
var kernelNamesConnections = kernelAtLeast(6, 16)

// kernelAtLeast reports whether the running kernel's release is at least
// major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// runsAsRoot reports whether every UID (real, effective, saved, file
// system) of the process whose /proc directory is dir is 0: a set-user-ID
// program run by another user does not.
func runsAsRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if uids, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(uids)
			return len(f) > 0 && !slices.ContainsFunc(f, func(u string) bool { return u != "0" })
		}
	}
	return false
}

// fuseConnections returns the FUSE connections that the /dev/fuse
// descriptors of the process whose /proc directory is dir name in their
// fdinfo, the descriptors that named one, and whether one of them names
// none. The links are read, not followed: stat through a descriptor's
// link could wait on a hung file system.
func fuseConnections(dir string) (conns []uint64, fds []string, unnamed bool) {
	entries, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return nil, nil, false
	}
	for _, e := range entries {
		c, named, ok := fuseConnection(dir, e.Name())
		switch {
		case !ok:
		case named:
			conns = append(conns, c)
			fds = append(fds, e.Name())
		default:
			unnamed = true
		}
	}
	return conns, fds, unnamed
}

// fuseConnection reads descriptor fd of the process whose /proc directory
// is dir: ok when it links to /dev/fuse, and then the connection its
// fdinfo names, if it names one.
func fuseConnection(dir, fd string) (c uint64, named, ok bool) {
	if link, err := os.Readlink(filepath.Join(dir, "fd", fd)); err != nil || link != fuseDevice {
		return 0, false, false
	}
	info, err := os.ReadFile(filepath.Join(dir, "fdinfo", fd))
	if err != nil {
		return 0, false, false // closed meanwhile
	}
	c, named = fdinfoConnection(string(info))
	return c, named, true
}

// ownProc reports whether procRoot is the proc file system of this
// process's PID namespace, whose PIDs pidfd_open takes: its "self" is
// this process.
func ownProc(procRoot string) bool {
	self, err := os.Readlink(filepath.Join(procRoot, "self"))
	return err == nil && self == strconv.Itoa(os.Getpid())
}

// endedFunc reports whether descriptor fd of process pid, whose fdinfo
// named FUSE connection c, holds a connection that ended; nil: none is
// known to have ended.
type endedFunc func(pid int, fd string, c uint64) bool

func (f endedFunc) of(pid int, fd string, c uint64) bool {
	return f != nil && f(pid, fd, c)
}

// endedChecks returns, of processes pids, those it can check, the
// [endedFunc] that tells of their descriptors (nil: none), and the
// release of what it holds.
type endedChecks func(pids []int) (checked []int, ended endedFunc, release func())

// scopePIDs returns the processes of the plugins' scopes.
func scopePIDs(m scope.Manager, plugins []string) (map[int]bool, error) {
	pids := map[int]bool{}
	for _, p := range plugins {
		list, err := m.List(p)
		if err != nil {
			return nil, err
		}
		for _, s := range list {
			for _, pid := range s.PIDs {
				pids[pid] = true
			}
		}
	}
	return pids, nil
}

// pinned is the [endedChecks] of the scopes' processes pids, which
// listed returns (with the other processes of the scopes). A PID read
// from a scope a moment ago may have gone to another process since,
// outside every scope, whose descriptors must never be copied (see
// connectionEnded). So each PID is opened as a pidfd first, which names
// the process that has the number then and only ever that one, and the
// scopes are listed again: a PID still listed belongs to a process of a
// scope, and if that is not its pidfd's, the pidfd's process has exited
// and nothing can be copied from it. The checks are made through the
// pidfds of the PIDs still listed.
func pinned(pids []int, listed func() (map[int]bool, error)) ([]int, endedFunc, func()) {
	fds := map[int]int{}
	release := func() {
		for pid, fd := range fds {
			unix.Close(fd)
			delete(fds, pid)
		}
	}
	for _, pid := range pids {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds[pid] = fd
		}
	}
	now, err := listed()
	if err != nil {
		release()
		return nil, nil, func() {}
	}
	var checked []int
	for _, pid := range pids {
		if fd, ok := fds[pid]; ok && !now[pid] {
			unix.Close(fd)
			delete(fds, pid)
		} else if ok {
			checked = append(checked, pid)
		}
	}
	// One bound for every check of a survey: see connectionEnded.
	deadline := time.Now().Add(endedCheckTimeout)
	return checked, func(pid int, fd string, c uint64) bool {
		pidfd, ok := fds[pid]
		return ok && connectionEnded(pidfd, fd, c, deadline)
	}, release
}

// connectionEnded reports whether descriptor fd of the process of pidfd,
// a process of a scope (the mount pod started it), holds a FUSE
// connection c that ended: true only when a copy of the descriptor,
// taken through the pidfd, is the FUSE device (a character device
// 10:229, as statx tells without asking the file system), names
// connection c in its own fdinfo and polls with POLLERR, which a
// /dev/fuse descriptor does once its connection was aborted (as an
// unmount does). Anything else tells nothing, false: a copy that cannot
// be taken (no pidfd_getfd, a process gone, one the ptrace access check
// refuses) or is another file or connection (the descriptor was replaced
// since it was read). The copy is only polled, with no wait, and closed;
// the poll of a /dev/fuse descriptor takes no request from its queue.
//
// Only a scope's processes are copied from: another process could put
// there, between the read of its fdinfo and the copy, a file of a FUSE
// mount it serves itself, and the close of the copy would ask it to
// flush that file and wait, without end and unkillably, for an answer it
// need never give. Still, a check can wait on its process: pidfd_getfd
// waits while the process execs (which closes its close-on-exec files,
// each close waiting on its file system). So a check runs in a goroutine
// of its own, one at a time, and is waited for until deadline, one for
// all the checks of a survey (endedCheckTimeout after their pidfds were
// pinned): a check not done by then tells nothing
// ([EndedChecksTimedOut]), and neither does any check after the deadline
// or while an earlier one still runs ([EndedChecksSkipped]); the
// connection's number decides, as before such checks. A process that
// never lets a check end holds that check's goroutine, never the survey.
//
// The PIDs of the scopes are those of the host's PID namespace, which
// the mount pod shares (hostPID); the survey makes no check where its
// proc file system is not its own namespace's.
func connectionEnded(pidfd int, fd string, c uint64, deadline time.Time) bool {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 0 {
		return false
	}
	wait := time.Until(deadline)
	if wait <= 0 || !endedCheck.CompareAndSwap(false, true) {
		EndedChecksSkipped.Add(1)
		return false
	}
	// The goroutine's own pidfd: the caller's may be closed before the
	// goroutine is done.
	own, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		endedCheck.Store(false)
		return false
	}
	done := make(chan bool, 1)
	go func() {
		ended := checkCopy(own, n, c)
		unix.Close(own)
		endedCheck.Store(false)
		done <- ended
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ended := <-done:
		return ended
	case <-t.C:
		EndedChecksTimedOut.Add(1)
		return false
	}
}

// endedCheckTimeout bounds the wait for the checks of [connectionEnded]
// in one survey; tests whose checks must end raise it.
var endedCheckTimeout = time.Second

var (
	// endedCheck is held while a check of [connectionEnded] runs.
	endedCheck atomic.Bool
	// EndedChecksTimedOut counts the checks of whether a FUSE
	// connection ended that were not done within their bound, and
	// EndedChecksSkipped those not made because an earlier one was still
	// running; the mount pod's metrics report both.
	EndedChecksTimedOut, EndedChecksSkipped atomic.Int64
)

// checkCopy is [copyEnded], but in tests of a check that does not end.
var checkCopy = copyEnded

// fuseDeviceNumber is the FUSE device's number, 10:229.
var fuseDeviceNumber = unix.Mkdev(10, 229)

// copyEnded is [connectionEnded]'s check, of descriptor n of the process
// of pidfd.
func copyEnded(pidfd, n int, c uint64) bool {
	own, err := unix.PidfdGetfd(pidfd, n, 0)
	if err != nil {
		return false
	}
	defer unix.Close(own)
	var st unix.Statx_t
	if err := unix.Statx(own, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &st); err != nil ||
		st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Mkdev(st.Rdev_major, st.Rdev_minor) != fuseDeviceNumber {
		return false
	}
	info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(own))
	if err != nil {
		return false
	}
	if got, named := fdinfoConnection(string(info)); !named || got != c {
		return false
	}
	p := []unix.PollFd{{Fd: int32(own), Events: unix.POLLIN}}
	if _, err := unix.Poll(p, 0); err != nil {
		return false
	}
	return p[0].Revents&unix.POLLERR != 0
}

// fdinfoConnection returns the FUSE connection an fdinfo names, if any.
func fdinfoConnection(info string) (uint64, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "fuse_connection:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return c, err == nil
		}
	}
	return 0, false
}

// namedTargets returns the targets that are arguments (after the
// program's name) of the process whose /proc directory is dir.
func namedTargets(dir string, targets map[string]bool) []string {
	data, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil || len(data) == 0 {
		return nil
	}
	var out []string
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	for _, a := range args[1:] {
		if targets[a] {
			out = append(out, a)
		}
	}
	return out
}

// StatWithin stats path, giving up after d (a hung FUSE daemon can block
// stat for as long as it likes; the goroutine is left to finish).
func StatWithin(ctx context.Context, path string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(path)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("stat %s: no answer within %s", path, d)
	}
}
