package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/livemount"
)

// TestStatusWithoutScopes: scopes that are on but unavailable (here: no
// cgroup file system under the root) do not stop the report, which says why
// no mount is scoped.
func TestStatusWithoutScopes(t *testing.T) {
	t.Setenv("MOUNTPOD_SCOPES", "true")
	t.Setenv("MOUNTPOD_SCOPE_BACKEND", "cgroupfs")
	t.Setenv("MOUNTPOD_SCOPE_CGROUP_ROOT", t.TempDir())
	t.Setenv("MOUNTPOD_PLUGINS", "kubernetes.io/glusterfs")
	kubelet := t.TempDir()
	code, stdout, stderr := runApp(context.Background(), "status", "--kubelet-dir", kubelet, "-o", "json")
	if code != 0 {
		t.Fatalf("status = %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var r livemount.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, stdout)
	}
	if !strings.Contains(r.ScopesError, "no cgroup hierarchy") || len(r.Mounts) != 0 {
		t.Errorf("report %+v, want no mount and the scopes' error", r)
	}
	code, stdout, _ = runApp(context.Background(), "status", "--kubelet-dir", kubelet)
	if code != 0 || !strings.Contains(stdout, "scopes unavailable, so no mount shows as scoped: ") {
		t.Errorf("status (text) = %d:\n%s", code, stdout)
	}
}
