package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// nodeCommands runs its commands on the node (here: the test's private
// mount namespace) and keeps the records it is given in memory.
type nodeCommands struct {
	mu       sync.Mutex
	mounts   []string // the argv of each mount it ran
	records  map[string]mcexec.MountRecord
	forgoten []string
}

var _ mcexec.Executor = (*nodeCommands)(nil)

func (e *nodeCommands) Command(name string, args ...string) utilexec.Cmd {
	return e.CommandContext(context.Background(), name, args...)
}

func (e *nodeCommands) CommandContext(ctx context.Context, name string, args ...string) utilexec.Cmd {
	if name == "mount" {
		e.mu.Lock()
		e.mounts = append(e.mounts, strings.Join(args, " "))
		e.mu.Unlock()
	}
	return utilexec.New().CommandContext(ctx, name, args...)
}

func (e *nodeCommands) LookPath(file string) (string, error) { return utilexec.New().LookPath(file) }
func (e *nodeCommands) DecisionOf(utilexec.Cmd) (mcexec.Decision, bool) {
	return mcexec.Decision{}, false
}
func (e *nodeCommands) RecordsDir() string { return "" }
func (e *nodeCommands) RecordMount(_ utilexec.Cmd, r mcexec.MountRecord) (error, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.records == nil {
		e.records = map[string]mcexec.MountRecord{}
	}
	e.records[r.Target] = r
	return nil, nil
}

func (e *nodeCommands) ForgetMount(target string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.records, target)
	e.forgoten = append(e.forgoten, target)
	return nil
}

// sharedBed is a node's kubelet directory on a tmpfs, with a Shared of a
// Mounter whose commands run on the node.
func sharedBed(t *testing.T) (Shared, *nodeCommands, string) {
	t.Helper()
	base := mountfdtest.Base(t)
	exec := &nodeCommands{}
	v := &Mounter{Plugin: "kubernetes.io/glusterfs", Exec: exec, Timeout: 10 * time.Second}
	return Shared{V: v, Root: filepath.Join(base, "plugins", "mountcontainers.io~glusterfs", "shared")}, exec, base
}

// twoBinds binds the volume "one" at the directories a and b of two pods
// of a shared-mounts bed s, and returns them with the node's mount.
func twoBinds(t *testing.T) (s Shared, a, b, node string) {
	t.Helper()
	s, _, base := sharedBed(t)
	a, b = podDir(base, "a"), podDir(base, "b")
	for _, dir := range []string{a, b} {
		if _, err := mountAt(context.Background(), s, tmpfsMount("one"), dir); err != nil {
			t.Fatal(err)
		}
	}
	return s, a, b, filepath.Join(s.Root, SharedKey(s.V.Plugin, tmpfsMount("one")))
}

// podDir is the volume directory of pod uid, as the kubelet names it.
func podDir(base, uid string) string {
	return filepath.Join(base, "pods", uid, "volumes", "mountcontainers.io~glusterfs", "data")
}

// tmpfsMount is a volume of a "file system" every node has: a tmpfs named
// after the volume, so that mounts of two volumes differ in source.
func tmpfsMount(volume string, opts ...string) fs.Mount {
	return fs.Mount{FSType: "tmpfs", Source: "vol-" + volume, Options: append([]string{"size=1m"}, opts...), Pod: &mountrecord.Pod{Namespace: "ns", Name: "p-" + volume, UID: "u"}}
}

// mountAt is s.Mount of m at dir for the pod whose directory dir is (the
// kubelet names it so), m's pod with that UID.
func mountAt(ctx context.Context, s Shared, m fs.Mount, dir string) (string, error) {
	if m.Pod != nil {
		p := *m.Pod
		p.UID, _ = mountrecord.TargetPodUID(dir)
		m.Pod = &p
	}
	return s.Mount(ctx, m, dir)
}

// mountsOf returns the node's mounts whose source is source.
func mountsOf(t *testing.T, source string) []string {
	t.Helper()
	mis, err := mountinfo.ParseFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mi := range mis {
		if mi.Source == source {
			out = append(out, mountinfo.Unescape(mi.MountPoint))
		}
	}
	return out
}

// TestSharedMountsOnePerVolume: the pods of one volume get binds of one
// mount of the node, made once (one mount(8), recorded, naming no pod);
// each pod's directory shows what another pod writes; pods of another
// volume, or of the same volume with other options, get a mount of their
// own. Unmounting a bind leaves the node's mount while other binds remain;
// the last one unmounts it and forgets its record. Unmount answers "not
// mine" for a mount that is no bind of a shared one.
func TestSharedMountsOnePerVolume(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, exec, base := sharedBed(t)
	ctx := context.Background()
	a, b, c, d := podDir(base, "a"), podDir(base, "b"), podDir(base, "c"), podDir(base, "d")
	for _, dir := range []string{a, b} {
		msg, err := mountAt(ctx, s, tmpfsMount("one"), dir)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, "bound vol-one at "+dir) {
			t.Errorf("mount at %s: message %q", dir, msg)
		}
	}
	if _, err := mountAt(ctx, s, tmpfsMount("two"), c); err != nil {
		t.Fatal(err)
	}
	if _, err := mountAt(ctx, s, tmpfsMount("one", "ro"), d); err != nil {
		t.Fatal(err)
	}
	if len(exec.mounts) != 3 {
		t.Fatalf("mount(8) ran %d times (%q), want 3: once per volume and options", len(exec.mounts), exec.mounts)
	}
	node := filepath.Join(s.Root, SharedKey(s.V.Plugin, tmpfsMount("one")))
	if got, want := mountsOf(t, "vol-one"), []string{node, a, b}; !slices.Equal(got[:3], want) {
		t.Errorf("mounts of vol-one: %q, want %q first", got, want)
	}
	r, ok := exec.records[node]
	if !ok || r.Pod != nil || len(exec.records) != 3 {
		t.Errorf("records %+v: want one per node mount, %s's naming no pod", exec.records, node)
	}
	// The pods whose directories bind it, for the recovery's Events.
	uids := func() []string {
		t.Helper()
		pods, err := mountrecord.ReadPods(node)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range pods {
			out = append(out, p.UID)
		}
		return out
	}
	if got := uids(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the pods listed beside %s: %q, want a and b", node, got)
	}
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("from a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(b, "f")); err != nil || string(got) != "from a" {
		t.Errorf("pod b reads %q (%v), want what pod a wrote", got, err)
	}
	if _, err := os.Stat(filepath.Join(c, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod c, of another volume, sees a's file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(d, "g"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("a write through the read-only volume's bind: %v, want EROFS", err)
	}
	// Mount again at a: already there.
	if msg, err := mountAt(ctx, s, tmpfsMount("one"), a); err != nil || !strings.Contains(msg, "already mounted") {
		t.Errorf("a second mount at %s: %q, %v", a, msg, err)
	}

	msg, ok, err := s.Unmount(ctx, a)
	if err != nil || !ok || !strings.Contains(msg, "stays (1 other binds of it)") {
		t.Fatalf("unmount %s: %q, %t, %v: want the node's mount kept for b", a, msg, ok, err)
	}
	if got := uids(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after a's unmount, the pods listed beside %s: %q, want b", node, got)
	}
	nodeRO := filepath.Join(s.Root, SharedKey(s.V.Plugin, tmpfsMount("one", "ro")))
	if got := mountsOf(t, "vol-one"); !slices.Equal(got, []string{node, b, nodeRO, d}) {
		t.Errorf("after a's unmount, mounts of vol-one: %q, want %q", got, []string{node, b, nodeRO, d})
	}
	msg, ok, err = s.Unmount(ctx, b)
	if err != nil || !ok || !strings.Contains(msg, "its last bind: unmounted "+node) {
		t.Fatalf("unmount %s: %q, %t, %v: want the node's mount gone with it", b, msg, ok, err)
	}
	if got := mountsOf(t, "vol-one"); !slices.Equal(got, []string{nodeRO, d}) {
		t.Errorf("after b's unmount, mounts of vol-one: %q, want the read-only one's only", got)
	}
	if _, ok := exec.records[node]; ok {
		t.Errorf("the record of %s is still there", node)
	}
	for _, p := range []string{node, node + mountrecord.PodsSuffix, node + ".lock"} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want it removed", p, err)
		}
	}
	// Unmounted already: not a bind of a shared mount any more.
	if _, ok, err := s.Unmount(ctx, a); ok || err != nil {
		t.Errorf("unmount of %s again: %t, %v: want it left to the per-pod unmount", a, ok, err)
	}
	// A mount of the volume's source that is not the node's: not shared.
	own := podDir(base, "own")
	mountfdtest.MountTmpfs(t, own)
	if _, ok, err := s.Unmount(ctx, own); ok || err != nil {
		t.Errorf("unmount of a plain tmpfs at %s: %t, %v: want it left to the per-pod unmount", own, ok, err)
	}
}

// TestSharedMountsPerNamespace: pods of one volume in two namespaces get a
// node's mount each (another tenant's pods never share one), and a mount
// whose pod is unknown is refused, nothing made.
func TestSharedMountsPerNamespace(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, exec, base := sharedBed(t)
	ctx := context.Background()
	a, b := podDir(base, "a"), podDir(base, "b")
	inA, inB := tmpfsMount("one"), tmpfsMount("one")
	inB.Pod = &mountrecord.Pod{Namespace: "other", Name: "p-one", UID: "v"}
	for dir, m := range map[string]fs.Mount{a: inA, b: inB} {
		if _, err := mountAt(ctx, s, m, dir); err != nil {
			t.Fatal(err)
		}
	}
	nodeA, nodeB := filepath.Join(s.Root, SharedKey(s.V.Plugin, inA)), filepath.Join(s.Root, SharedKey(s.V.Plugin, inB))
	if nodeA == nodeB || len(exec.mounts) != 2 {
		t.Fatalf("mount(8) ran %d times, node's mounts %s and %s: want one each per namespace", len(exec.mounts), nodeA, nodeB)
	}
	if err := os.WriteFile(filepath.Join(a, "f"), []byte("from a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod b, of another namespace, sees a's file: %v", err)
	}

	c := podDir(base, "c")
	nobody := tmpfsMount("one")
	nobody.Pod = nil
	if _, err := mountAt(ctx, s, nobody, c); !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("Mount of no pod: %v, want ErrNoNamespace", err)
	}
	if _, err := os.Lstat(c); !errors.Is(err, os.ErrNotExist) || len(exec.mounts) != 2 {
		t.Errorf("Mount of no pod: %s %v, mount(8) ran %d times: want nothing made", c, err, len(exec.mounts))
	}
	// A pod that is not the one whose directory c is.
	if _, err := s.Mount(ctx, tmpfsMount("one"), c); err == nil || !strings.Contains(err.Error(), "is not the pod of that directory") {
		t.Fatalf("Mount for another pod's directory: %v, want a refusal", err)
	}
	if _, err := os.Lstat(c); !errors.Is(err, os.ErrNotExist) || len(exec.mounts) != 2 {
		t.Errorf("Mount for another pod's directory: %s %v, mount(8) ran %d times: want nothing made", c, err, len(exec.mounts))
	}
}

// TestSharedMountRefusesSecrets: a mount with a secret is never shared,
// and nothing is made.
func TestSharedMountRefusesSecrets(t *testing.T) {
	s := Shared{V: &Mounter{Exec: &noCommands{t: t}}, Root: filepath.Join(t.TempDir(), "shared")}
	m := tmpfsMount("one")
	m.Secret = &fs.Secret{Option: "secretfile", Data: []byte("k")}
	if _, err := mountAt(context.Background(), s, m, "/var/lib/kubelet/pods/x/volumes/v/data"); !errors.Is(err, ErrSecretNotShared) {
		t.Fatalf("Mount with a secret: %v, want ErrSecretNotShared", err)
	}
	if _, err := os.Lstat(s.Root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v, want nothing made", s.Root, err)
	}
}

// TestSharedRootTrusted: a shared mounts' directory that another user
// owns, or that others may write, is refused, and nothing is mounted; so
// is a symbolic link there.
func TestSharedRootTrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to own the directory")
	}
	for _, tc := range []struct {
		name  string
		setup func(root string) error
		want  string
	}{
		{"writable by others", func(root string) error {
			if err := os.MkdirAll(root, 0o700); err != nil {
				return err
			}
			return os.Chmod(root, 0o777)
		}, "written by nobody else"},
		{"another user's", func(root string) error {
			if err := os.MkdirAll(root, 0o700); err != nil {
				return err
			}
			return os.Chown(root, 1000, 0)
		}, "owned by uid 1000"},
		{"a symbolic link", func(root string) error {
			dir := filepath.Join(filepath.Dir(root), "elsewhere")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			return os.Symlink(dir, root)
		}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Shared{V: &Mounter{Exec: &noCommands{t: t}}, Root: filepath.Join(t.TempDir(), "shared")}
			if err := tc.setup(s.Root); err != nil {
				t.Fatal(err)
			}
			_, err := mountAt(context.Background(), s, tmpfsMount("one"), "/var/lib/kubelet/pods/x/volumes/v/data")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Mount: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestSharedMountsRace: many pods of one volume mounting and unmounting at
// once, each call a goroutine as each driver call is a process: the
// volume's lock file serialises them; one mount(8) per time the node had
// no mount, and nothing left at the end.
func TestSharedMountsRace(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, exec, base := sharedBed(t)
	ctx := context.Background()
	const pods = 16
	var wg sync.WaitGroup
	errs := make([]error, pods)
	for i := range pods {
		wg.Go(func() {
			dir := podDir(base, string(rune('a'+i)))
			if _, err := mountAt(ctx, s, tmpfsMount("one"), dir); err != nil {
				errs[i] = err
				return
			}
			if err := os.WriteFile(filepath.Join(dir, "f"+string(rune('a'+i))), nil, 0o644); err != nil {
				errs[i] = err
				return
			}
			_, _, errs[i] = s.Unmount(ctx, dir)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := mountsOf(t, "vol-one"); len(got) != 0 {
		t.Errorf("mounts of vol-one left: %q", got)
	}
	if len(exec.records) != 0 {
		t.Errorf("records left: %+v", exec.records)
	}
	t.Logf("%d pods, mount(8) ran %d times", pods, len(exec.mounts))
}

// TestSharedUnmountWhileReplaced: while the recovery replaces a node's
// mount (a new one at its place, the pods' binds still of the old one),
// an unmount of a bind still finds the node's mount by its type and
// source, counts the other bind of the old one, and keeps the node's
// mount; the last bind's unmount removes it.
func TestSharedUnmountWhileReplaced(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, a, b, node := twoBinds(t)
	ctx := context.Background()
	// What the recovery does to the node's mount (the binds are left to
	// its Reattach, which has not run).
	if err := unix.Unmount(node, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("vol-one", node, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	msg, ok, err := s.Unmount(ctx, a)
	if err != nil || !ok || !strings.Contains(msg, "stays (1 other binds of it)") {
		t.Fatalf("unmount %s: %q, %t, %v: want the node's mount kept for b's bind of the old one", a, msg, ok, err)
	}
	msg, ok, err = s.Unmount(ctx, b)
	if err != nil || !ok || !strings.Contains(msg, "its last bind: unmounted "+node) {
		t.Fatalf("unmount %s: %q, %t, %v: want the node's mount gone with it", b, msg, ok, err)
	}
	if got := mountsOf(t, "vol-one"); len(got) != 0 {
		t.Errorf("mounts of vol-one left: %q", got)
	}
}

// TestSharedUnmountWhileReplacedInAnotherNamespace: the node's mounts of
// one source in two namespaces; while the recovery has one unmounted (its
// bind shows the dead device), the unmount of that bind never takes the
// other namespace's node's mount for its own: it leaves the bind to the
// per-pod unmount, and the other namespace's mount and bind stay.
func TestSharedUnmountWhileReplacedInAnotherNamespace(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, _, base := sharedBed(t)
	ctx := context.Background()
	a, b := podDir(base, "a"), podDir(base, "b")
	inA, inB := tmpfsMount("one"), tmpfsMount("one")
	inB.Pod = &mountrecord.Pod{Namespace: "other", Name: "p-one", UID: "v"}
	if _, err := mountAt(ctx, s, inA, a); err != nil {
		t.Fatal(err)
	}
	if _, err := mountAt(ctx, s, inB, b); err != nil {
		t.Fatal(err)
	}
	nodeA, nodeB := filepath.Join(s.Root, SharedKey(s.V.Plugin, inA)), filepath.Join(s.Root, SharedKey(s.V.Plugin, inB))
	// The recovery's unmount of b's node's mount, before its mount.
	if err := unix.Unmount(nodeB, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if msg, ok, err := s.Unmount(ctx, b); ok || err != nil {
		t.Fatalf("unmount %s: %q, %t, %v: want it left to the per-pod unmount, not taken for a bind of %s", b, msg, ok, err, nodeA)
	}
	if got := mountsOf(t, "vol-one"); !slices.Equal(got, []string{nodeA, a, b}) {
		t.Errorf("mounts of vol-one: %q, want %q", got, []string{nodeA, a, b})
	}
}

// TestSharedUnmountWhileRecovering: the recovery unmounts the node's
// mount between an unmount's look at it and its release: the node's
// mount's directory and list of pods stay for the other pod's bind (the
// recovery mounts it again there).
func TestSharedUnmountWhileRecovering(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, a, b, node := twoBinds(t)
	ctx := context.Background()
	reads := 0
	s.V.MountTable = func() ([]mount.MountInfo, error) {
		if reads++; reads == 2 { // the release's
			if err := unix.Unmount(node, unix.MNT_DETACH); err != nil {
				return nil, err
			}
		}
		return mountinfo.ParseFile("/proc/self/mountinfo")
	}
	msg, ok, err := s.Unmount(ctx, a)
	if err != nil || !ok || !strings.Contains(msg, "being brought back by the recovery: it stays") {
		t.Fatalf("unmount %s: %q, %t, %v: want the node's mount's directory kept", a, msg, ok, err)
	}
	pods, err := mountrecord.ReadPods(node)
	if err != nil || len(pods) != 1 || pods[0].UID != "b" {
		t.Errorf("the pods listed beside %s: %+v, %v; want b's", node, pods, err)
	}
	if _, err := os.Lstat(node); err != nil {
		t.Errorf("%s: %v, want it kept for the recovery", node, err)
	}
	if got := mountsOf(t, "vol-one"); !slices.Equal(got, []string{b}) {
		t.Errorf("mounts of vol-one: %q, want b's bind alone", got)
	}
}

// TestSharedOtherMountOfTheSource: a mount of the volume's source that is
// no pod's bind of the node's mount (a CSI staging, a pod's own mount,
// another kubelet's on the same machine) does not keep the node's mount
// after its last bind.
func TestSharedOtherMountOfTheSource(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, _, base := sharedBed(t)
	ctx := context.Background()
	a, other := podDir(base, "a"), filepath.Join(base, "plugins/kubernetes.io/csi/x/globalmount")
	if _, err := mountAt(ctx, s, tmpfsMount("one"), a); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("vol-one", other, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(s.Root, SharedKey(s.V.Plugin, tmpfsMount("one")))
	msg, ok, err := s.Unmount(ctx, a)
	if err != nil || !ok || !strings.Contains(msg, "its last bind: unmounted "+node) {
		t.Fatalf("unmount %s: %q, %t, %v: want the node's mount gone, %s being no bind of it", a, msg, ok, err, other)
	}
	if got := mountsOf(t, "vol-one"); !slices.Equal(got, []string{other}) {
		t.Errorf("mounts of vol-one: %q, want %s's alone", got, other)
	}
}

// TestSharedMountUndone: when the bind fails (a file where the pod's
// directory should be), the node's mount made for it goes again, record
// and all; one that other pods' binds hold stays.
func TestSharedMountUndone(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, exec, base := sharedBed(t)
	ctx := context.Background()
	bad := podDir(base, "bad")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := mountAt(ctx, s, tmpfsMount("one"), bad)
	if err == nil || !strings.Contains(err.Error(), "its last bind: unmounted") {
		t.Fatalf("Mount at a file: %v, want the bind's error and the node's mount undone", err)
	}
	if got := mountsOf(t, "vol-one"); len(got) != 0 || len(exec.records) != 0 {
		t.Fatalf("after a failed bind: mounts %q, records %+v; want none", got, exec.records)
	}
	good := podDir(base, "good")
	if _, err := mountAt(ctx, s, tmpfsMount("one"), good); err != nil {
		t.Fatal(err)
	}
	_, err = mountAt(ctx, s, tmpfsMount("one"), bad)
	if err == nil || !strings.Contains(err.Error(), "stays (1 other binds of it)") {
		t.Fatalf("Mount at a file beside a good pod: %v, want the node's mount kept", err)
	}
	node := filepath.Join(s.Root, SharedKey(s.V.Plugin, tmpfsMount("one")))
	if got := mountsOf(t, "vol-one"); !slices.Equal(got, []string{node, good}) {
		t.Fatalf("mounts %q, want the node's and the good pod's bind", got)
	}
}

// TestSharedSweep: a bind unmounted while the recovery had the node's
// mount detached (Unmount cannot tell it is a bind of one, and leaves it
// to the per-pod unmount) leaves the node's mount with no bind once the
// recovery mounts it again; the next unmount of a bind of any volume of
// the driver unmounts it.
func TestSharedSweep(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	s, exec, base := sharedBed(t)
	ctx := context.Background()
	a, c := podDir(base, "a"), podDir(base, "c")
	if _, err := mountAt(ctx, s, tmpfsMount("one"), a); err != nil {
		t.Fatal(err)
	}
	if _, err := mountAt(ctx, s, tmpfsMount("two"), c); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(s.Root, SharedKey(s.V.Plugin, tmpfsMount("one")))
	if err := unix.Unmount(one, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Unmount(ctx, a); ok || err != nil {
		t.Fatalf("unmount %s while its node's mount is detached: %t, %v; want it left to the per-pod unmount", a, ok, err)
	}
	if _, err := s.V.Unmount(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("vol-one", one, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	msg, ok, err := s.Unmount(ctx, c)
	if err != nil || !ok || !strings.Contains(msg, "unmounted "+one+", which had no bind left") {
		t.Fatalf("unmount %s: %q, %t, %v: want the other volume's node's mount with no bind unmounted too", c, msg, ok, err)
	}
	if got := append(mountsOf(t, "vol-one"), mountsOf(t, "vol-two")...); len(got) != 0 {
		t.Errorf("mounts left: %q", got)
	}
	if len(exec.records) != 0 {
		t.Errorf("records left: %+v", exec.records)
	}
	if des, err := os.ReadDir(s.Root); err != nil || len(des) != 0 {
		t.Errorf("%s holds %v (%v), want nothing: directories and lock files go with their mounts", s.Root, des, err)
	}
}
