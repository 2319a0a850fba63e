package scope

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Layout is how the cgroup hierarchies are mounted under a cgroupfs root.
type Layout struct {
	// Root is the cgroupfs root the layout was read from.
	Root string
	// Unified is true for a cgroup v2 only system: Root itself is the
	// cgroup2 hierarchy.
	Unified bool
	// Hierarchies are the hierarchies scopes are made in, sorted by path:
	// the one cgroup2 hierarchy for Unified; else every cgroup v1 hierarchy
	// (each a directory of Root such as cpu, memory, systemd) and the
	// cgroup2 one of a hybrid system (Root/unified).
	Hierarchies []Hierarchy
}

// Hierarchy is one mounted cgroup hierarchy.
type Hierarchy struct {
	// Path is where it is mounted.
	Path string
	// V2 is true for the cgroup2 hierarchy.
	V2 bool
	// Cpuset is true for the v1 hierarchy with the cpuset controller: a
	// new cgroup there takes no process until cpuset.cpus and cpuset.mems
	// are set.
	Cpuset bool
	// Memory is true where the memory controller is: the v1 memory
	// hierarchy, or the v2 one when its root offers memory.
	Memory bool
	// CPU is true where the cpu controller is: the v1 hierarchy with
	// cpu.shares, or the v2 one when its root offers cpu.
	CPU bool
	// Pids is true where the pids controller is: the v1 hierarchy named
	// after it (its root has no pids file), or the v2 one when its root
	// offers pids.
	Pids bool
}

// DetectLayout reads the layout of the cgroup hierarchies under root:
// cgroup v2 when root has cgroup.controllers; otherwise cgroup v1, every
// directory of root (not symbolic links such as cpu -> cpu,cpuacct) that is
// a hierarchy, with "unified" as the cgroup2 one of a hybrid layout. A
// hierarchy must be mounted at its root: a view of a cgroup namespace or a
// bind mount of a container's own cgroup (a cgroup v2 directory with
// cgroup.type, a v1 one without release_agent) is refused, since scopes made
// there would live and die inside the container's cgroup.
func DetectLayout(root string) (Layout, error) {
	l := Layout{Root: root}
	if exists(filepath.Join(root, "cgroup.controllers")) {
		h, err := hierarchyAt(root)
		if err != nil {
			return l, err
		}
		l.Unified = true
		l.Hierarchies = []Hierarchy{h}
		return l, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return l, fmt.Errorf("read cgroup root: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if !exists(filepath.Join(dir, "cgroup.procs")) {
			continue
		}
		h, err := hierarchyAt(dir)
		if err != nil {
			return l, err
		}
		l.Hierarchies = append(l.Hierarchies, h)
	}
	if len(l.Hierarchies) == 0 {
		return l, fmt.Errorf("no cgroup hierarchy under %s: neither cgroup.controllers (cgroup v2) nor directories with cgroup.procs (cgroup v1)", root)
	}
	sort.Slice(l.Hierarchies, func(i, j int) bool { return l.Hierarchies[i].Path < l.Hierarchies[j].Path })
	return l, nil
}

// hierarchyAt describes the hierarchy mounted at dir.
func hierarchyAt(dir string) (Hierarchy, error) {
	h := Hierarchy{Path: dir}
	if exists(filepath.Join(dir, "cgroup.controllers")) {
		h.V2 = true
		if exists(filepath.Join(dir, "cgroup.type")) {
			return h, fmt.Errorf("%s is not the root of the cgroup2 hierarchy (it has cgroup.type): it looks like a cgroup namespace's or a container's view; mount the host's cgroup file system and point the cgroup root at it", dir)
		}
		controllers, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return h, fmt.Errorf("read cgroup controllers: %w", err)
		}
		h.Memory = slices.Contains(strings.Fields(string(controllers)), "memory")
		h.CPU = slices.Contains(strings.Fields(string(controllers)), "cpu")
		h.Pids = slices.Contains(strings.Fields(string(controllers)), "pids")
		return h, nil
	}
	if !exists(filepath.Join(dir, "release_agent")) {
		return h, fmt.Errorf("%s is not the root of a cgroup v1 hierarchy (it has no release_agent): it looks like a container's view; mount the host's cgroup file system and point the cgroup root at it", dir)
	}
	h.Cpuset = exists(filepath.Join(dir, "cpuset.cpus"))
	h.Memory = exists(filepath.Join(dir, "memory.limit_in_bytes"))
	h.CPU = exists(filepath.Join(dir, "cpu.shares"))
	h.Pids = slices.Contains(strings.Split(filepath.Base(dir), ","), "pids")
	return h, nil
}

// exists reports whether path exists; one that cannot be stat'ed counts as
// missing.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
