package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUninstallCommand: `mountpod uninstall` on an empty node root is
// clean (exit 0), on one in use refuses (exit 1, naming the mount), and
// bad flags exit 2; nothing is touched outside the root.
func TestUninstallCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the uninstall trusts only root's files: its tests run as root, and CI runs them so")
		}
		t.Skip("the uninstall trusts only root's files: run as root")
	}
	t.Setenv("MOUNTPOD_SCOPES", "false")
	root := t.TempDir()
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(mountinfo, []byte("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(root, "var/log/mountcontainers/glusterfs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"uninstall", "--host-root", root, "--host-mountinfo", mountinfo}
	code, _, stderr := runApp(context.Background(), base...)
	if code != 0 || !strings.Contains(stderr, "the node is clean") || !strings.Contains(stderr, "removed directory") {
		t.Fatalf("uninstall = %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Dir(logDir)); !os.IsNotExist(err) {
		t.Errorf("the daemons' log directory left: %v", err)
	}

	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mountinfo, []byte("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n50 1 0:50 / /var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount rw - fuse.glusterfs gluster-1:/gv0 rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runApp(context.Background(), append(base, "--wait", "0s")...)
	if code != exitFailure || !strings.Contains(stderr, "nothing was removed") || !strings.Contains(stderr, "fuse.glusterfs from gluster-1:/gv0") {
		t.Fatalf("uninstall with a mount = %d; want %d naming it\n%s", code, exitFailure, stderr)
	}
	if _, err := os.Stat(logDir); err != nil {
		t.Errorf("a refused uninstall removed %s: %v", logDir, err)
	}

	for _, args := range [][]string{
		{"--registration-dir", "plugin-containers"},
		{"--plugins", "not a plugin"},
		{"extra"},
	} {
		code, _, stderr = runApp(context.Background(), append(base, args...)...)
		if code != exitUsage {
			t.Errorf("uninstall %v = %d; want %d\n%s", args, code, exitUsage, stderr)
		}
	}
	if _, err := os.Stat(logDir); err != nil {
		t.Errorf("a refused uninstall removed %s: %v", logDir, err)
	}
}
