package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
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

// TestStatusListsMountRecords: the records the recovery works from are in
// the report, with whether each is recoverable and whether a recovery is
// under way.
func TestStatusListsMountRecords(t *testing.T) {
	t.Setenv("MOUNTPOD_SCOPES", "false")
	t.Setenv("MOUNTPOD_PLUGINS", "kubernetes.io/glusterfs")
	reg := filepath.Join(t.TempDir(), "plugin-containers")
	records := filepath.Join(reg, mountrecord.Dir)
	ok := mountrecord.Record{Plugin: "kubernetes.io/glusterfs", Source: "srv:/a", Target: "/k/a", FSType: "glusterfs"}
	secret := mountrecord.Record{Plugin: "kubernetes.io/glusterfs", Source: "srv:/b", Target: "/k/b", FSType: "fuse.sshfs", NotRecoverable: "its options hold a secret"}
	for _, r := range []mountrecord.Record{ok, secret} {
		if err := mountrecord.Write(records, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(records, mountrecord.FileName("/k/a")+".recovering"), []byte("0:77\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runApp(context.Background(), "status", "--registration-dir", reg, "--kubelet-dir", t.TempDir(), "-o", "json")
	if code != 0 {
		t.Fatalf("status = %d\n%s\n%s", code, stdout, stderr)
	}
	var r statusReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	got := map[string]recordStatus{}
	for _, rec := range r.Records {
		got[rec.Target] = rec
	}
	a, b := got["/k/a"], got["/k/b"]
	if len(r.Records) != 2 || !a.Recoverable || !a.Recovering || a.Source != "srv:/a" || b.Recoverable || b.Recovering || b.Why == "" {
		t.Fatalf("records %+v; want /k/a recoverable and recovering, /k/b not recoverable", r.Records)
	}
	_, stdout, _ = runApp(context.Background(), "status", "--registration-dir", reg, "--kubelet-dir", t.TempDir())
	if !strings.Contains(stdout, "record /k/a: kubernetes.io/glusterfs srv:/a (recoverable, recovery under way)") ||
		!strings.Contains(stdout, "record /k/b: kubernetes.io/glusterfs srv:/b (not recoverable: its options hold a secret)") {
		t.Errorf("status (text):\n%s", stdout)
	}
}
