package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// fakeProc is a directory laid out as /proc is for [Holders]: for each
// process, ns/mnt and ns/pid are links, as in /proc, to files that stand in
// for the namespaces (the real links open the namespace), beside its
// mountinfo.
type fakeProc struct {
	t   *testing.T
	dir string
}

// newFakeProc returns a fakeProc whose "self" is in mount namespace 1.
func newFakeProc(t *testing.T) *fakeProc {
	t.Helper()
	p := &fakeProc{t: t, dir: t.TempDir()}
	p.ns("self", "1")
	// Plain files are no namespaces: every one counts as the node's.
	real := sameUserNS
	sameUserNS = func(string, *os.File) bool { return true }
	t.Cleanup(func() { sameUserNS = real })
	return p
}

// ns puts process pid in the mount and PID namespaces id.
func (p *fakeProc) ns(pid, id string) {
	p.t.Helper()
	dir := filepath.Join(p.dir, pid, "ns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	for _, kind := range []string{"mnt", "pid"} {
		name := kind + ":[" + id + "]"
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			p.t.Fatal(err)
		}
		if err := os.Symlink(name, filepath.Join(dir, kind)); err != nil {
			p.t.Fatal(err)
		}
	}
}

// process adds process pid, in the namespaces id, with the mount table
// mountinfo.
func (p *fakeProc) process(pid, id, mountinfo string) {
	p.t.Helper()
	p.ns(pid, id)
	if err := os.WriteFile(filepath.Join(p.dir, pid, "mountinfo"), []byte(mountinfo), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// exit removes process pid.
func (p *fakeProc) exit(pid string) {
	p.t.Helper()
	if err := os.RemoveAll(filepath.Join(p.dir, pid)); err != nil {
		p.t.Fatal(err)
	}
}

// TestHoldersTakeOnlyTheDeadMount: the kernel hands a freed device number
// to the next mount that needs one. Mounts of the dead mount's number but
// of another type or source, in any namespace (the host's included), are
// not the dead mount, and are never taken.
func TestHoldersTakeOnlyTheDeadMount(t *testing.T) {
	p := newFakeProc(t)
	root := "900 800 0:50 / / rw - overlay overlay rw\n"
	p.process("1", "5", root+"950 900 0:77 / /var/lib/kubelet/pods/b/volumes/kubernetes.io~projected/token rw - tmpfs tmpfs rw\n") // the host
	p.process("20", "2", root+"901 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")                       // holds the dead mount
	p.process("30", "3", root+"902 900 0:77 / /var/run/secrets/kubernetes.io/serviceaccount ro - tmpfs tmpfs rw\n")                // another pod's token
	p.process("31", "31", "903 800 0:77 / / rw - overlay overlay rw,lowerdir=/l\n")                                                // a container's root
	p.process("40", "4", root+"904 900 0:77 / /data rw - fuse.glusterfs other:/vol rw,user_id=0,group_id=0\n")                     // another volume
	p.process("50", "6", root+"905 900 0:77 / /data rw - fuse.sshfs srv:/vol rw,user_id=0,group_id=0\n")                           // another file system
	hs, err := Holders(p.dir, []Identity{gluster(77)})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, h := range hs {
		pids = append(pids, h.pid)
		h.Close()
	}
	if len(hs) != 1 || hs[0].pid != 20 || len(hs[0].mounts) != 1 || hs[0].mounts[0].MountPoint != "/data" {
		t.Fatalf("holders of 0:77 fuse.glusterfs srv:/vol: pids %v; want pid 20's /data only", pids)
	}
	h, ok := holderOf(p.dir, "40", 40, "mnt:[4]", []Identity{gluster(77)})
	h.Close()
	if !ok || len(h.mounts) != 0 {
		t.Errorf("pid 40's mounts of 0:77 fuse.glusterfs srv:/vol: %+v, %v; want none (its source is other:/vol)", h.mounts, ok)
	}
}

// TestStateForgottenWhenNoHolderRemains: the node's mount is back, a
// container's attach keeps failing, and then that container, the last
// holder of the dead mount, is gone. The state is removed and nothing is
// attached any more, not even to a later mount of the same volume that got
// the freed number.
func TestStateForgottenWhenNoHolderRemains(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	b.kill()
	b.attachErr = errors.New("pid 20: /data: attach failed")
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("attach failure: %+v", res)
	}
	if _, ok := readState(dir, target); !ok {
		t.Fatal("no state after the failed attach")
	}
	b.proc.exit("20")
	time.Sleep(60 * time.Millisecond)
	if res := b.pass(); res.Action != "recovered" || res.Err != nil {
		t.Fatalf("no holder left: %+v; want the recovery over", res)
	}
	if _, err := os.Lstat(statePath(dir, target)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file kept with no holder left: %v", err)
	}
	// Another pod's mount of the same volume gets the freed number.
	b.proc.process("60", "7", "901 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")
	time.Sleep(110 * time.Millisecond)
	if res := b.pass(); res.Action != "healthy" {
		t.Errorf("after the recovery: %+v", res)
	}
	if len(b.attached) != 1 {
		t.Errorf("attached %d times (%+v); want once, before the holder was gone", len(b.attached), b.attached)
	}
}

// TestStateForgottenWhileDetached: the remount fails while the last holder
// of the dead mount goes away. The state keeps the remount owed but no dead
// mount, so that when the server is back, a mount that got the freed number
// meanwhile is not taken for the dead one.
func TestStateForgottenWhileDetached(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	b.kill()
	b.failMount = errors.New("exit status 1")
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("first attempt: %+v", res)
	}
	b.setMounted(false) // what the umount -l did
	b.proc.exit("20")
	time.Sleep(60 * time.Millisecond)
	if res := b.pass(); res.Action != "failed" {
		t.Fatalf("second attempt: %+v", res)
	}
	if d, ok := readState(dir, target); !ok || len(d.Mounts) != 0 {
		t.Fatalf("state %+v, %v; want a recovery under way with no dead mount", d, ok)
	}
	b.proc.process("60", "7", "901 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")
	b.failMount = nil
	time.Sleep(110 * time.Millisecond)
	if res := b.pass(); res.Action != "recovered" {
		t.Fatalf("server back: %+v", res)
	}
	if len(b.attached) != 0 {
		t.Errorf("attached for %+v; want nothing attached", b.attached)
	}
	if _, ok := readState(dir, target); ok {
		t.Error("state file kept after the recovery")
	}
}

// TestNewMountTakesTheDeadNumber: the last holder of the dead mount goes
// while the volume is mounted again, and the new mount gets the freed
// number, with the same type and source. The host (a namespace other than
// this process's) shows it at the target: it is not the dead mount, and is
// not replaced.
func TestNewMountTakesTheDeadNumber(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	mount := b.r.Command
	b.r.Command = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if name == "mount" {
			b.proc.exit("20")
			b.newMinor = 77
			b.proc.process("1", "5", "812 30 0:77 / "+target+" rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")
		}
		return mount(ctx, name, args...)
	}
	b.kill()
	if res := b.pass(); res.Action != "recovered" || res.Err != nil {
		t.Fatalf("%+v; want recovered", res)
	}
	if want := []string{"umount -l " + target, "mount -t glusterfs -o log-level=WARNING,ro srv:/vol " + target}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q", b.calls, want)
	}
	if len(b.attached) != 0 {
		t.Errorf("attached for %+v; want nothing attached", b.attached)
	}
	if _, ok := readState(dir, target); ok {
		t.Error("state file kept after the recovery")
	}
}

// TestStateOfAnEarlierVersion: a state file of device numbers only, left
// with the target detached, has the volume mounted again and nothing
// attached: a number alone does not tell the dead mount.
func TestStateOfAnEarlierVersion(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	if err := os.WriteFile(statePath(dir, target), []byte("0:77 0:81\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.setMounted(false)
	if !Unfinished(dir, target) {
		t.Fatal("the earlier version's state does not say a recovery is under way")
	}
	if res := b.pass(); res.Action != "recovered" {
		t.Fatalf("%+v; want recovered", res)
	}
	if want := []string{"mount -t glusterfs -o log-level=WARNING,ro srv:/vol " + target}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q", b.calls, want)
	}
	if len(b.attached) != 0 {
		t.Errorf("attached for %+v; want nothing attached", b.attached)
	}
	if got, err := os.ReadDir(dir); err != nil || slices.ContainsFunc(got, func(e os.DirEntry) bool { return strings.HasSuffix(e.Name(), stateSuffix) }) {
		t.Errorf("records directory %v, %v; want no state file", got, err)
	}
}

// TestHoldersRefuseMountsRootDidNotMake: any user of the node can make a
// FUSE mount with the setuid fusermount, of the type and source they like
// (fuse.SUBTYPE, the fsname). Once the kernel hands such a mount the dead
// mount's number, only its superblock's user_id, fusermount's real UID,
// tells it from the dead mount: a mount that root did not make (user_id
// other than 0, or none) is never a holder's.
func TestHoldersRefuseMountsRootDidNotMake(t *testing.T) {
	p := newFakeProc(t)
	root := "900 800 0:50 / / rw - overlay overlay rw\n"
	p.process("1", "5", root+"950 900 0:77 / /home/u/mnt rw,nosuid,nodev - fuse.glusterfs srv:/vol rw,user_id=1000,group_id=1000\n") // fusermount's, in the host's namespace
	p.process("20", "2", root+"901 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n")                         // holds the dead mount
	p.process("30", "3", root+"902 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw\n")                                              // no user_id
	p.process("40", "4", root+"903 900 0:77 / /data rw - fuse.glusterfs srv:/vol rw,user_id=0,user_id=1000\n")                       // not the kernel's
	// fusermount's, its fsname "srv:/vol<VT>user_id=0": the kernel does not
	// escape a vertical tab, and a split on any white space would read
	// user_id=0 from the name.
	p.process("50", "6", root+"904 900 0:77 / /home/u/m2 rw,nosuid,nodev - fuse.glusterfs srv:/vol\vuser_id=0 rw,user_id=1000,group_id=1000\n")
	hs, err := Holders(p.dir, []Identity{gluster(77)})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, h := range hs {
		pids = append(pids, h.pid)
		h.Close()
	}
	if !slices.Equal(pids, []int{20}) {
		t.Errorf("holders of 0:77 fuse.glusterfs srv:/vol: pids %v; want 20 only (1, 30, 40 and 50 hold mounts root did not make)", pids)
	}
}

// TestDeadMountRootDidNotMakeNotRecorded: the dead mount at the target was
// not made by root. It is mounted again (the record is the mount pod's),
// but it is never kept as the dead mount, and no container's mount of the
// same number, type and source is taken for it.
func TestDeadMountRootDidNotMakeNotRecorded(t *testing.T) {
	b := newBed(t)
	b.record(glusterRecord())
	dir := filepath.Join(b.r.Dir, mountrecord.Dir)
	line := "30 25 0:40 / / rw - overlay overlay rw\n" +
		"812 30 0:77 / " + target + " rw,nosuid,nodev shared:1 - fuse.glusterfs srv:/vol rw,user_id=1000,group_id=1000\n"
	if err := os.WriteFile(b.mountinfo, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	var kept []DeadMount
	mount := b.r.Command
	b.r.Command = func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if d, ok := readState(dir, target); ok && name == "umount" {
			kept = append(kept, d)
		}
		return mount(ctx, name, args...)
	}
	b.kill()
	if res := b.pass(); res.Action != "recovered" || res.Err != nil {
		t.Fatalf("%+v; want recovered", res)
	}
	if len(kept) != 1 || len(kept[0].Mounts) != 0 {
		t.Errorf("state before the detach %+v; want a recovery under way with no dead mount", kept)
	}
	if len(b.attached) != 0 {
		t.Errorf("attached for %+v; want nothing attached", b.attached)
	}
}

// TestPassStatesAsReadState: a pass reads the records directory's state
// files once; what it finds for each record is what readState finds
// alone: a current and an earlier version's file, none, a file others may
// write and a symbolic link (both ignored), and a file that is not a
// state. Without the directory it looks for each record's file.
func TestPassStatesAsReadState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "records")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	targets := map[string]string{
		"/v/current":  stateVersion + "\n0:77 fuse.glusterfs srv:/vol\n",
		"/v/earlier":  "0:77 0:78",
		"/v/none":     "",
		"/v/writable": stateVersion + "\n",
		"/v/link":     "",
		"/v/bad":      "v9\nnot a state",
	}
	for target, content := range targets {
		if content == "" {
			continue
		}
		if err := os.WriteFile(statePath(dir, target), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(statePath(dir, "/v/writable"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(statePath(dir, "/v/current"), statePath(dir, "/v/link")); err != nil {
		t.Fatal(err)
	}
	states := readStates(dir)
	if states == nil {
		t.Fatalf("readStates(%s) = nil; want the directory read", dir)
	}
	found := 0
	for target := range targets {
		want, wantOK := readState(dir, target)
		got, ok := states.of(dir, target)
		if ok != wantOK || !equalDead(got, want) {
			t.Errorf("%s: the pass's state %+v, %v; readState's %+v, %v", target, got, ok, want, wantOK)
		}
		if ok {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d states found; want 2 (current and earlier)", found)
	}
	var none passStates
	if d, ok := none.of(dir, "/v/current"); !ok || len(d.Mounts) != 1 {
		t.Errorf("without the pass's reading: %+v, %v; want readState's, one dead mount", d, ok)
	}
	if got := readStates(filepath.Join(dir, "missing")); got == nil || len(got) != 0 {
		t.Errorf("readStates of a missing directory: %v; want none, read", got)
	}
}
