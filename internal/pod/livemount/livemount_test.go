package livemount

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
)

// fakeScopes is a scope.Manager over a fixed list: the real backends are
// tested in package scope and end to end; here only the survey's logic is.
type fakeScopes struct {
	scopes  map[string][]scope.Scope
	removed []string
}

var _ scope.Manager = (*fakeScopes)(nil)

func (f *fakeScopes) Place(string, string, int) (scope.Scope, error) {
	return scope.Scope{}, errors.New("not used")
}
func (f *fakeScopes) List(plugin string) ([]scope.Scope, error) { return f.scopes[plugin], nil }
func (f *fakeScopes) Remove(plugin, name string) error {
	for _, s := range f.scopes[plugin] {
		if s.Name == name && len(s.PIDs) > 0 {
			return fmt.Errorf("scope %s: %w", name, scope.ErrPopulated)
		}
	}
	f.removed = append(f.removed, plugin+"/"+name)
	return nil
}
func (f *fakeScopes) Kill(string, string, time.Duration) ([]int, error) {
	return nil, errors.New("not used")
}
func (f *fakeScopes) Backend() scope.Backend { return scope.BackendCgroupfs }
func (f *fakeScopes) Close() error           { return nil }

// fakeProc is a process of a fake /proc.
type fakeProc struct {
	// uids are the real, effective, saved and file system UIDs.
	uids [4]int
	// fuse are the connections the fdinfo of each /dev/fuse descriptor
	// names; -1: it names none.
	fuse []int
	args []string
}

// rootProc is a root process with the given /dev/fuse descriptors.
func rootProc(fuse []int, args ...string) fakeProc {
	return fakeProc{fuse: fuse, args: args}
}

// writeProc lays out p in the fake /proc at root, as the kernel shows it:
// cmdline, status, descriptor links (read, never followed) and fdinfo.
func writeProc(t *testing.T, root string, pid int, p fakeProc) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u := p.uids
	status := fmt.Sprintf("Name:\tx\nPid:\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t0\t0\t0\t0\n", pid, u[0], u[1], u[2], u[3])
	files := map[string]string{
		"cmdline":  strings.Join(p.args, "\x00") + "\x00",
		"status":   status,
		"fdinfo/0": "pos:\t0\nflags:\t02\nmnt_id:\t24\nino:\t5\n",
	}
	links := map[string]string{"fd/0": "/dev/null"}
	for i, c := range p.fuse {
		n := fmt.Sprint(3 + i)
		links["fd/"+n] = "/dev/fuse"
		files["fdinfo/"+n] = "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t90\n"
		if c >= 0 {
			files["fdinfo/"+n] += fmt.Sprintf("fuse_connection:\t%d\n", c)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// writeMountInfo writes a mount table of lines and returns its path.
func writeMountInfo(t *testing.T, lines ...string) string {
	t.Helper()
	mi := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return mi
}

// makeDirs makes each directory of dirs.
func makeDirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSurvey(t *testing.T) {
	kubelet := t.TempDir()
	a := filepath.Join(kubelet, "pods/a/volumes/x~glusterfs/data")
	b := filepath.Join(kubelet, "pods/b/volumes/x~glusterfs/data")
	gone := filepath.Join(kubelet, "pods/gone/volumes/x~glusterfs/data")
	makeDirs(t, a, b)
	mi := writeMountInfo(t,
		"20 1 0:20 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/gv0 rw", a),
		fmt.Sprintf("31 20 0:31 / %s rw - fuse.glusterfs srv:/gv1 rw", b),
		fmt.Sprintf("32 20 0:32 / %s rw - fuse.glusterfs srv:/gv2 rw", gone),
		fmt.Sprintf("33 20 0:33 / %s/plain rw - ext4 /dev/loop0 rw", kubelet),
		"34 20 0:34 / /elsewhere rw - fuse.sshfs h:/ rw",
	)
	proc := t.TempDir()
	writeProc(t, proc, 100, rootProc([]int{30}, "/usr/sbin/glusterfs", "--volfile-server=srv", a))
	writeProc(t, proc, 200, rootProc([]int{31}, "/usr/sbin/glusterfs", "--volfile-server=srv", b))
	writeProc(t, proc, 300, rootProc(nil, "/bin/sleep", "30"))
	writeProc(t, proc, 400, rootProc([]int{-1}, a)) // its own name is never an argument
	fs := &fakeScopes{scopes: map[string][]scope.Scope{"x.io/glusterfs": {
		{Name: scope.Name(a), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(a), PIDs: []int{100}},
		{Name: scope.Name(b), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(b), PIDs: []int{}},
		{Name: "mount-0000000000000001", Cgroup: "/mc/x.io~glusterfs/mount-0000000000000001"},
		{Name: "mount-0000000000000002", Cgroup: "/mc/x.io~glusterfs/mount-0000000000000002", PIDs: []int{300}},
	}}}
	r, err := Survey(context.Background(), Options{KubeletDir: kubelet, Plugins: []string{"x.io/glusterfs"}, Scopes: fs, MountInfo: mi, ProcRoot: proc})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Mounts) != 3 {
		t.Fatalf("mounts %+v, want the 3 FUSE mounts under %s", r.Mounts, kubelet)
	}
	want := map[string]Mount{
		a:    {Target: a, Source: "srv:/gv0", FSType: "fuse.glusterfs", Daemons: []int{100}, Plugin: "x.io/glusterfs", Scope: scope.Name(a), Scoped: true, Healthy: true},
		b:    {Target: b, Source: "srv:/gv1", FSType: "fuse.glusterfs", Daemons: []int{200}, Plugin: "x.io/glusterfs", Scope: scope.Name(b), Scoped: false, Healthy: true},
		gone: {Target: gone, Source: "srv:/gv2", FSType: "fuse.glusterfs", Healthy: false},
	}
	for _, m := range r.Mounts {
		w := want[m.Target]
		if m.Target == gone {
			if m.Healthy || !strings.Contains(m.Error, "no such file") {
				t.Errorf("mount at a missing directory: %+v, want not healthy with the stat error", m)
			}
			m.Error = ""
		}
		if !reflect.DeepEqual(m, w) {
			t.Errorf("mount\n got %+v\nwant %+v", m, w)
		}
	}
	if u := r.Unscoped(); len(u) != 2 {
		t.Errorf("unscoped %v, want the daemon outside its scope and the mount without one", u)
	}
	if len(r.Orphans) != 2 {
		t.Fatalf("orphans %+v, want the two scopes without a mount", r.Orphans)
	}
	removed, err := RemoveEmptyOrphans(fs, r)
	if err != nil || len(removed) != 1 || removed[0].Name != "mount-0000000000000001" {
		t.Errorf("removed %+v (%v), want only the empty orphan", removed, err)
	}
	if !reflect.DeepEqual(fs.removed, []string{"x.io/glusterfs/mount-0000000000000001"}) {
		t.Errorf("Remove called for %v", fs.removed)
	}
}

// TestSurveyBindsOfAScopedMount: a pod's bind of a node's shared mount
// (or a CSI publish of its staging) has no scope named after it; it is
// scoped by the scope of the mount of the same FUSE connection that has
// one, since the same daemon serves both, and not scoped when that daemon
// is outside it. A bind of a connection no scope serves stays unscoped.
func TestSurveyBindsOfAScopedMount(t *testing.T) {
	kubelet := t.TempDir()
	node := filepath.Join(kubelet, "plugins/x~glusterfs/shared/0123")
	a := filepath.Join(kubelet, "pods/a/volumes/x~glusterfs/data")
	b := filepath.Join(kubelet, "pods/b/volumes/x~glusterfs/data")
	c := filepath.Join(kubelet, "pods/c/volumes/x~glusterfs/data")
	makeDirs(t, node, a, b, c)
	mi := writeMountInfo(t,
		"20 1 0:20 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/gv0 rw", node),
		fmt.Sprintf("31 20 0:30 / %s rw,nosuid,nodev - fuse.glusterfs srv:/gv0 rw", a),
		fmt.Sprintf("32 20 0:30 / %s rw,nosuid,nodev - fuse.glusterfs srv:/gv0 rw", b),
		fmt.Sprintf("33 20 0:31 / %s rw - fuse.glusterfs srv:/gv1 rw", c),
	)
	proc := t.TempDir()
	writeProc(t, proc, 100, rootProc([]int{30}, "/usr/sbin/glusterfs", "--volfile-server=srv", node))
	writeProc(t, proc, 200, rootProc([]int{31}, "/usr/sbin/glusterfs", "--volfile-server=srv", c))
	const plugin = "x.io/glusterfs"
	survey := func(pids []int) map[string]Mount {
		t.Helper()
		fs := &fakeScopes{scopes: map[string][]scope.Scope{plugin: {
			{Name: scope.Name(node), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(node), PIDs: pids},
		}}}
		r, err := Survey(context.Background(), Options{KubeletDir: kubelet, Plugins: []string{plugin}, Scopes: fs, MountInfo: mi, ProcRoot: proc})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Orphans) != 0 {
			t.Errorf("orphans %+v, want none: the node's mount's scope is used", r.Orphans)
		}
		got := map[string]Mount{}
		for _, m := range r.Mounts {
			got[m.Target] = m
		}
		return got
	}
	got := survey([]int{100})
	for _, dir := range []string{node, a, b} {
		if m := got[dir]; !m.Scoped || m.Scope != scope.Name(node) || m.Plugin != plugin || !reflect.DeepEqual(m.Daemons, []int{100}) {
			t.Errorf("%s: %+v, want scoped by the node's mount's scope, daemon 100", dir, m)
		}
	}
	if m := got[c]; m.Scoped || m.Scope != "" {
		t.Errorf("a mount of another connection, no scope of it: %+v, want unscoped", m)
	}
	// The node's mount's daemon outside its scope: its binds are not
	// scoped either.
	got = survey([]int{})
	for _, dir := range []string{node, a, b} {
		if m := got[dir]; m.Scoped {
			t.Errorf("%s: %+v, want unscoped: its daemon is outside the scope", dir, m)
		}
	}
	// A kernel that names no descriptor's connection: the daemon is
	// found by the target it names, the node's mount's, and serves its
	// binds too.
	real := kernelNamesConnections
	t.Cleanup(func() { kernelNamesConnections = real })
	kernelNamesConnections = false
	if err := os.RemoveAll(filepath.Join(proc, "100")); err != nil {
		t.Fatal(err)
	}
	writeProc(t, proc, 101, rootProc([]int{-1}, "/usr/sbin/glusterfs", "--volfile-server=srv", node))
	got = survey([]int{101})
	for _, dir := range []string{node, a, b} {
		if m := got[dir]; !m.Scoped || !reflect.DeepEqual(m.Daemons, []int{101}) {
			t.Errorf("no connection numbers: %s: %+v, want scoped, daemon 101 (by the node's mount's target)", dir, m)
		}
	}
}

func TestSurveyBadInput(t *testing.T) {
	if _, err := Survey(context.Background(), Options{KubeletDir: "relative"}); err == nil {
		t.Error("a relative kubelet directory was accepted")
	}
	if _, err := Survey(context.Background(), Options{KubeletDir: "/", MountInfo: filepath.Join(t.TempDir(), "missing")}); err == nil ||
		!strings.Contains(err.Error(), "missing") {
		t.Errorf("missing mount table: %v, want an error naming it", err)
	}
}

// TestSurveyDaemonsInScopes: with DaemonsInScopes a survey reads the
// processes of the plugins' scopes only, unless a mount with one of those
// scopes shows no daemon there: then it reads every process.
func TestSurveyDaemonsInScopes(t *testing.T) {
	kubelet := t.TempDir()
	a := filepath.Join(kubelet, "pods/a/volumes/x~glusterfs/data")
	other := filepath.Join(kubelet, "pods/o/volumes/y~cephfs/data")
	makeDirs(t, a, other)
	mi := writeMountInfo(t,
		"20 1 0:20 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/gv0 rw", a),
		fmt.Sprintf("31 20 0:31 / %s rw - fuse.ceph-fuse ceph-fuse rw", other),
	)
	proc := t.TempDir()
	writeProc(t, proc, 100, rootProc([]int{30}, "/usr/sbin/glusterfs", a))
	writeProc(t, proc, 200, rootProc([]int{31}, "/usr/bin/ceph-fuse", other)) // another plugin's, no scope of ours
	writeProc(t, proc, 300, rootProc(nil, "/bin/sleep", "30"))
	writeProc(t, proc, 500, rootProc([]int{30}, "/usr/bin/holder")) // a's connection, outside its scope
	const plugin = "x.io/glusterfs"
	survey := func(inScopes bool, scopePIDs []int) map[string][]int {
		t.Helper()
		fs := &fakeScopes{scopes: map[string][]scope.Scope{plugin: {
			{Name: scope.Name(a), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(a), PIDs: scopePIDs},
		}}}
		r, err := Survey(context.Background(), Options{KubeletDir: kubelet, Plugins: []string{plugin}, Scopes: fs,
			MountInfo: mi, ProcRoot: proc, DaemonsInScopes: inScopes})
		if err != nil {
			t.Fatal(err)
		}
		return daemonsOf(r)
	}
	all := map[string][]int{a: {100, 500}, other: {200}}
	if got := survey(false, []int{100}); !reflect.DeepEqual(got, all) {
		t.Errorf("full survey: daemons %v, want %v", got, all)
	}
	// a's daemon is in its scope: nothing else is read.
	if got, want := survey(true, []int{100}), map[string][]int{a: {100}, other: nil}; !reflect.DeepEqual(got, want) {
		t.Errorf("survey in scopes: daemons %v, want %v (the scope's process only)", got, want)
	}
	// a's scope holds no daemon of it: every process is read.
	if got := survey(true, []int{300}); !reflect.DeepEqual(got, all) {
		t.Errorf("survey in scopes, a's daemon outside its scope: daemons %v, want %v (every process read)", got, all)
	}
}

// TestSurveyTakesRecentAnswers: a survey with Answers takes a mount's
// answer of less than MaxAnswerAge for its health, without a stat of its
// own; only the answer of the mount there now (the last at its target,
// by mount ID and device) counts, and only until a failed stat forgets
// it. The mount's directory is missing, so its own stat would fail. A
// mount is known by its target, mount ID, parent, device and source.
func TestSurveyTakesRecentAnswers(t *testing.T) {
	kubelet := t.TempDir()
	a := filepath.Join(kubelet, "pods/a/volumes/x~glusterfs/data")
	lines := []string{
		"20 1 0:20 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/gv0 rw", a),
	}
	mi := writeMountInfo(t, lines...)
	infos, err := mountinfo.ParseFile(mi)
	if err != nil {
		t.Fatal(err)
	}
	mounted := infos[1]
	healthy := func(ans *Answers) bool {
		t.Helper()
		r, err := Survey(context.Background(), Options{KubeletDir: kubelet, MountInfo: mi, ProcRoot: t.TempDir(), Answers: ans})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Mounts) != 1 {
			t.Fatalf("mounts %+v, want a's", r.Mounts)
		}
		m := r.Mounts[0]
		if m.Healthy == (m.Error != "") {
			t.Fatalf("mount %+v: healthy with an error, or neither", m)
		}
		return m.Healthy
	}
	if healthy(nil) {
		t.Fatal("without answers: healthy, want the stat's error (its directory is missing)")
	}
	ans := &Answers{}
	ans.Note(mounted, time.Now(), nil)
	if !healthy(ans) {
		t.Error("answered a moment ago: not healthy, want the answer taken")
	}
	old := &Answers{}
	old.Note(mounted, time.Now().Add(-MaxAnswerAge-time.Second), nil)
	if healthy(old) {
		t.Error("answered longer than MaxAnswerAge ago: healthy, want a stat of its own")
	}
	for name, other := range map[string]func(m *mount.MountInfo){
		"another mount ID":       func(m *mount.MountInfo) { m.ID++ },
		"another device":         func(m *mount.MountInfo) { m.Minor++ },
		"another device (major)": func(m *mount.MountInfo) { m.Major++ },
		"another parent":         func(m *mount.MountInfo) { m.ParentID++ },
		"another source":         func(m *mount.MountInfo) { m.Source = "srv:/gv9" },
	} {
		m := mounted
		other(&m)
		ans := &Answers{}
		ans.Note(m, time.Now(), nil)
		if healthy(ans) {
			t.Errorf("answered by a mount at the target with %s: healthy, want a stat of its own", name)
		}
	}
	// Mounted over since: the answer of the mount below does not count.
	over := writeMountInfo(t, append(lines, fmt.Sprintf("31 30 0:31 / %s rw - fuse.glusterfs srv:/gv1 rw", a))...)
	r, err := Survey(context.Background(), Options{KubeletDir: kubelet, MountInfo: over, ProcRoot: t.TempDir(), Answers: ans})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Mounts) != 1 || r.Mounts[0].Healthy {
		t.Errorf("mounted over since the answer: %+v, want one mount, not healthy", r.Mounts)
	}
	ans.Note(mounted, time.Now(), errors.New("stat: transport endpoint is not connected"))
	if healthy(ans) {
		t.Error("its last stat failed: healthy, want the answer forgotten")
	}
	ans.Note(mounted, time.Now(), nil)
	ans.Retain(func(target string) bool { return target != a })
	if healthy(ans) {
		t.Error("its target not retained: healthy, want the answer forgotten")
	}
}
