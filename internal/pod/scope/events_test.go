package scope

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEventFiles: on a node with a cgroup2 hierarchy the cgroupfs backend
// names the cgroup.events file of each scope, there only; with cgroup v1
// hierarchies alone it is no event source.
func TestEventFiles(t *testing.T) {
	root := fakeHybrid(t)
	m := newFake(t, Config{CgroupRoot: root})
	src, ok := EventsOf(m)
	if !ok {
		t.Fatal("a hybrid node's cgroupfs backend is no event source")
	}
	if files, err := src.EventFiles(glusterfs); err != nil || len(files) != 0 {
		t.Errorf("before any scope: EventFiles = %q, %v; want none", files, err)
	}
	var want []string
	for _, target := range []string{targetA, targetB} {
		if _, err := m.Place(glusterfs, target, 4242); err != nil {
			t.Fatal(err)
		}
		want = append(want, filepath.Join(root, "unified/mountcontainers/kubernetes.io~glusterfs", Name(target), "cgroup.events"))
	}
	slices.Sort(want)
	// Not a scope: skipped.
	if err := os.Mkdir(filepath.Join(root, "unified/mountcontainers/kubernetes.io~glusterfs/not a scope"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := src.EventFiles(glusterfs)
	if err != nil || !slices.Equal(files, want) {
		t.Errorf("EventFiles = %q, %v\nwant %q", files, err, want)
	}
	if files, err := src.EventFiles("kubernetes.io/rbd"); err != nil || len(files) != 0 {
		t.Errorf("another plugin's EventFiles = %q, %v; want none", files, err)
	}
	if _, err := src.EventFiles("../escape"); err == nil {
		t.Error("EventFiles of a plugin name that escapes its directory: no error")
	}

	v1 := fakeHybrid(t)
	if err := os.RemoveAll(filepath.Join(v1, "unified")); err != nil {
		t.Fatal(err)
	}
	if _, ok := EventsOf(newFake(t, Config{CgroupRoot: v1})); ok {
		t.Error("a cgroup v1 only node's backend is an event source")
	}
	if _, ok := EventsOf(nil); ok {
		t.Error("a nil Manager is an event source")
	}
}

// BenchmarkRefreshListing compares, for 100 scopes on a hybrid node, what
// the recovery's watcher reads after each pass: List (every hierarchy's
// directory, and every scope's processes in one) against EventFiles (one
// directory).
// Measured on a fake tree (a tmpfs), not cgroupfs.
func BenchmarkRefreshListing(b *testing.B) {
	root := fakeHybrid(b)
	m := newFake(b, Config{CgroupRoot: root})
	for i := range 100 {
		if _, err := m.Place(glusterfs, fmt.Sprintf("/var/lib/kubelet/pods/%03d/volumes/kubernetes.io~glusterfs/data", i), 4242); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("List", func(b *testing.B) {
		for b.Loop() {
			if l, err := m.List(glusterfs); err != nil || len(l) != 100 {
				b.Fatal(len(l), err)
			}
		}
	})
	b.Run("EventFiles", func(b *testing.B) {
		for b.Loop() {
			if f, err := m.EventFiles(glusterfs); err != nil || len(f) != 100 {
				b.Fatal(len(f), err)
			}
		}
	})
}
