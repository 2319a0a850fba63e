package deploy_test

import (
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// TestScopeLimits: the overlays whose FUSE daemons live in scopes limit the
// memory and the processes of each plugin's scopes, and do not let the
// daemons keep the pod's OOM protection.
func TestScopeLimits(t *testing.T) {
	for _, overlay := range []string{"glusterfs", "cephfs"} {
		t.Run(overlay, func(t *testing.T) {
			ds := daemonSet(t, overlay)
			enabled, cfg, err := scope.ConfigFromEnv(func(name string) string { return envValue(ds, name) })
			if err != nil || !enabled {
				t.Fatalf("scope settings: enabled %v, %v", enabled, err)
			}
			if cfg.MemoryLimit <= 0 || cfg.MemoryLimit > 16<<30 {
				t.Errorf("MOUNTPOD_SCOPE_MEMORY_LIMIT = %d bytes, want a limit of at most 16Gi", cfg.MemoryLimit)
			}
			if cfg.PidsLimit <= 0 || cfg.PidsLimit > 32768 {
				t.Errorf("MOUNTPOD_SCOPE_PIDS_LIMIT = %d, want a limit of at most 32768", cfg.PidsLimit)
			}
			if cfg.OOMScoreAdj < 0 {
				t.Errorf("MOUNTPOD_SCOPE_OOM_SCORE_ADJ = %d, want 0 or more", cfg.OOMScoreAdj)
			}
		})
	}
}
