package scope

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPidsLimit: the pids limit is on the plugin's parent, in the hierarchy
// with the pids controller only.
func TestPidsLimit(t *testing.T) {
	t.Run("hybrid", func(t *testing.T) {
		root := fakeHybrid(t)
		m := newFake(t, Config{CgroupRoot: root, PidsLimit: 512})
		if _, err := m.Place(glusterfs, targetA, 4242); err != nil {
			t.Fatal(err)
		}
		if got := readTrim(t, filepath.Join(root, "pids/mountcontainers/kubernetes.io~glusterfs/pids.max")); got != "512" {
			t.Errorf("pids.max of the plugin's parent = %q, want 512", got)
		}
		for _, f := range []string{"pids/mountcontainers/pids.max", "memory/mountcontainers/kubernetes.io~glusterfs/pids.max", "unified/mountcontainers/kubernetes.io~glusterfs/pids.max"} {
			if _, err := os.Stat(filepath.Join(root, f)); err == nil {
				t.Errorf("%s written; only the plugin's parent gets the limit, in the pids hierarchy", f)
			}
		}
	})
	t.Run("unified", func(t *testing.T) {
		root := fakeUnified(t)
		m := newFake(t, Config{CgroupRoot: root, PidsLimit: 4096})
		if _, err := m.Place(glusterfs, targetA, 0); err != nil {
			t.Fatal(err)
		}
		if got := readTrim(t, filepath.Join(root, "mountcontainers/kubernetes.io~glusterfs/pids.max")); got != "4096" {
			t.Errorf("pids.max = %q, want 4096", got)
		}
		for _, dir := range []string{"", "mountcontainers"} {
			if got := readTrim(t, filepath.Join(root, dir, "cgroup.subtree_control")); !strings.Contains(got, "pids") {
				t.Errorf("%s/cgroup.subtree_control = %q, want pids enabled", dir, got)
			}
		}
	})
	t.Run("no controller", func(t *testing.T) {
		root := writeTree(t, t.TempDir(), map[string]string{"cgroup.controllers": "cpu memory\n", "cgroup.procs": "", "cgroup.subtree_control": ""})
		_, err := New(Config{Backend: BackendCgroupfs, CgroupRoot: root, PidsLimit: 64, CgroupNS: CgroupNSOff})
		if err == nil || !strings.Contains(err.Error(), "pids controller") {
			t.Errorf("New with a pids limit and no pids controller = %v", err)
		}
	})
}

// TestCPUWeightCap: however many scopes there are, neither the plugin's
// parent nor the parent of every plugin weighs more than maxWeighedScopes
// processes.
func TestCPUWeightCap(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		root             func(*testing.T) string
	}{
		{"hybrid", "cpu,cpuacct/mountcontainers", "4096", func(t *testing.T) string { return fakeHybrid(t) }},
		{"unified", "mountcontainers", "400", fakeUnified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tc.root(t)
			m := newFake(t, Config{CgroupRoot: root})
			for i := range 64 {
				if _, err := m.Place(glusterfs, fmt.Sprintf("%s/%d", targetA, i), 1000+i); err != nil {
					t.Fatal(err)
				}
			}
			name := "cpu.shares"
			if tc.name == "unified" {
				name = "cpu.weight"
			}
			for _, dir := range []string{tc.file, tc.file + "/kubernetes.io~glusterfs"} {
				if got := readTrim(t, filepath.Join(root, dir, name)); got != tc.want {
					t.Errorf("%s/%s with 64 scopes = %q, want the cap, %s", dir, name, got, tc.want)
				}
			}
		})
	}
}

// TestRaiseOOMScoreAdj: a lower score (a system-node-critical pod's) is
// raised, a higher one kept.
func TestRaiseOOMScoreAdj(t *testing.T) {
	for _, tc := range []struct {
		cur, least int
		want       string
	}{
		{-997, 0, "0"},
		{-997, -500, "-500"},
		{-1000, 0, "0"},
		{0, 0, "0"},
		{500, 0, "500"},
		{200, 300, "300"},
	} {
		f := filepath.Join(t.TempDir(), "oom_score_adj")
		if err := os.WriteFile(f, []byte(fmt.Sprintf("%d\n", tc.cur)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := raiseOOMScoreAdj(f, tc.least); err != nil {
			t.Fatal(err)
		}
		if got := readTrim(t, f); got != tc.want {
			t.Errorf("oom_score_adj %d raised to at least %d = %s, want %s", tc.cur, tc.least, got, tc.want)
		}
	}
	if err := raiseOOMScoreAdj(filepath.Join(t.TempDir(), "missing"), 0); err == nil {
		t.Error("a missing oom_score_adj file is no error")
	}
}

// TestConfigFromEnvLimits: the pids limit and the oom_score_adj come from
// the environment and are checked.
func TestConfigFromEnvLimits(t *testing.T) {
	_, cfg, err := ConfigFromEnv(getenvOf(map[string]string{
		"MOUNTPOD_SCOPE_MEMORY_LIMIT": "1Gi", "MOUNTPOD_SCOPE_PIDS_LIMIT": "512", "MOUNTPOD_SCOPE_OOM_SCORE_ADJ": "100",
	}))
	if err != nil || cfg.MemoryLimit != 1<<30 || cfg.PidsLimit != 512 || cfg.OOMScoreAdj != 100 {
		t.Errorf("ConfigFromEnv = %+v, %v; want memory 1Gi, pids 512, oom_score_adj 100", cfg, err)
	}
	if _, cfg, err := ConfigFromEnv(getenvOf(nil)); err != nil || cfg.PidsLimit != 0 || cfg.OOMScoreAdj != 0 {
		t.Errorf("ConfigFromEnv of nothing = %+v, %v; want no pids limit, oom_score_adj 0", cfg, err)
	}
	for k, v := range map[string]string{
		"MOUNTPOD_SCOPE_PIDS_LIMIT":    "-1",
		"MOUNTPOD_SCOPE_OOM_SCORE_ADJ": "1001",
	} {
		if _, _, err := ConfigFromEnv(getenvOf(map[string]string{k: v})); err == nil {
			t.Errorf("%s=%s accepted", k, v)
		}
	}
	for _, k := range []string{"MOUNTPOD_SCOPE_PIDS_LIMIT", "MOUNTPOD_SCOPE_OOM_SCORE_ADJ"} {
		if _, _, err := ConfigFromEnv(getenvOf(map[string]string{k: "lots"})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=lots: %v, want an error naming it", k, err)
		}
	}
}
