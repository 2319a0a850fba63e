package scope

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// errNoSystemd is wrapped by newSystemd when no configured socket leads to
// a systemd that answers.
var errNoSystemd = errors.New("systemd does not answer")

// ErrNoAnswer is wrapped by [New]'s error when a socket took the
// connection but systemd did not answer within [Config.Timeout]: a systemd
// busy with a node's pods is still the node's systemd, and scopes made by
// hand beside it would be where neither the mount pod's other processes
// nor systemd look for them. So New does not fall back to cgroupfs then;
// [NewRetrying] asks again.
var ErrNoAnswer = errors.New("no answer")

// D-Bus error names of systemd this backend handles.
const (
	errUnitExists = "org.freedesktop.systemd1.UnitExists"
	errNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"
)

// systemd makes scopes as transient scope units of systemd, through its
// D-Bus API.
type systemd struct {
	cfg     Config
	socket  string
	version string
	conn    *sdbus.Conn
	// raw is one of conn's two connections, for the one call go-systemd
	// does not wrap (GetUnitProcesses).
	raw *dbus.Conn
	// v2 is the cgroup2 hierarchy systemd tracks its units in, under
	// Config.CgroupRoot, or "" (systemd_events.go).
	v2     string
	cancel context.CancelFunc
	once   sync.Once
}

var _ Manager = (*systemd)(nil)

// newSystemd connects to systemd on the first of cfg.SystemdSockets that
// exists and answers.
func newSystemd(cfg Config) (*systemd, error) {
	var errs []error
	slow := false
	for _, sock := range cfg.SystemdSockets {
		fi, err := os.Stat(sock)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if fi.Mode().Type() != fs.ModeSocket {
			errs = append(errs, fmt.Errorf("%s is not a socket", sock))
			continue
		}
		s, err := dialSystemd(cfg, sock)
		if err != nil {
			slow = slow || errors.Is(err, ErrNoAnswer)
			errs = append(errs, fmt.Errorf("%s: %w", sock, err))
			continue
		}
		return s, nil
	}
	if slow {
		return nil, fmt.Errorf("systemd took the connection but did not answer; not falling back to cgroupfs beside it (MOUNTPOD_SCOPE_BACKEND=cgroupfs chooses that): %w", errors.Join(errs...))
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("no socket configured"))
	}
	return nil, fmt.Errorf("%w: %w", errNoSystemd, errors.Join(errs...))
}

// dialSystemd connects to systemd at sock and asks for its version. A
// socket named "private" is systemd's own peer-to-peer socket; any other
// is a message bus, which wants a Hello first.
func dialSystemd(cfg Config, sock string) (*systemd, error) {
	// The connections live until Close cancels ctx; until systemd has
	// answered, a timer cancels it too, so that a hung peer cannot block.
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(cfg.Timeout, cancel)
	s := &systemd{cfg: cfg, socket: sock, cancel: cancel, v2: v2Root(cfg.CgroupRoot)}
	peer := filepath.Base(sock) == "private"
	var err error
	s.conn, err = sdbus.NewConnection(func() (*dbus.Conn, error) {
		c, err := dbus.Dial("unix:path="+sock, dbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, fmt.Errorf("authenticate: %w", err)
		}
		if !peer {
			if err := c.Hello(); err != nil {
				c.Close()
				return nil, fmt.Errorf("hello: %w", err)
			}
		}
		if s.raw == nil {
			s.raw = c
		}
		return c, nil
	})
	if err == nil {
		s.version, err = s.conn.GetManagerProperty("Version")
		if err != nil {
			s.conn.Close()
		}
	}
	if !timer.Stop() {
		// The timer cancelled the dial, or fired as the answer came.
		if err == nil {
			s.conn.Close()
		}
		err = fmt.Errorf("%w within %v", ErrNoAnswer, cfg.Timeout)
	}
	if err != nil {
		cancel()
		return nil, dbusError(err)
	}
	return s, nil
}

func (s *systemd) Backend() Backend { return BackendSystemd }

func (s *systemd) Close() error {
	s.once.Do(func() {
		s.conn.Close()
		s.cancel()
	})
	return nil
}

func (s *systemd) Place(plugin, target string, pid int) (Scope, error) {
	if err := validate(plugin, target); err != nil {
		return Scope{}, err
	}
	if pid < 0 {
		return Scope{}, fmt.Errorf("invalid PID %d", pid)
	}
	slice, err := SliceName(s.cfg.Parent, plugin)
	if err != nil {
		return Scope{}, err
	}
	sc := Scope{Plugin: plugin, Name: Name(target)}
	sc.Unit = sc.Name + ".scope"
	sc.Cgroup = slicePath(slice) + "/" + sc.Unit
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	fail := func(err error) (Scope, error) {
		return sc, fmt.Errorf("place %s in scope unit %s of plugin %s (slice %s, systemd %s on %s): %w", who(pid), sc.Unit, plugin, slice, s.version, s.socket, err)
	}
	// Its cgroups until now, for the v1 hierarchies systemd leaves it in
	// (systemd_v1.go).
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	before, err := readMembershipOf(s.cfg.ProcRoot, proc)
	if err != nil {
		return fail(fmt.Errorf("read its cgroups: %w", err))
	}
	if err := s.place(ctx, sc.Unit, slice, target, plugin, uint32(pid)); err != nil {
		return fail(err)
	}
	after, err := readMembershipOf(s.cfg.ProcRoot, proc)
	if err != nil {
		return fail(fmt.Errorf("read its cgroups: %w", err))
	}
	if placedIn(after, sc.Cgroup) {
		if _, err := s.leaveCaller(pid, before, after); err != nil {
			return fail(fmt.Errorf("the cgroup v1 hierarchies systemd left it in: %w", err))
		}
	}
	return sc, nil
}

// place starts the transient scope unit with pid in it (PID 0 is the
// caller, as systemd resolves it from the connection's credentials), and
// sets the slice's memory limit.
//
// A unit of that name may exist still: systemd collects a scope unit some
// time after its last process went, and a recovery's remount comes right
// after it killed the dead mount's leftovers. systemd moves no process
// into a unit it does not delegate ("Process migration not available on
// non-delegated units"), so an empty unit of the plugin's slice is
// stopped, then started again with pid. A unit that still holds a process
// is another daemon of the same target: an error naming its processes.
func (s *systemd) place(ctx context.Context, unit, slice, target, plugin string, pid uint32) error {
	props := []sdbus.Property{
		sdbus.PropPids(pid),
		sdbus.PropSlice(slice),
		sdbus.PropDescription("mountcontainers: " + plugin + " mount " + target),
		// Unload the unit once its processes are gone, failed or not.
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
	}
	var unlock func()
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	for stops := 0; ; stops++ {
		done := make(chan string, 1)
		_, err := s.conn.StartTransientUnitContext(ctx, unit, "fail", props, done)
		if dbusErrorName(err) == errUnitExists && stops < maxUnitStops {
			if unlock == nil {
				// Two places of the target that both find its unit
				// empty take turns: the second finds the first's unit
				// populated, and stops nothing.
				if unlock, err = s.lockSlice(ctx, slice); err != nil {
					return err
				}
			}
			// A stopped unit goes once systemd collects it, on its
			// next turn as a rule: a few more looks, a moment apart.
			if stops > 0 {
				select {
				case <-ctx.Done():
					return fmt.Errorf("start transient unit: the unit stopped is still there: %w", ctx.Err())
				case <-time.After(time.Duration(stops) * 20 * time.Millisecond):
				}
			}
			if err := s.replaceEmpty(ctx, slice, unit); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("start transient unit: %w", dbusError(err))
		}
		select {
		case result := <-done:
			if result != "done" {
				return fmt.Errorf("start transient unit: job %s", result)
			}
		case <-ctx.Done():
			return fmt.Errorf("start transient unit: waiting for the job: %w", ctx.Err())
		}
		return s.limitSlice(ctx, slice)
	}
}

// lockSlice takes an exclusive flock(2) of slice's directory in the
// cgroup hierarchy systemd tracks its units in, within ctx, and returns
// the unlock function. Where that directory does not exist (no unit of
// the slice: a unit of the name elsewhere, which remove refuses), it
// locks nothing. The lock is the slice's, not the unit's: a unit's
// directory goes with it, and a lock of the next one's would be another
// lock; only places that find a unit of their name left wait on it.
func (s *systemd) lockSlice(ctx context.Context, slice string) (func(), error) {
	root := s.v2
	if root == "" {
		root = filepath.Join(s.cfg.CgroupRoot, "systemd")
	}
	dir := filepath.Join(root, slicePath(slice))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	wait := s.cfg.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		wait = time.Until(deadline)
	}
	if err := flockWithin(fd, wait); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// maxUnitStops bounds how often place stops a unit of its name that
// exists still before it gives up.
const maxUnitStops = 5

// replaceEmpty stops unit, which exists, so that it can be started again:
// only when it is in slice and holds no process.
func (s *systemd) replaceEmpty(ctx context.Context, slice, unit string) error {
	err := s.remove(ctx, slice, unit)
	if errors.Is(err, ErrPopulated) {
		return fmt.Errorf("the unit exists and still holds processes, another daemon of this target (systemd moves no process into a unit it does not delegate): %w", err)
	}
	if err != nil {
		return fmt.Errorf("the unit exists, left by an earlier daemon; stop it: %w", err)
	}
	return nil
}

// limitSlice sets the configured limits of the plugin's slice: MemoryMax=
// and TasksMax=.
func (s *systemd) limitSlice(ctx context.Context, slice string) error {
	var props []sdbus.Property
	if s.cfg.MemoryLimit > 0 {
		props = append(props, sdbus.Property{Name: "MemoryMax", Value: dbus.MakeVariant(uint64(s.cfg.MemoryLimit))})
	}
	if s.cfg.PidsLimit > 0 {
		props = append(props, sdbus.Property{Name: "TasksMax", Value: dbus.MakeVariant(uint64(s.cfg.PidsLimit))})
	}
	if len(props) == 0 {
		return nil
	}
	if err := s.conn.SetUnitPropertiesContext(ctx, slice, true, props...); err != nil {
		return fmt.Errorf("set the limits of %s: %w", slice, dbusError(err))
	}
	return nil
}

// unitProcess is one entry of GetUnitProcesses: cgroup, PID, command line.
type unitProcess struct {
	Cgroup  string
	PID     uint32
	Command string
}

// processes returns the processes of unit and the units below it, or
// ok false for a unit systemd does not know.
func (s *systemd) processes(ctx context.Context, unit string) (procs []unitProcess, ok bool, err error) {
	obj := s.raw.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
	err = obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager.GetUnitProcesses", 0, unit).Store(&procs)
	if dbusErrorName(err) == errNoSuchUnit {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("processes of %s: %w", unit, dbusError(err))
	}
	return procs, true, nil
}

func (s *systemd) List(plugin string) ([]Scope, error) {
	slice, err := SliceName(s.cfg.Parent, plugin)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	procs, _, err := s.processes(ctx, slice)
	if err != nil {
		return nil, fmt.Errorf("list scopes of plugin %s: %w", plugin, err)
	}
	prefix := slicePath(slice) + "/"
	byName := map[string]*Scope{}
	for _, p := range procs {
		rest, ok := strings.CutPrefix(p.Cgroup, prefix)
		if !ok {
			continue
		}
		unit, _, _ := strings.Cut(rest, "/")
		name, ok := strings.CutSuffix(unit, ".scope")
		if !ok || !boundary.ValidMountKey(name) {
			continue
		}
		sc := byName[name]
		if sc == nil {
			sc = &Scope{Plugin: plugin, Name: name, Unit: unit, Cgroup: prefix + unit}
			byName[name] = sc
		}
		sc.PIDs = append(sc.PIDs, int(p.PID))
	}
	var scopes []Scope
	for _, sc := range byName {
		slices.Sort(sc.PIDs)
		sc.PIDs = slices.Compact(sc.PIDs)
		scopes = append(scopes, *sc)
	}
	slices.SortFunc(scopes, func(a, b Scope) int { return strings.Compare(a.Name, b.Name) })
	return scopes, nil
}

func (s *systemd) Remove(plugin, name string) error {
	slice, err := SliceName(s.cfg.Parent, plugin)
	if err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	unit := name + ".scope"
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	err = s.remove(ctx, slice, unit)
	if err != nil {
		return fmt.Errorf("remove scope unit %s of plugin %s: %w", unit, plugin, err)
	}
	return nil
}

func (s *systemd) Kill(plugin, name string, wait time.Duration) ([]int, error) {
	slice, err := SliceName(s.cfg.Parent, plugin)
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	unit := name + ".scope"
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout+wait)
	defer cancel()
	checked := false
	procs := func() ([]int, error) {
		ps, ok, err := s.processes(ctx, unit)
		if err != nil || !ok || len(ps) == 0 {
			return nil, err
		}
		if !checked {
			// Never signal a unit of the same name in another slice.
			if err := s.inSlice(ctx, slice, unit); err != nil {
				return nil, err
			}
			checked = true
		}
		pids := make([]int, len(ps))
		for i, p := range ps {
			pids[i] = int(p.PID)
		}
		return pids, nil
	}
	// Killed by the unit: systemd finds and signals the processes of the
	// unit's cgroup itself (through pidfds since systemd 254), never a
	// PID read here; pids is only what Kill reports.
	kill := func(pids []int) ([]int, error) {
		err := s.conn.KillUnitWithTarget(ctx, unit, sdbus.All, int32(unix.SIGKILL))
		if err != nil && dbusErrorName(err) != errNoSuchUnit {
			return nil, fmt.Errorf("kill: %w", dbusError(err))
		}
		return pids, nil
	}
	killed, err := killUntilEmpty(unit, wait, procs, kill)
	if err != nil {
		return killed, fmt.Errorf("kill the processes of scope unit %s of plugin %s: %w", unit, plugin, err)
	}
	return killed, nil
}

// inSlice fails unless unit is in slice.
func (s *systemd) inSlice(ctx context.Context, slice, unit string) error {
	prop, err := s.conn.GetUnitTypePropertyContext(ctx, unit, "Scope", "Slice")
	if err != nil {
		return fmt.Errorf("slice of %s: %w", unit, dbusError(err))
	}
	if got, _ := prop.Value.Value().(string); got != slice {
		return fmt.Errorf("%s is in slice %q, not %s: not ours", unit, got, slice)
	}
	return nil
}

func (s *systemd) remove(ctx context.Context, slice, unit string) error {
	// GetUnitProcesses tells a unit systemd does not know (NoSuchUnit);
	// a property does not: systemd answers it for a stub it loads then,
	// with an empty slice.
	procs, ok, err := s.processes(ctx, unit)
	if err != nil || !ok {
		return err
	}
	// Never stop a unit of the same name in another slice, nor name its
	// processes.
	prop, err := s.conn.GetUnitTypePropertyContext(ctx, unit, "Scope", "Slice")
	if dbusErrorName(err) == errNoSuchUnit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("slice of %s: %w", unit, dbusError(err))
	}
	got, _ := prop.Value.Value().(string)
	if got == "" {
		return nil // collected since
	}
	if got != slice {
		return fmt.Errorf("%s is in slice %q, not %s: not ours", unit, got, slice)
	}
	if len(procs) > 0 {
		var pids []int
		for _, p := range procs {
			pids = append(pids, int(p.PID))
		}
		return fmt.Errorf("%w: %v in %s", ErrPopulated, pids, unit)
	}
	done := make(chan string, 1)
	_, err = s.conn.StopUnitContext(ctx, unit, "fail", done)
	if dbusErrorName(err) == errNoSuchUnit {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop: %w", dbusError(err))
	}
	select {
	case result := <-done:
		if result != "done" {
			return fmt.Errorf("stop: job %s", result)
		}
	case <-ctx.Done():
		return fmt.Errorf("stop: waiting for the job: %w", ctx.Err())
	}
	// A unit already collected is no error.
	if err := s.conn.ResetFailedUnitContext(ctx, unit); err != nil && dbusErrorName(err) != errNoSuchUnit {
		return fmt.Errorf("reset failed state: %w", dbusError(err))
	}
	return nil
}

// slicePath returns where systemd puts a slice in the cgroup tree: each
// dash-separated prefix is a parent slice, so "a-b-c.slice" lives at
// /a.slice/a-b.slice/a-b-c.slice.
func slicePath(slice string) string {
	name := strings.TrimSuffix(slice, ".slice")
	var p, prefix string
	for _, part := range strings.Split(name, "-") {
		if prefix != "" {
			prefix += "-"
		}
		prefix += part
		p = path.Join(p, prefix+".slice")
	}
	return "/" + p
}

// dbusErrorName returns the D-Bus error name of err, or "".
func dbusErrorName(err error) string {
	var e dbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	var pe *dbus.Error
	if errors.As(err, &pe) {
		return pe.Name
	}
	return ""
}

// dbusError adds the D-Bus error name to err's message, which godbus
// leaves out.
func dbusError(err error) error {
	if name := dbusErrorName(err); name != "" {
		return fmt.Errorf("%s: %w", name, err)
	}
	return err
}
