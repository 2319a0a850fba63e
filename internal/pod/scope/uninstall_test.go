package scope

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRemovePlugin(t *testing.T) {
	root := fakeHybrid(t)
	m := newFake(t, Config{CgroupRoot: root})
	a, err := m.Place(glusterfs, targetA, 200)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Place(glusterfs, targetB, 300)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Place("kubernetes.io/cephfs", targetA, 400); err != nil {
		t.Fatal(err)
	}
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, "memory", rel))
		return err == nil
	}

	// A scope with a process: nothing is removed, not even the empty scope
	// listed before it.
	first, last := a, b
	if b.Name < a.Name {
		first, last = b, a
	}
	exitAll(t, first)
	err = RemovePlugin(m, glusterfs)
	if !errors.Is(err, ErrPopulated) {
		t.Fatalf("RemovePlugin with a live scope = %v; want ErrPopulated", err)
	}
	for _, p := range append(a.Paths, b.Paths...) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("refused RemovePlugin touched %s: %v", p, err)
		}
	}

	// The last process only in one v1 hierarchy's scope (List, which
	// reads the cgroup2 one, shows none): still nothing is removed.
	exitAll(t, last)
	var memoryDir string
	for _, p := range last.Paths {
		if filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(p)))) == "memory" {
			memoryDir = p
		}
	}
	if err := os.WriteFile(filepath.Join(memoryDir, "cgroup.procs"), []byte("300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RemovePlugin(m, glusterfs); !errors.Is(err, ErrPopulated) {
		t.Fatalf("RemovePlugin with a process in one v1 hierarchy = %v; want ErrPopulated", err)
	}
	for _, p := range append(a.Paths, b.Paths...) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("refused RemovePlugin touched %s: %v", p, err)
		}
	}

	// Empty: the plugin's parent goes in every hierarchy; the parent of all
	// stays while another plugin's is in it.
	exitAll(t, last)
	if err := RemovePlugin(m, glusterfs); err != nil {
		t.Fatal(err)
	}
	for _, h := range m.layout.Hierarchies {
		if _, err := os.Stat(filepath.Join(h.Path, "mountcontainers/kubernetes.io~glusterfs")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: plugin's parent left (%v)", h.Path, err)
		}
	}
	if !exists("mountcontainers/kubernetes.io~cephfs") {
		t.Fatal("another plugin's parent removed")
	}
	// Done again: nothing to do.
	if err := RemovePlugin(m, glusterfs); err != nil {
		t.Errorf("RemovePlugin again = %v", err)
	}

	// The last plugin: the parent of all goes too, and nothing above it.
	list, err := m.List("kubernetes.io/cephfs")
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v", list, err)
	}
	exitAll(t, list[0])
	if err := RemovePlugin(m, "kubernetes.io/cephfs"); err != nil {
		t.Fatal(err)
	}
	if exists("mountcontainers") {
		t.Error("the parent of all plugins left once empty")
	}
	if !exists("") {
		t.Error("the hierarchy's root removed")
	}
}
