package scope

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	glusterfs = "kubernetes.io/glusterfs"
	targetA   = "/var/lib/kubelet/pods/0c9f6a2e/volumes/kubernetes.io~glusterfs/data"
	targetB   = "/var/lib/kubelet/pods/7d1e3b4f/volumes/kubernetes.io~glusterfs/logs"
)

func TestDetectLayout(t *testing.T) {
	t.Run("hybrid", func(t *testing.T) {
		root := fakeHybrid(t)
		l, err := DetectLayout(root)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range l.Hierarchies {
			name := filepath.Base(h.Path)
			switch {
			case h.V2:
				name += "(v2)"
			case h.Cpuset:
				name += "(cpuset)"
			case h.Memory:
				name += "(memory)"
			case h.CPU:
				name += "(cpu)"
			case h.Pids:
				name += "(pids)"
			}
			got = append(got, name)
		}
		want := []string{"blkio", "cpu,cpuacct(cpu)", "cpuset(cpuset)", "devices", "freezer", "memory(memory)", "pids(pids)", "systemd", "unified(v2)"}
		if l.Unified || !slices.Equal(got, want) {
			t.Errorf("layout = unified %v, %q; want hybrid %q", l.Unified, got, want)
		}
	})
	t.Run("unified", func(t *testing.T) {
		root := fakeUnified(t)
		l, err := DetectLayout(root)
		if err != nil {
			t.Fatal(err)
		}
		if want := []Hierarchy{{Path: root, V2: true, Memory: true, CPU: true, Pids: true}}; !l.Unified || !slices.Equal(l.Hierarchies, want) {
			t.Errorf("layout = %+v; want unified %+v", l, want)
		}
	})
	refused := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"empty", map[string]string{"README": ""}, "no cgroup hierarchy"},
		{"v2 namespace view", map[string]string{"cgroup.controllers": "memory\n", "cgroup.type": "domain\n", "cgroup.procs": ""}, "not the root of the cgroup2 hierarchy"},
		{"v1 container view", map[string]string{"memory/cgroup.procs": "", "memory/memory.limit_in_bytes": ""}, "not the root of a cgroup v1 hierarchy"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DetectLayout(writeTree(t, t.TempDir(), tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DetectLayout = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPlaceHybrid(t *testing.T) {
	root := fakeHybrid(t)
	m := newFake(t, Config{CgroupRoot: root, MemoryLimit: 64 << 20})
	s, err := m.Place(glusterfs, targetA, 4242)
	if err != nil {
		t.Fatal(err)
	}
	rel := "mountcontainers/kubernetes.io~glusterfs/" + Name(targetA)
	if s.Name != Name(targetA) || s.Cgroup != "/"+rel || s.Plugin != glusterfs || s.Unit != "" {
		t.Errorf("scope = %+v", s)
	}
	var hierarchies []string
	for _, c := range append(slices.Clone(v1Controllers), "unified") {
		hierarchies = append(hierarchies, filepath.Join(root, c))
	}
	var want []string
	for _, h := range hierarchies {
		want = append(want, filepath.Join(h, rel))
	}
	if !slices.Equal(s.Paths, want) {
		t.Errorf("paths = %q\nwant %q", s.Paths, want)
	}
	for _, p := range want {
		if got := readTrim(t, filepath.Join(p, "cgroup.procs")); got != "4242" {
			t.Errorf("%s/cgroup.procs = %q, want 4242", p, got)
		}
	}
	// Every new cpuset level got its parent's CPUs and memory nodes,
	// before the PID was written (the write order is checked for real in
	// TestRealCgroupfs, where an empty cpuset refuses the PID).
	for _, level := range []string{"mountcontainers", "mountcontainers/kubernetes.io~glusterfs", rel} {
		dir := filepath.Join(root, "cpuset", level)
		if cpus, mems := readTrim(t, dir+"/cpuset.cpus"), readTrim(t, dir+"/cpuset.mems"); cpus != "0-3" || mems != "0" {
			t.Errorf("%s: cpuset.cpus %q, cpuset.mems %q; want 0-3, 0", dir, cpus, mems)
		}
	}
	// The memory limit is on the plugin's parent, in the hierarchy that
	// has the memory controller only.
	if got := readTrim(t, filepath.Join(root, "memory/mountcontainers/kubernetes.io~glusterfs/memory.limit_in_bytes")); got != "67108864" {
		t.Errorf("memory.limit_in_bytes = %q, want 67108864", got)
	}
	for _, f := range []string{"memory/mountcontainers/memory.limit_in_bytes", "memory/" + rel + "/memory.limit_in_bytes", "unified/mountcontainers/kubernetes.io~glusterfs/memory.max"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s written; only the plugin's parent gets the limit, in the memory hierarchy", f)
		}
	}
	if got := readTrim(t, filepath.Join(root, "unified/cgroup.subtree_control")); got != "" {
		t.Errorf("unified cgroup.subtree_control = %q: memory is not a v2 controller here", got)
	}

	// The same target again joins the scope; another target gets its own.
	if s2, err := m.Place(glusterfs, targetA+"/", 4343); err != nil || s2.Cgroup != s.Cgroup {
		t.Fatalf("Place of the same target = %+v, %v", s2, err)
	}
	if got := readTrim(t, filepath.Join(s.Paths[0], "cgroup.procs")); got != "4242\n4343" {
		t.Errorf("cgroup.procs after a second Place = %q", got)
	}
	if s3, err := m.Place(glusterfs, targetB, 4444); err != nil || s3.Name == s.Name {
		t.Errorf("Place of another target = %+v, %v", s3, err)
	}
}

func TestPlaceUnified(t *testing.T) {
	root := fakeUnified(t)
	m := newFake(t, Config{CgroupRoot: root, Parent: "system.slice/mountcontainers", MemoryLimit: 1 << 30})
	s, err := m.Place(glusterfs, targetA, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(root, "system.slice/mountcontainers/kubernetes.io~glusterfs", Name(targetA))
	if len(s.Paths) != 1 || s.Paths[0] != want {
		t.Fatalf("paths = %q, want [%s]", s.Paths, want)
	}
	if got, want := readTrim(t, filepath.Join(want, "cgroup.procs")), os.Getpid(); got != strconv.Itoa(want) {
		t.Errorf("cgroup.procs = %q; want this process, %d, for PID 0", got, want)
	}
	// memory enabled down to the plugin's parent, limited there.
	for _, dir := range []string{"", "system.slice", "system.slice/mountcontainers"} {
		if got := readTrim(t, filepath.Join(root, dir, "cgroup.subtree_control")); got != "+memory" {
			t.Errorf("%s/cgroup.subtree_control = %q, want +memory", dir, got)
		}
	}
	if got := readTrim(t, filepath.Join(root, "system.slice/mountcontainers/kubernetes.io~glusterfs/memory.max")); got != "1073741824" {
		t.Errorf("memory.max = %q, want 1073741824", got)
	}
	if got := readTrim(t, filepath.Join(root, "system.slice/mountcontainers/kubernetes.io~glusterfs/cgroup.subtree_control")); got != "" {
		t.Errorf("the plugin's parent enabled %q for its scopes; only the parent is limited", got)
	}
}

// TestCPUWeight: the plugin's parent weighs as many processes as it has
// scopes, at least one and at most maxWeighedScopes, as scopes come and go;
// only in the hierarchy with the cpu controller.
func TestCPUWeight(t *testing.T) {
	t.Run("hybrid", func(t *testing.T) {
		root := fakeHybrid(t)
		m := newFake(t, Config{CgroupRoot: root})
		shares := func() string {
			return readTrim(t, filepath.Join(root, "cpu,cpuacct/mountcontainers/kubernetes.io~glusterfs/cpu.shares"))
		}
		a, err := m.Place(glusterfs, targetA, 4242)
		if err != nil {
			t.Fatal(err)
		}
		if got := shares(); got != "1024" {
			t.Errorf("cpu.shares with one scope = %q, want 1024", got)
		}
		if _, err := m.Place(glusterfs, targetA, 4243); err != nil {
			t.Fatal(err)
		}
		if got := shares(); got != "1024" {
			t.Errorf("cpu.shares after joining the same scope = %q, want 1024", got)
		}
		b, err := m.Place(glusterfs, targetB, 4343)
		if err != nil {
			t.Fatal(err)
		}
		if got := shares(); got != "2048" {
			t.Errorf("cpu.shares with two scopes = %q, want 2048", got)
		}
		// Another plugin's scope weighs in the common parent only.
		if _, err := m.Place("kubernetes.io/cephfs", targetB, 4444); err != nil {
			t.Fatal(err)
		}
		if got := shares(); got != "2048" {
			t.Errorf("cpu.shares with two scopes of this plugin, one of another = %q, want 2048", got)
		}
		if got := readTrim(t, filepath.Join(root, "cpu,cpuacct/mountcontainers/cpu.shares")); got != "3072" {
			t.Errorf("cpu.shares of the parent of every plugin with three scopes = %q, want 3072", got)
		}
		for _, f := range []string{"cpu,cpuacct/cpu.shares", "cpu,cpuacct/mountcontainers/kubernetes.io~glusterfs/" + Name(targetA) + "/cpu.shares", "memory/mountcontainers/kubernetes.io~glusterfs/cpu.shares", "memory/mountcontainers/cpu.shares"} {
			if got := readTrim(t, filepath.Join(root, f)); got != "" && got != "1024" {
				t.Errorf("%s = %q; only the parents are weighed, in the cpu hierarchy", f, got)
			}
		}
		exitAll(t, a)
		if err := m.Remove(glusterfs, a.Name); err != nil {
			t.Fatal(err)
		}
		if got := shares(); got != "1024" {
			t.Errorf("cpu.shares after removing one of two scopes = %q, want 1024", got)
		}
		exitAll(t, b)
		if err := m.Remove(glusterfs, b.Name); err != nil {
			t.Fatal(err)
		}
		if got := shares(); got != "1024" {
			t.Errorf("cpu.shares with no scope left = %q, want 1024 (one process)", got)
		}
		if got := readTrim(t, filepath.Join(root, "cpu,cpuacct/mountcontainers/cpu.shares")); got != "1024" {
			t.Errorf("cpu.shares of the parent of every plugin with one scope left = %q, want 1024", got)
		}
	})
	t.Run("hybrid, many", func(t *testing.T) {
		root := fakeHybrid(t)
		m := newFake(t, Config{CgroupRoot: root})
		for i := range 300 {
			if _, err := m.Place(glusterfs, fmt.Sprintf("%s/%d", targetA, i), 1000+i); err != nil {
				t.Fatal(err)
			}
		}
		if got := readTrim(t, filepath.Join(root, "cpu,cpuacct/mountcontainers/kubernetes.io~glusterfs/cpu.shares")); got != "4096" {
			t.Errorf("cpu.shares with 300 scopes = %q, want the cap, 4096", got)
		}
	})
	t.Run("unified", func(t *testing.T) {
		root := fakeUnified(t)
		m := newFake(t, Config{CgroupRoot: root, Parent: "system.slice/mountcontainers"})
		for i, target := range []string{targetA, targetB} {
			if _, err := m.Place(glusterfs, target, 0); err != nil {
				t.Fatal(err)
			}
			want := strconv.Itoa(100 * (i + 1))
			for _, dir := range []string{"system.slice/mountcontainers/kubernetes.io~glusterfs", "system.slice/mountcontainers"} {
				if got := readTrim(t, filepath.Join(root, dir, "cpu.weight")); got != want {
					t.Errorf("%s/cpu.weight with %d scopes = %q, want %s", dir, i+1, got, want)
				}
			}
			if _, err := os.Stat(filepath.Join(root, "system.slice/cpu.weight")); err == nil {
				t.Error("system.slice/cpu.weight written: above Parent is not this package's")
			}
		}
		for _, dir := range []string{"", "system.slice", "system.slice/mountcontainers"} {
			if got := readTrim(t, filepath.Join(root, dir, "cgroup.subtree_control")); got != "+cpu" {
				t.Errorf("%s/cgroup.subtree_control = %q, want +cpu", dir, got)
			}
		}
	})
	t.Run("unified without cpu", func(t *testing.T) {
		root := writeTree(t, t.TempDir(), map[string]string{"cgroup.controllers": "memory pids\n", "cgroup.procs": "", "cgroup.subtree_control": ""})
		m := newFake(t, Config{CgroupRoot: root})
		if _, err := m.Place(glusterfs, targetA, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "mountcontainers/kubernetes.io~glusterfs/cpu.weight")); err == nil {
			t.Error("cpu.weight written without the cpu controller")
		}
	})
}

func TestMemoryLimitNeedsTheController(t *testing.T) {
	root := writeTree(t, t.TempDir(), map[string]string{"cgroup.controllers": "cpu pids\n", "cgroup.procs": "", "cgroup.subtree_control": ""})
	_, err := New(Config{Backend: BackendCgroupfs, CgroupRoot: root, MemoryLimit: 1 << 20, CgroupNS: CgroupNSOff})
	if err == nil || !strings.Contains(err.Error(), "memory controller") {
		t.Errorf("New with a memory limit and no memory controller = %v", err)
	}
}

// tree lists every path under root.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func TestNamesCannotEscape(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "cgroup")
	if err := os.Rename(fakeHybrid(t), root); err != nil {
		t.Fatal(err)
	}
	m := newFake(t, Config{CgroupRoot: root})
	before := tree(t, base)
	places := []struct{ plugin, target string }{
		{"", targetA},
		{"..", targetA},
		{"../../etc", targetA},
		{"kubernetes.io/../../etc", targetA},
		{"kubernetes.io/..", targetA},
		{"/abs", targetA},
		{"a/b/c", targetA},
		{"a~b", targetA},
		{".hidden", targetA},
		{"example.com/.hidden", targetA},
		{"kubernetes.io/", targetA},
		{"with space", targetA},
		{"nul\x00byte", targetA},
		{"a\nb", targetA},
		{glusterfs, ""},
		{glusterfs, "relative/path"},
		{glusterfs, "../.."},
		{glusterfs, "/with\x00nul"},
	}
	for _, p := range places {
		if s, err := m.Place(p.plugin, p.target, 4242); err == nil {
			t.Errorf("Place(%q, %q) = %+v; want an error", p.plugin, p.target, s)
		}
		if _, err := m.List(p.plugin); err == nil && p.target == targetA {
			t.Errorf("List(%q) succeeded; want an error", p.plugin)
		}
		if err := m.Remove(p.plugin, Name(targetA)); err == nil && p.target == targetA {
			t.Errorf("Remove(%q, ...) succeeded; want an error", p.plugin)
		}
	}
	for _, name := range []string{"", "..", "../..", "mount-", "mount-0123456789ABCDEF", "mount-0123456789abcdef0", "mount-0123456789abcdef/..", "x/" + Name(targetA), "mount-0123456789abcde\x00"} {
		if err := m.Remove(glusterfs, name); err == nil {
			t.Errorf("Remove(%q) succeeded; want an error", name)
		}
	}
	if after := tree(t, base); !slices.Equal(before, after) {
		t.Errorf("refused calls changed the tree:\nbefore %q\nafter  %q", before, after)
	}
	for _, parent := range []string{"../x", "/abs", "a//b", ".x", "a/../b", "a/", "-x", "a b"} {
		if _, err := New(Config{Backend: BackendCgroupfs, CgroupRoot: root, Parent: parent, CgroupNS: CgroupNSOff}); err == nil {
			t.Errorf("New with parent %q succeeded; want an error", parent)
		}
	}
}

func TestListAndRemove(t *testing.T) {
	root := fakeHybrid(t)
	m := newFake(t, Config{CgroupRoot: root})
	a, err := m.Place(glusterfs, targetA, 200)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Place(glusterfs, targetA, 100); err != nil {
		t.Fatal(err)
	}
	b, err := m.Place(glusterfs, targetB, 300)
	if err != nil {
		t.Fatal(err)
	}
	// The same target under another plugin is another scope.
	other, err := m.Place("kubernetes.io/cephfs", targetA, 400)
	if err != nil {
		t.Fatal(err)
	}
	// Directories that are not scopes are never listed or touched.
	pluginDir := filepath.Join(root, "memory/mountcontainers/kubernetes.io~glusterfs")
	for _, d := range []string{"not-a-scope", "mount-XYZ"} {
		if err := os.Mkdir(filepath.Join(pluginDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	list, err := m.List(glusterfs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{a.Name: {100, 200}, b.Name: {300}}
	if len(list) != 2 || !sorted(list) {
		t.Fatalf("List = %+v; want %v, sorted by name", list, want)
	}
	for _, s := range list {
		if !slices.Equal(s.PIDs, want[s.Name]) || len(s.Paths) != 9 || s.Plugin != glusterfs {
			t.Errorf("listed %+v; want PIDs %v in 9 hierarchies", s, want[s.Name])
		}
	}
	if list, err := m.List("example.com/none"); err != nil || len(list) != 0 {
		t.Errorf("List of a plugin without scopes = %v, %v", list, err)
	}

	err = m.Remove(glusterfs, a.Name)
	if !errors.Is(err, ErrPopulated) || !strings.Contains(err.Error(), "[100 200]") {
		t.Errorf("Remove of a populated scope = %v; want ErrPopulated naming its PIDs", err)
	}
	for _, p := range a.Paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("refused Remove touched %s: %v", p, err)
		}
	}
	// One hierarchy still populated: nothing is removed anywhere.
	exitAll(t, a)
	if err := os.WriteFile(filepath.Join(a.Paths[len(a.Paths)-1], "cgroup.procs"), []byte("100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(glusterfs, a.Name); !errors.Is(err, ErrPopulated) {
		t.Errorf("Remove with one populated hierarchy = %v; want ErrPopulated", err)
	}
	for _, p := range a.Paths {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("refused Remove touched %s: %v", p, err)
		}
	}

	exitAll(t, a)
	if err := m.Remove(glusterfs, a.Name); err != nil {
		t.Fatal(err)
	}
	for _, p := range a.Paths {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left after Remove: %v", p, err)
		}
		if _, err := os.Stat(filepath.Dir(p)); err != nil {
			t.Errorf("Remove took the plugin's parent %s: %v", filepath.Dir(p), err)
		}
	}
	for _, p := range append(b.Paths, other.Paths...) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("Remove of %s took %s too: %v", a.Name, p, err)
		}
	}
	for _, d := range []string{"not-a-scope", "mount-XYZ"} {
		if _, err := os.Stat(filepath.Join(pluginDir, d)); err != nil {
			t.Errorf("Remove took %s: %v", d, err)
		}
	}
	if err := m.Remove(glusterfs, a.Name); err != nil {
		t.Errorf("Remove of a removed scope = %v, want nil", err)
	}
	if err := m.Remove("example.com/none", a.Name); err != nil {
		t.Errorf("Remove under a plugin without a parent = %v, want nil", err)
	}
	if list, err := m.List(glusterfs); err != nil || len(list) != 1 || list[0].Name != b.Name {
		t.Errorf("List after Remove = %+v, %v; want only %s", list, err, b.Name)
	}

	// A scope with a cgroup of its own inside is not empty either.
	exitAll(t, b)
	if err := os.Mkdir(filepath.Join(b.Paths[0], "child"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(glusterfs, b.Name); !errors.Is(err, ErrPopulated) {
		t.Errorf("Remove of a scope with a child cgroup = %v; want ErrPopulated", err)
	}
}

func sorted(list []Scope) bool {
	return slices.IsSortedFunc(list, func(a, b Scope) int { return strings.Compare(a.Name, b.Name) })
}

// TestPlaceAfterARemove: Place makes a scope's cgroups before it takes the
// plugin's lock; a Remove that takes the empty scope away meanwhile does
// not fail the Place, which makes it again under the lock.
func TestPlaceAfterARemove(t *testing.T) {
	root := fakeHybrid(t)
	m := newFake(t, Config{CgroupRoot: root})
	removed := 0
	beforeLock = func(s Scope) {
		for _, p := range s.Paths {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	t.Cleanup(func() { beforeLock = func(Scope) {} })
	s, err := m.Place(glusterfs, targetA, 4242)
	if err != nil {
		t.Fatalf("Place with its scope removed before the lock: %v", err)
	}
	if removed == 0 {
		t.Fatal("the scope was not there to remove before the lock")
	}
	for _, p := range s.Paths {
		if got := readTrim(t, filepath.Join(p, "cgroup.procs")); got != "4242" {
			t.Errorf("%s/cgroup.procs = %q, want 4242", p, got)
		}
	}
	cpuset := filepath.Join(root, "cpuset", "mountcontainers/kubernetes.io~glusterfs", Name(targetA))
	if cpus := readTrim(t, cpuset+"/cpuset.cpus"); cpus != "0-3" {
		t.Errorf("%s/cpuset.cpus = %q after the scope was made again; want its parent's, 0-3", cpuset, cpus)
	}
}

// TestCPUFirst: the process joins its scope in the CPU's hierarchies
// first, the others in their order.
func TestCPUFirst(t *testing.T) {
	hs := []Hierarchy{{Path: "blkio"}, {Path: "cpu", CPU: true}, {Path: "memory", Memory: true}, {Path: "unified", V2: true, CPU: true}}
	if got, want := cpuFirst(hs), []int{1, 3, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("cpuFirst = %v, want %v", got, want)
	}
}

// TestListReadsOneHierarchy: List reads the processes of the cgroup2
// hierarchy (on a v1-only node, of its first one), not of every hierarchy;
// Remove still sees a process that is in a v1 hierarchy's scope only.
func TestListReadsOneHierarchy(t *testing.T) {
	for _, tc := range []struct {
		layout string
		root   func(t testing.TB) string
		census string // relative to the root
	}{
		{"hybrid", fakeHybrid, "unified"},
		{"v1 only", func(t testing.TB) string {
			root := fakeHybrid(t)
			if err := os.RemoveAll(filepath.Join(root, "unified")); err != nil {
				t.Fatal(err)
			}
			return root
		}, "blkio"},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			root := tc.root(t)
			m := newFake(t, Config{CgroupRoot: root})
			s, err := m.Place(glusterfs, targetA, 100)
			if err != nil {
				t.Fatal(err)
			}
			scopeDir := func(h string) string {
				return filepath.Join(root, h, "mountcontainers/kubernetes.io~glusterfs", s.Name)
			}
			// 200 is in the memory hierarchy's scope only, and another
			// hierarchy's process list is not even readable as one.
			writeTree(t, root, map[string]string{
				filepath.Join("memory/mountcontainers/kubernetes.io~glusterfs", s.Name, "cgroup.procs"): "100\n200\n",
				filepath.Join("pids/mountcontainers/kubernetes.io~glusterfs", s.Name, "cgroup.procs"):   "not a PID\n",
			})
			list, err := m.List(glusterfs)
			if err != nil {
				t.Fatalf("List read a hierarchy other than %s: %v", tc.census, err)
			}
			if len(list) != 1 || !slices.Equal(list[0].PIDs, []int{100}) || !slices.Contains(list[0].Paths, scopeDir(tc.census)) {
				t.Fatalf("List = %+v; want the scope with PIDs [100] (those of %s)", list, tc.census)
			}

			// Every process gone from the census hierarchy's scope, one
			// left in memory's: List shows none, Remove refuses.
			exitAll(t, list[0])
			writeTree(t, root, map[string]string{
				filepath.Join("memory/mountcontainers/kubernetes.io~glusterfs", s.Name, "cgroup.procs"): "200\n",
			})
			if list, err := m.List(glusterfs); err != nil || len(list) != 1 || len(list[0].PIDs) != 0 {
				t.Fatalf("List = %+v, %v; want the scope without processes", list, err)
			}
			if err := m.Remove(glusterfs, s.Name); !errors.Is(err, ErrPopulated) || !strings.Contains(err.Error(), "[200]") {
				t.Errorf("Remove of a scope with a process in one v1 hierarchy = %v; want ErrPopulated naming 200", err)
			}
			if _, err := os.Stat(scopeDir(tc.census)); err != nil {
				t.Errorf("the refused Remove touched the scope: %v", err)
			}
		})
	}
}
