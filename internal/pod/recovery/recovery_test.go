package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	plugin = "kubernetes.io/glusterfs"
	podUID = "3e1c1d2e-0000-4000-8000-000000000001"
	target = "/var/lib/kubelet/pods/a/volumes/kubernetes.io~glusterfs/data"
)

// bed is a registration directory with this pod registered, a mount table
// with target mounted (device 0:77), a /proc where a container holds a bind
// of it (and another one of 0:81, a later mount of the same volume), and
// fakes for what a real dead FUSE mount would do.
type bed struct {
	t         *testing.T
	r         *Recoverer
	mountinfo string
	proc      *fakeProc
	// newMinor is the minor device number the next mount gets.
	newMinor  int
	mu        sync.Mutex
	health    map[string]error // path -> what stat answers
	calls     []string
	failMount error
	attachErr error
	attached  []DeadMount
	reports   reports
}

// reports is a Reporter that keeps what it hears.
type reports struct {
	mu   sync.Mutex
	seen []string
}

func (r *reports) Recovered(rec mountrecord.Record, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, fmt.Sprintf("recovered %s (%d attached)", rec.Target, len(res.Attached)))
}

func (r *reports) Failed(rec mountrecord.Record, attempt int, retryIn time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, fmt.Sprintf("failed %s attempt %d retry in %s: %v", rec.Target, attempt, retryIn, err))
}

func (r *reports) Refused(rec mountrecord.Record, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, fmt.Sprintf("refused %s: %v", rec.Target, err))
}

func (r *reports) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func newBed(t *testing.T) *bed {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "plugin-containers")
	if err := registration.Write(dir, plugin, registration.Registration{PodNamespace: "kube-system", PodName: "glusterfs-mountpod-x", PodUID: podUID, ContainerName: "mount"}); err != nil {
		t.Fatal(err)
	}
	b := &bed{t: t, health: map[string]error{}, mountinfo: filepath.Join(t.TempDir(), "mountinfo"), proc: newFakeProc(t), newMinor: 90}
	b.setMounted(true)
	b.proc.process("20", "2", "900 800 0:50 / / rw - overlay overlay rw\n901 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")
	b.proc.process("40", "4", "900 800 0:50 / / rw - overlay overlay rw\n903 900 0:81 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")
	b.r = &Recoverer{Dir: dir, Plugins: []string{plugin}, PodUID: podUID, MountInfo: b.mountinfo, ProcRoot: b.proc.dir,
		Backoff: 50 * time.Millisecond, Reporter: &b.reports}
	b.r.stat = func(_ context.Context, p string) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.health[p]
	}
	b.r.Command = func(_ context.Context, name string, args ...string) ([]byte, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.calls = append(b.calls, strings.Join(append([]string{name}, args...), " "))
		if name == "mount" {
			if b.failMount != nil {
				return []byte("mount error: no server"), b.failMount
			}
			b.health[args[len(args)-1]] = nil // the new daemon answers
			b.mountedAs(b.newMinor)
			b.newMinor++
		}
		return nil, nil
	}
	b.r.Reattach = func(_ context.Context, _ string, dead DeadMount, _ string) ([]Attached, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.attached = append(b.attached, dead)
		if b.attachErr != nil {
			return nil, b.attachErr
		}
		return []Attached{{PID: 4242, MountPoint: "/data", Root: "/"}}, nil
	}
	return b
}

func (b *bed) setMounted(mounted bool) {
	b.t.Helper()
	if mounted {
		b.mountedAs(77)
		return
	}
	if err := os.WriteFile(b.mountinfo, []byte("30 25 0:40 / / rw - overlay overlay rw\n"), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// mountedAs makes the mount table show the volume at target with device
// 0:minor.
func (b *bed) mountedAs(minor int) {
	b.t.Helper()
	line := "30 25 0:40 / / rw - overlay overlay rw\n" +
		fmt.Sprintf("812 30 0:%d / %s rw,relatime shared:1 - fuse.glusterfs srv:/vol rw,user_id=0\n", minor, target)
	if err := os.WriteFile(b.mountinfo, []byte(line), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) record(r mountrecord.Record) {
	b.t.Helper()
	if err := mountrecord.Write(filepath.Join(b.r.Dir, mountrecord.Dir), r); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bed) kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.health[target] = &os.PathError{Op: "stat", Path: target, Err: syscall.ENOTCONN}
}

func (b *bed) pass() Result {
	b.t.Helper()
	res := b.r.Pass(context.Background())
	if len(res) != 1 {
		b.t.Fatalf("pass: %+v; want one result", res)
	}
	return res[0]
}

// gluster returns the identity of a mount of the bed's volume with device
// 0:minor.
func gluster(minor int) Identity {
	return Identity{Device: Device{0, minor}, FSType: "fuse.glusterfs", Source: "srv:/vol"}
}

// dead77 is the bed's mount at target, dead.
var dead77 = DeadMount{Mounts: []Identity{gluster(77)}, Target: target}

func equalDead(a, b DeadMount) bool {
	return a.Target == b.Target && slices.Equal(a.Mounts, b.Mounts)
}

func glusterRecord() mountrecord.Record {
	return mountrecord.Record{Plugin: plugin, Source: "srv:/vol", Target: target, FSType: "glusterfs", Options: []string{"log-level=WARNING", "ro"}}
}

func TestDeadMountComesBack(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	if res := b.pass(); res.Action != "healthy" || len(b.calls) != 0 {
		t.Fatalf("healthy mount: %+v, calls %q", res, b.calls)
	}
	b.kill()
	res := b.pass()
	if res.Action != "recovered" || res.Err != nil || len(res.Attached) != 1 {
		t.Fatalf("dead mount: %+v", res)
	}
	want := []string{"umount -l " + target, "mount -t glusterfs -o log-level=WARNING,ro srv:/vol " + target}
	if !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q", b.calls, want)
	}
	if len(b.attached) != 1 || !equalDead(b.attached[0], dead77) {
		t.Errorf("attached %+v; want the dead mount 0:77", b.attached)
	}
	if res := b.pass(); res.Action != "healthy" {
		t.Errorf("after recovery: %+v", res)
	}
	if got, want := b.reports.get(), []string{"recovered " + target + " (1 attached)"}; !slices.Equal(got, want) {
		t.Errorf("reported %q, want %q", got, want)
	}
}

func TestFailedRecoveryBacksOff(t *testing.T) {
	b := newBed(t)
	// Long enough that the passes below fit in it under the race detector.
	b.r.Backoff = 300 * time.Millisecond
	b.record(glusterRecord())
	b.kill()
	b.failMount = errors.New("exit status 1")
	if res := b.pass(); res.Action != "failed" || !strings.Contains(res.Err.Error(), "no server") {
		t.Fatalf("first attempt: %+v", res)
	}
	// Within the back-off nothing runs, however often the loop passes.
	for range 20 {
		if res := b.pass(); res.Action != "waiting" {
			t.Fatalf("during the back-off: %+v", res)
		}
	}
	if n := len(b.calls); n != 2 {
		t.Fatalf("%d commands during the back-off, want the first attempt's 2: %q", n, b.calls)
	}
	time.Sleep(310 * time.Millisecond)
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("second attempt: %+v", res)
	}
	// The second wait is twice the first.
	time.Sleep(310 * time.Millisecond)
	if res := b.pass(); res.Action != "waiting" {
		t.Fatalf("the back-off did not grow: %+v", res)
	}
	time.Sleep(310 * time.Millisecond)
	b.failMount = nil
	if res := b.pass(); res.Action != "recovered" {
		t.Fatalf("third attempt: %+v", res)
	}
	got := b.reports.get()
	if len(got) != 3 || !strings.HasPrefix(got[0], "failed "+target+" attempt 1 retry in 300ms: ") || !strings.Contains(got[0], "no server") ||
		!strings.HasPrefix(got[1], "failed "+target+" attempt 2 retry in 600ms: ") || !strings.HasPrefix(got[2], "recovered ") {
		t.Errorf("reported %q; want two failures, backing off, then the recovery", got)
	}
}

// TestTryNowEndsTheBackoff: after TryNow, a dead mount in its back-off
// is tried at the next pass (the mount pod calls it once systemd, which
// the remount needs, answers), its count of attempts kept.
func TestTryNowEndsTheBackoff(t *testing.T) {
	b := newBed(t)
	b.r.Backoff = time.Hour
	b.record(glusterRecord())
	b.kill()
	b.failMount = errors.New("exit status 1")
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("first attempt: %+v", res)
	}
	if res := b.pass(); res.Action != "waiting" {
		t.Fatalf("during the back-off: %+v", res)
	}
	b.r.TryNow()
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("after TryNow: %+v; want a second attempt at once", res)
	}
	got := b.reports.get()
	if len(got) != 2 || !strings.HasPrefix(got[1], "failed "+target+" attempt 2 retry in 1m0s: ") {
		t.Errorf("reported %q; want the second attempt counted as such", got)
	}
}

func TestAttachRetriedOnceTheNodeIsBack(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	b.kill()
	b.attachErr = errors.New("pid 4242: /data: attach failed")
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("attach failure: %+v", res)
	}
	time.Sleep(60 * time.Millisecond)
	b.attachErr = nil
	if res := b.pass(); res.Action != "recovered" {
		t.Fatalf("retry: %+v", res)
	}
	// The node's mount was made once; the attach was tried twice, for
	// the same dead device.
	if mounts := slices.DeleteFunc(slices.Clone(b.calls), func(c string) bool { return !strings.HasPrefix(c, "mount ") }); len(mounts) != 1 {
		t.Errorf("mount ran %d times, want once: %q", len(mounts), b.calls)
	}
	if len(b.attached) != 2 || !equalDead(b.attached[1], b.attached[0]) {
		t.Errorf("attached %+v; want the same dead mount twice", b.attached)
	}
}

func TestRecordsDroppedOrLeftAlone(t *testing.T) {
	t.Run("unmounted in a kept table only", func(t *testing.T) {
		// The table the pass uses (one kept from an earlier pass, as
		// mountinfo.Table keeps it) lacks the mount that the mount
		// table shows now: the record stays.
		b := newBed(t)
		b.record(glusterRecord())
		stale := filepath.Join(t.TempDir(), "mountinfo")
		if err := os.WriteFile(stale, []byte("30 25 0:40 / / rw - overlay overlay rw\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		b.r.table = mountinfo.NewTable(stale)
		if res := b.pass(); res.Action == "dropped" {
			t.Fatalf("%+v; want the record kept", res)
		}
		if es, _ := mountrecord.List(filepath.Join(b.r.Dir, mountrecord.Dir)); len(es) != 1 {
			t.Fatalf("the record of a mounted target was dropped: %+v", es)
		}
	})
	t.Run("unmounted", func(t *testing.T) {
		b := newBed(t)
		b.record(glusterRecord())
		b.setMounted(false)
		if res := b.pass(); res.Action != "dropped" {
			t.Fatalf("%+v", res)
		}
		if es, _ := mountrecord.List(filepath.Join(b.r.Dir, mountrecord.Dir)); len(es) != 0 {
			t.Fatalf("the record of an unmounted target was kept: %+v", es)
		}
	})
	t.Run("not recoverable", func(t *testing.T) {
		b := newBed(t)
		r := glusterRecord()
		r.Options, r.NotRecoverable = nil, "its options hold a secret"
		b.record(r)
		b.kill()
		if res := b.pass(); res.Action != "not-recoverable" || len(b.calls) != 0 {
			t.Fatalf("%+v, calls %q", res, b.calls)
		}
	})
	t.Run("another pod is registered", func(t *testing.T) {
		b := newBed(t)
		b.record(glusterRecord())
		b.kill()
		b.r.PodUID = "another-pod"
		if res := b.r.Pass(context.Background()); len(res) != 0 || len(b.calls) != 0 {
			t.Fatalf("a pod that does not hold the plugin acted: %+v, %q", res, b.calls)
		}
	})
	t.Run("stat fails, not dead", func(t *testing.T) {
		b := newBed(t)
		b.record(glusterRecord())
		b.health[target] = syscall.EACCES
		if res := b.pass(); res.Action != "healthy" || len(b.calls) != 0 {
			t.Fatalf("a mount whose stat failed without a dead daemon's error was remounted: %+v, %q", res, b.calls)
		}
	})
}

func TestIsDead(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOTCONN, syscall.ECONNABORTED, syscall.EIO, syscall.ESTALE} {
		if !IsDead(&os.PathError{Op: "stat", Path: "/x", Err: errno}) {
			t.Errorf("%v is not dead", errno)
		}
	}
	for _, err := range []error{nil, os.ErrNotExist, syscall.EACCES} {
		if IsDead(err) {
			t.Errorf("%v is dead", err)
		}
	}
}

// TestHolders reads a fake /proc: the namespaces that hold the mount 0:77,
// each once, not this process's own, with each bind's root and flags.
func TestHolders(t *testing.T) {
	p := newFakeProc(t)
	p.process("10", "1", "812 30 0:77 / "+target+" rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n") // this process's namespace
	// A container: the volume at /data, a subPath read-only at /conf.
	p.process("20", "2", "900 800 0:50 / / rw - overlay overlay rw\n901 900 0:77 / /data rw,relatime - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n902 900 0:77 /sub /conf ro,relatime - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")
	p.process("21", "2", "901 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n") // the same container's other process
	p.process("30", "3", "900 800 0:50 / / rw - overlay overlay rw\n")                                  // a container without the volume
	// A container that got the recovery's new mount, 0:81, dead in its turn.
	p.process("40", "4", "900 800 0:50 / / rw - overlay overlay rw\n903 900 0:81 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")
	hs, err := Holders(p.dir, []Identity{gluster(81)})
	if err != nil || len(hs) != 1 || hs[0].pid != 40 || len(hs[0].mounts) != 1 {
		t.Fatalf("holders of 0:81: %+v, %v; want pid 40", hs, err)
	}
	hs[0].Close()
	hs, err = Holders(p.dir, []Identity{gluster(77), gluster(81)})
	if err != nil || len(hs) != 2 || hs[0].pid != 20 || hs[1].pid != 40 {
		t.Fatalf("holders of 0:77 and 0:81: %+v, %v; want pids 20 and 40", hs, err)
	}
	for _, h := range hs {
		h.Close()
	}
	hs, err = Holders(p.dir, []Identity{gluster(77)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, h := range hs {
			h.Close()
		}
	}()
	if len(hs) != 1 || hs[0].pid != 20 || len(hs[0].mounts) != 2 || hs[0].mntNS == nil || hs[0].pidNS == nil {
		t.Fatalf("holders %+v; want pid 20 with two mounts and its namespaces open", hs)
	}
	m := hs[0].mounts
	if m[0].MountPoint != "/data" || m[0].Root != "/" || readOnly(m[0].MountOptions) ||
		m[1].MountPoint != "/conf" || m[1].Root != "/sub" || !readOnly(m[1].MountOptions) {
		t.Errorf("mounts %+v; want /data (root /, rw) and /conf (root /sub, ro)", m)
	}
}

// TestUnmountedDuringRecoveryStaysUnmounted: the volume host unmounts (and
// removes the record) while the mount is being made again: what was
// mounted is undone and the record stays gone.
func TestUnmountedDuringRecoveryStaysUnmounted(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	b.kill()
	mount := b.r.Command
	b.r.Command = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		out, err := mount(ctx, name, args...)
		if name == "mount" {
			// The kubelet's unmount through the driver lands now.
			if err := mountrecord.Remove(filepath.Join(b.r.Dir, mountrecord.Dir), target); err != nil {
				t.Fatal(err)
			}
		}
		return out, err
	}
	if res := b.pass(); res.Action != "dropped" || res.Err != nil {
		t.Fatalf("%+v; want dropped", res)
	}
	if want := []string{"umount -l " + target, "mount -t glusterfs -o log-level=WARNING,ro srv:/vol " + target, "umount " + target}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q", b.calls, want)
	}
	if len(b.attached) != 0 {
		t.Errorf("attached in containers: %+v", b.attached)
	}
}

// TestUnfinishedRecoveryCarriesOn: a recovery detached the dead mount and
// its pod ended before the remount worked; the next pass (of the next pod)
// mounts again without detaching anything and attaches for the dead mount
// the state file kept, then clears the state.
func TestUnfinishedRecoveryCarriesOn(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	if err := writeState(dir, dead77); err != nil {
		t.Fatal(err)
	}
	b.setMounted(false)
	res := b.pass()
	if res.Action != "recovered" {
		t.Fatalf("%+v; want recovered", res)
	}
	if want := []string{"mount -t glusterfs -o log-level=WARNING,ro srv:/vol " + target}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q (nothing detached again)", b.calls, want)
	}
	if len(b.attached) != 1 || !equalDead(b.attached[0], dead77) {
		t.Errorf("attached %+v; want the kept dead mount 0:77", b.attached)
	}
	if _, ok := readState(dir, target); ok {
		t.Error("the state file was kept after the recovery")
	}
	// Without a state file an unmounted target's record is dropped.
	b.setMounted(false)
	if res := b.pass(); res.Action != "dropped" {
		t.Errorf("%+v; want dropped", res)
	}
}

// TestOrphanStateRemoved: a state file whose record the volume host
// removed goes at the next pass.
func TestOrphanStateRemoved(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	if err := writeState(dir, DeadMount{Mounts: []Identity{gluster(77)}, Target: "/gone"}); err != nil {
		t.Fatal(err)
	}
	b.pass()
	if _, err := os.Stat(statePath(dir, "/gone")); !os.IsNotExist(err) {
		t.Errorf("orphan state file: %v", err)
	}
}

// What an earlier attempt left running is stopped after the dead mount is
// detached and before each mount; a failure to stop it is a failed attempt
// that mounts nothing.
func TestLeftoversStoppedBeforeEachMount(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	stopErr := error(nil)
	b.r.StopLeftovers = func(_ context.Context, tgt string) ([]int, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.calls = append(b.calls, "stop "+tgt)
		if stopErr != nil {
			return []int{31}, stopErr
		}
		return []int{31, 32}, nil
	}
	b.kill()
	stopErr = errors.New("scope still has processes: [31]")
	res := b.pass()
	if res.Action != "failed" || res.Err == nil || !strings.Contains(res.Err.Error(), "stop what still runs for the dead mount: scope still has processes: [31]") {
		t.Fatalf("stop failing: %+v", res)
	}
	if want := []string{"umount -l " + target, "stop " + target}; !slices.Equal(b.calls, want) {
		t.Fatalf("commands %q, want %q: no mount while something still runs", b.calls, want)
	}
	stopErr = nil
	b.calls = nil
	b.setMounted(false) // what the umount -l did
	time.Sleep(60 * time.Millisecond)
	if res := b.pass(); res.Action != "recovered" {
		t.Fatalf("second attempt: %+v", res)
	}
	// Detached already: no umount, the stop comes first.
	if want := []string{"stop " + target, "mount -t glusterfs -o log-level=WARNING,ro srv:/vol " + target}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q", b.calls, want)
	}
}

// The new mount of a recovery dies while it is being attached (some
// containers got it): the next pass detaches it, mounts again and replaces
// in the containers both the first dead mount and that one.
func TestNewMountDiesDuringAttach(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	b.kill()
	b.attachErr = errors.New("pid 10: /sub: open_tree: software caused connection abort")
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("attach failure: %+v", res)
	}
	// The node's target now holds the new mount, 0:81, dead too.
	line := "30 25 0:40 / / rw - overlay overlay rw\n" +
		fmt.Sprintf("813 30 0:81 / %s rw,relatime shared:1 - fuse.glusterfs srv:/vol rw,user_id=0\n", target)
	if err := os.WriteFile(b.mountinfo, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	b.kill()
	if d, ok := readState(dir, target); !ok || !equalDead(d, dead77) {
		t.Fatalf("state after the failed attach: %+v, %v; want 0:77", d, ok)
	}
	b.attachErr = nil
	b.calls, b.attached = nil, nil
	time.Sleep(60 * time.Millisecond)
	if res := b.pass(); res.Action != "recovered" {
		t.Fatalf("second attempt: %+v", res)
	}
	if want := []string{"umount -l " + target, "mount -t glusterfs -o log-level=WARNING,ro srv:/vol " + target}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q", b.calls, want)
	}
	want := DeadMount{Mounts: []Identity{gluster(77), gluster(81)}, Target: target}
	if len(b.attached) != 1 || !equalDead(b.attached[0], want) {
		t.Errorf("attached for %+v; want both dead mounts %+v", b.attached, want)
	}
}

func TestStateFile(t *testing.T) {
	dir := t.TempDir()
	d := DeadMount{Target: target}
	for i := range maxDevices + 3 {
		d = d.with(gluster(100 + i))
	}
	d = d.with(gluster(100)) // once only
	if len(d.Mounts) != maxDevices || d.Mounts[0] != gluster(100) || d.Mounts[maxDevices-1] != gluster(100+maxDevices+2) {
		t.Fatalf("mounts %v; want the first and the latest, %d in all", d.Mounts, maxDevices)
	}
	d = d.with(Identity{Device: Device{4095, 1048575}, FSType: "fuse.sshfs", Source: "user@host:/a\\040b"})
	if err := writeState(dir, d); err != nil {
		t.Fatal(err)
	}
	if got, ok := readState(dir, target); !ok || !equalDead(got, d) {
		t.Errorf("read back %+v, %v; want %+v", got, ok, d)
	}
	for content, want := range map[string]bool{
		"v2\n": true, "v2\n0:77 fuse.glusterfs srv:/vol\n": true, "v2\n0:77 fuse.glusterfs srv:/vol": true,
		"": false, "v2\n0:77 fuse.glusterfs\n": false, "v2\n0:77 fuse.glusterfs srv:/vol x\n": false,
		"v2\n0:77  fuse.glusterfs srv:/vol\n": false, "v2\n4096:0 fuse.glusterfs srv:/vol\n": false,
		"v2\n+0:77 fuse.glusterfs srv:/vol\n": false, "v2\n\n": false, "v3\n0:77 fuse.glusterfs srv:/vol\n": false,
		// Written by an earlier version: device numbers only.
		"0:77\n": true, "0:77 0:81": true, "0:77x": false, "-1:3": false, "0:77 junk": false,
	} {
		if err := os.WriteFile(statePath(dir, target), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, ok := readState(dir, target); ok != want {
			t.Errorf("state %q read: %v, want %v", content, ok, want)
		}
	}
	long := DeadMount{Mounts: []Identity{{Device: Device{0, 77}, FSType: "fuse.glusterfs", Source: strings.Repeat("s", maxField+1)}}, Target: target}
	if err := writeState(dir, long); err == nil {
		t.Error("a source longer than the state file takes was kept")
	}
	if err := os.WriteFile(statePath(dir, target), []byte("v2\n"+strings.Repeat("0:77 fuse.glusterfs srv:/vol\n", stateMax/28)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := readState(dir, target); ok {
		t.Error("a state file larger than stateMax was read")
	}
}
