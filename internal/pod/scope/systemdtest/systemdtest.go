// Package systemdtest is a fake systemd manager for tests: it runs a private
// dbus-daemon and serves, on that bus, the part of
// org.freedesktop.systemd1.Manager that package scope uses, recording what
// it is asked. Real systemd cannot be started in a test (it wants to be PID
// 1), so this is what the systemd backend is tested against.
package systemdtest

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// Version is the fake's Version property.
const Version = "252-fake"

const (
	busName     = "org.freedesktop.systemd1"
	managerPath = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerIf   = "org.freedesktop.systemd1.Manager"
	unitPrefix  = "/org/freedesktop/systemd1/unit"
)

// busConfig is the dbus-daemon configuration: a bus on one socket that
// lets anyone own any name and send anything.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`

// StartBus starts a private dbus-daemon and returns its socket; t.Cleanup
// stops it. It skips the test, saying why, when dbus-daemon is not
// installed (Debian package dbus-daemon).
func StartBus(t testing.TB) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("dbus-daemon is not installed (Debian: apt-get install dbus-daemon): the systemd backend cannot be tested against the fake systemd")
	}
	// A short directory: a unix socket path holds at most 107 bytes.
	dir, err := os.MkdirTemp("", "sdt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, busConfig, sock), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The address is printed once the bus listens.
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, "unix:") {
			t.Fatalf("dbus-daemon did not start: %q\n%s", s, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("dbus-daemon did not print its address within 10s\n%s", stderr.String())
	}
	return sock
}

// Unit is a unit the fake has been asked to start.
type Unit struct {
	Name string
	// Mode is the job mode of StartTransientUnit.
	Mode string
	// Properties are the properties as sent, by name.
	Properties map[string]any
	// Slice is the Slice property.
	Slice string
	// PIDs are the processes given, PID 0 resolved to the caller's PID
	// as systemd does; AttachProcessesToUnit adds to them (a unit made with
	// Delegate=yes only, as systemd).
	PIDs []uint32
	// Stopped is set by StopUnit.
	Stopped bool
	// SliceProperties are the properties SetUnitProperties set on Slice.
	SliceProperties map[string]any
}

// Systemd is the fake manager.
type Systemd struct {
	conn *dbus.Conn

	mu          sync.Mutex
	units       map[string]*Unit
	sliceProps  map[string]map[string]any
	calls       []string
	jobs        uint32
	startResult string
}

// Serve claims org.freedesktop.systemd1 on the bus at socket and serves the
// fake manager until t ends.
func Serve(t testing.TB, socket string) *Systemd {
	t.Helper()
	conn, err := dbus.Connect("unix:path=" + socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &Systemd{conn: conn, units: map[string]*Unit{}, sliceProps: map[string]map[string]any{}}
	if err := conn.Export(manager{s}, managerPath, managerIf); err != nil {
		t.Fatal(err)
	}
	if err := conn.Export(managerProps{}, managerPath, "org.freedesktop.DBus.Properties"); err != nil {
		t.Fatal(err)
	}
	if err := conn.ExportSubtree(unitProps{s}, unitPrefix, "org.freedesktop.DBus.Properties"); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(busName, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("request name %s: %v, %v", busName, reply, err)
	}
	return s
}

// Unit returns a copy of the unit called name.
func (s *Systemd) Unit(name string) (Unit, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.units[name]
	if !ok {
		return Unit{}, false
	}
	c := *u
	c.PIDs = slices.Clone(u.PIDs)
	c.Properties = maps.Clone(u.Properties)
	c.SliceProperties = maps.Clone(s.sliceProps[u.Slice])
	return c, true
}

// Calls returns the manager methods called so far, in order, as
// "Method arg", such as "StartTransientUnit mount-0123456789abcdef.scope".
func (s *Systemd) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// AddProcess adds pid to the processes of unit name, as a child forked by
// one of its processes joins its unit; it fails for a unit not loaded.
func (s *Systemd) AddProcess(name string, pid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.units[name]
	if !ok || u.Stopped {
		return fmt.Errorf("unit %s not loaded", name)
	}
	u.PIDs = append(u.PIDs, pid)
	return nil
}

// SetStartResult makes the jobs of later StartTransientUnit calls end with
// result (such as "failed") instead of "done".
func (s *Systemd) SetStartResult(result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startResult = result
}

// slicePath is where systemd puts a slice: "a-b.slice" at /a.slice/a-b.slice.
func slicePath(slice string) string {
	parts := strings.Split(strings.TrimSuffix(slice, ".slice"), "-")
	p := "/"
	for i := range parts {
		p = path.Join(p, strings.Join(parts[:i+1], "-")+".slice")
	}
	return p
}

// alive reports whether process pid exists and has not exited: a zombie
// is in no cgroup, so systemd lists it in no unit.
func alive(pid uint32) bool {
	if syscall.Kill(int(pid), 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "PID (comm) S ...": the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// senderPID asks the bus for the PID of a connection.
func (s *Systemd) senderPID(sender dbus.Sender) (uint32, error) {
	var pid uint32
	err := s.conn.BusObject().Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, string(sender)).Store(&pid)
	return pid, err
}

// job emits JobRemoved for a new job of unit. The signal may reach the
// caller before the reply, as it can from systemd when the job is quick;
// go-systemd waits for the reply before it looks at the signal.
func (s *Systemd) job(unit, result string) dbus.ObjectPath {
	s.jobs++
	id := s.jobs
	p := dbus.ObjectPath(fmt.Sprintf("/org/freedesktop/systemd1/job/%d", id))
	go s.conn.Emit(managerPath, managerIf+".JobRemoved", id, p, unit, result)
	return p
}

// property is the (sv) of systemd's property arrays.
type property struct {
	Name  string
	Value dbus.Variant
}

// auxUnit is the (sa(sv)) of StartTransientUnit's auxiliary units.
type auxUnit struct {
	Name       string
	Properties []property
}

// process is the (sus) of GetUnitProcesses.
type process struct {
	Cgroup  string
	PID     uint32
	Command string
}

// manager is the exported org.freedesktop.systemd1.Manager.
type manager struct{ s *Systemd }

func noSuchUnit(name string) *dbus.Error {
	return dbus.NewError("org.freedesktop.systemd1.NoSuchUnit", []any{"Unit " + name + " not loaded."})
}

func (m manager) StartTransientUnit(sender dbus.Sender, name, mode string, props []property, aux []auxUnit) (dbus.ObjectPath, *dbus.Error) {
	s := m.s
	u := &Unit{Name: name, Mode: mode, Properties: map[string]any{}}
	for _, p := range props {
		u.Properties[p.Name] = p.Value.Value()
	}
	u.Slice, _ = u.Properties["Slice"].(string)
	pids, _ := u.Properties["PIDs"].([]uint32)
	for _, pid := range pids {
		if pid == 0 {
			var err error
			if pid, err = s.senderPID(sender); err != nil {
				return "", dbus.MakeFailedError(err)
			}
		}
		u.PIDs = append(u.PIDs, pid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "StartTransientUnit "+name)
	if old, ok := s.units[name]; ok && !old.Stopped {
		return "", dbus.NewError("org.freedesktop.systemd1.UnitExists", []any{"Unit " + name + " was already loaded or has a fragment file."})
	}
	if len(u.PIDs) == 0 {
		return "", dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{"No PIDs"})
	}
	result := "done"
	if s.startResult != "" {
		result = s.startResult
	} else {
		s.units[name] = u
	}
	return s.job(name, result), nil
}

func (m manager) AttachProcessesToUnit(sender dbus.Sender, name, subcgroup string, pids []uint32) *dbus.Error {
	s := m.s
	for i, pid := range pids {
		if pid == 0 {
			var err error
			if pids[i], err = s.senderPID(sender); err != nil {
				return dbus.MakeFailedError(err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "AttachProcessesToUnit "+name)
	u, ok := s.units[name]
	if !ok || u.Stopped {
		return noSuchUnit(name)
	}
	// As systemd (since AttachProcessesToUnit exists, v238): only into a
	// unit made with Delegate=yes.
	if d, _ := u.Properties["Delegate"].(bool); !d {
		return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{"Process migration not available on non-delegated units."})
	}
	u.PIDs = append(u.PIDs, pids...)
	return nil
}

func (m manager) GetUnitProcesses(name string) ([]process, *dbus.Error) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "GetUnitProcesses "+name)
	var out []process
	found := false
	for _, u := range s.units {
		if u.Stopped || (u.Name != name && u.Slice != name) {
			continue
		}
		found = true
		for _, pid := range u.PIDs {
			if alive(pid) {
				out = append(out, process{slicePath(u.Slice) + "/" + u.Name, pid, "fake"})
			}
		}
	}
	_, isSlice := s.sliceProps[name]
	if !found && !isSlice {
		return nil, noSuchUnit(name)
	}
	slices.SortFunc(out, func(a, b process) int { return int(a.PID) - int(b.PID) })
	return out, nil
}

// called records a call of method on unit name and returns the unit, or
// NoSuchUnit when it is not loaded; s.mu is held.
func (s *Systemd) called(method, name string) (*Unit, *dbus.Error) {
	s.calls = append(s.calls, method+" "+name)
	u, ok := s.units[name]
	if !ok || u.Stopped {
		return nil, noSuchUnit(name)
	}
	return u, nil
}

func (m manager) StopUnit(name, mode string) (dbus.ObjectPath, *dbus.Error) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.called("StopUnit", name)
	if err != nil {
		return "", err
	}
	u.Stopped = true
	return s.job(name, "done"), nil
}

// KillUnit signals the live processes of unit name, whom "all" only (the
// one scope units take).
func (m manager) KillUnit(name, whom string, signal int32) *dbus.Error {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.called("KillUnit", name)
	if err != nil {
		return err
	}
	if whom != "all" {
		return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{"whom " + whom + ": the fake kills all"})
	}
	for _, pid := range u.PIDs {
		if alive(pid) {
			if err := syscall.Kill(int(pid), syscall.Signal(signal)); err != nil && err != syscall.ESRCH {
				return dbus.MakeFailedError(err)
			}
		}
	}
	return nil
}

func (m manager) ResetFailedUnit(name string) *dbus.Error {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "ResetFailedUnit "+name)
	if _, ok := s.units[name]; !ok {
		return noSuchUnit(name)
	}
	return nil
}

func (m manager) SetUnitProperties(name string, runtime bool, props []property) *dbus.Error {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, "SetUnitProperties "+name)
	if s.sliceProps[name] == nil {
		s.sliceProps[name] = map[string]any{}
	}
	for _, p := range props {
		s.sliceProps[name][p.Name] = p.Value.Value()
	}
	return nil
}

// managerProps serves the manager's properties: only Version.
type managerProps struct{}

func (managerProps) Get(iface, name string) (dbus.Variant, *dbus.Error) {
	if iface == managerIf && name == "Version" {
		return dbus.MakeVariant(Version), nil
	}
	return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{iface + "." + name})
}

// unitProps serves the properties of units: Slice and ControlGroup of
// scopes.
type unitProps struct{ s *Systemd }

func (p unitProps) Get(msg dbus.Message, iface, name string) (dbus.Variant, *dbus.Error) {
	objPath, _ := msg.Headers[dbus.FieldPath].Value().(dbus.ObjectPath)
	unit := unescape(path.Base(string(objPath)))
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	u, ok := p.s.units[unit]
	if !ok || u.Stopped {
		// As systemd: it loads a stub of a unit it does not know, and
		// answers its properties, empty.
		switch {
		case iface == "org.freedesktop.systemd1.Scope" && (name == "Slice" || name == "ControlGroup"):
			return dbus.MakeVariant(""), nil
		}
		return dbus.Variant{}, noSuchUnit(unit)
	}
	switch {
	case iface == "org.freedesktop.systemd1.Scope" && name == "Slice":
		return dbus.MakeVariant(u.Slice), nil
	case iface == "org.freedesktop.systemd1.Scope" && name == "ControlGroup":
		return dbus.MakeVariant(slicePath(u.Slice) + "/" + u.Name), nil
	}
	return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{iface + "." + name})
}

// unescape reverses systemd's object path escaping (_XX for a byte).
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && i+2 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+3], "%02x", &c); err == nil {
				b.WriteByte(c)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
