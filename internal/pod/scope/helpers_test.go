package scope

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path relative to root -> content) and returns root.
func writeTree(t testing.TB, root string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// v1Controllers are the v1 hierarchies of a fake hybrid tree, as on the
// build machine, except that cpu and cpuacct share a hierarchy (as on
// most systemd hosts) to check that the symbolic links to it are skipped.
var v1Controllers = []string{"blkio", "cpu,cpuacct", "cpuset", "devices", "freezer", "memory", "pids", "systemd"}

// fakeHybrid returns the root of a fake cgroup v1 hybrid tree: the v1
// hierarchies with the files DetectLayout and Place look at, and a cgroup2
// hierarchy at unified.
func fakeHybrid(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"unified/cgroup.controllers":     "hugetlb\n",
		"unified/cgroup.procs":           "",
		"unified/cgroup.subtree_control": "",
	}
	for _, c := range v1Controllers {
		files[c+"/cgroup.procs"] = "1\n"
		files[c+"/release_agent"] = ""
	}
	files["cpuset/cpuset.cpus"] = "0-3\n"
	files["cpuset/cpuset.mems"] = "0\n"
	files["memory/memory.limit_in_bytes"] = "9223372036854771712\n"
	files["cpu,cpuacct/cpu.shares"] = "1024\n"
	writeTree(t, root, files)
	for _, l := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fakeUnified returns the root of a fake cgroup v2 tree with the memory
// controller available.
func fakeUnified(t *testing.T) string {
	t.Helper()
	return writeTree(t, t.TempDir(), map[string]string{
		"cgroup.controllers":     "cpuset cpu io memory hugetlb pids\n",
		"cgroup.procs":           "1\n",
		"cgroup.subtree_control": "",
	})
}

// newFake returns a cgroupfs manager on a fake tree, which removes
// directories as the kernel removes cgroups: with their files.
func newFake(t testing.TB, cfg Config) *cgroupfs {
	t.Helper()
	cfg.Backend = BackendCgroupfs
	cfg.CgroupNS = CgroupNSOff
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := m.(*cgroupfs)
	c.rmdir = func(dir string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Type().IsRegular() {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
		return os.Remove(dir)
	}
	return c
}

// exitAll simulates the scope's processes exiting: empties cgroup.procs.
func exitAll(t *testing.T, s Scope) {
	t.Helper()
	for _, p := range s.Paths {
		if err := os.WriteFile(filepath.Join(p, "cgroup.procs"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTrim reads a file and trims white space; "" for a missing file.
func readTrim(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestNewFailsWithNilManager: a failing New returns a nil Manager, never a
// nil backend pointer in a non-nil interface (callers test m != nil).
func TestNewFailsWithNilManager(t *testing.T) {
	empty := t.TempDir()
	for _, b := range []Backend{BackendCgroupfs, BackendAuto} {
		m, err := New(Config{Backend: b, CgroupRoot: empty, SystemdSockets: []string{filepath.Join(empty, "none")}})
		if err == nil || m != nil {
			t.Errorf("New(%s, empty cgroup root) = %#v, %v; want nil and an error", b, m, err)
		}
	}
}
