package scope

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSystemdEventFiles: the systemd backend's scopes report their end
// through their units' cgroup.events in the cgroup2 hierarchy (hybrid:
// unified; v2: the root), listed from the plugin's slice; nothing else
// there is listed, and a node without a cgroup2 hierarchy gives none.
func TestSystemdEventFiles(t *testing.T) {
	for _, layout := range []string{"hybrid", "v2"} {
		t.Run(layout, func(t *testing.T) {
			root := t.TempDir()
			v2 := root
			if layout == "hybrid" {
				v2 = filepath.Join(root, "unified")
				if err := os.MkdirAll(filepath.Join(root, "memory"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			mkfile(t, filepath.Join(v2, "cgroup.controllers"))
			slice := filepath.Join(v2, "mountcontainers.slice", "mountcontainers-kubernetes.io.slice", "mountcontainers-kubernetes.io-glusterfs.slice")
			unit := filepath.Join(slice, "mount-0123456789abcdef.scope")
			mkfile(t, filepath.Join(unit, "cgroup.events"))
			for _, other := range []string{"mount-0123456789abcdef.service", "mount-xyz.scope", "other.scope"} {
				mkfile(t, filepath.Join(slice, other, "cgroup.events"))
			}
			s := &systemd{cfg: Config{CgroupRoot: root, Parent: "mountcontainers"}, v2: v2Root(root)}
			if s.v2 != v2 {
				t.Fatalf("v2Root(%s) = %q, want %q", root, s.v2, v2)
			}
			src, ok := EventsOf(s)
			if !ok {
				t.Fatal("EventsOf: the systemd backend with a cgroup2 hierarchy reports nothing")
			}
			files, err := src.EventFiles(glusterfs)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{filepath.Join(unit, "cgroup.events")}; !slices.Equal(files, want) {
				t.Errorf("EventFiles = %q, want %q", files, want)
			}
			if files, err := src.EventFiles("kubernetes.io/cephfs"); err != nil || len(files) != 0 {
				t.Errorf("EventFiles of a plugin with no slice yet = %q, %v; want none", files, err)
			}
			if r, ok := src.(RemovalIsExit); !ok || !r.RemovalIsExit() {
				t.Error("the systemd backend's scopes do not report their removal as an exit")
			}
		})
	}
	s := &systemd{cfg: Config{CgroupRoot: t.TempDir(), Parent: "mountcontainers"}}
	s.v2 = v2Root(s.cfg.CgroupRoot)
	if _, ok := EventsOf(s); ok || s.v2 != "" {
		t.Errorf("EventsOf: a node without a cgroup2 hierarchy reports events (v2 %q)", s.v2)
	}
}

func mkfile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
