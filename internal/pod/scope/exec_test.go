package scope

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestExecFailures covers what Exec returns instead of executing; its
// success, an exec, is tested through the mountpod binary
// (cmd/mountpod TestScope...).
func TestExecFailures(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "cgroup")
	if err := os.Rename(fakeHybrid(t), root); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(base, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Backend: BackendCgroupfs, CgroupRoot: root, CgroupNS: CgroupNSOff}
	before := tree(t, base)
	tests := []struct {
		name   string
		plugin string
		argv   []string
		code   int
		msg    string
	}{
		{"no command", glusterfs, nil, ExitFailed, "no command"},
		{"not found", glusterfs, []string{"no-such-command-here"}, ExitNotFound, "executable file not found"},
		{"not found by path", glusterfs, []string{"/no/such/command"}, ExitNotFound, "no such file"},
		{"not executable", glusterfs, []string{notExec}, ExitCannotRun, "permission denied"},
		{"bad plugin", "../etc", []string{"true"}, ExitFailed, "invalid plugin name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Exec(cfg, tc.plugin, targetA, tc.argv)
			if err == nil || ExitCode(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Exec = %v (exit %d); want exit %d, %q", err, ExitCode(err), tc.code, tc.msg)
			}
		})
	}
	if after := tree(t, base); !slices.Equal(before, after) {
		t.Errorf("failed Execs left cgroups behind:\nbefore %q\nafter  %q", before, after)
	}
	// A placement failure: exit 125, naming the plugin and the cgroup.
	if err := os.Remove(filepath.Join(root, "cpuset/cpuset.mems")); err != nil {
		t.Fatal(err)
	}
	err := Exec(cfg, glusterfs, targetA, []string{"true"})
	for _, want := range []string{glusterfs, "/mountcontainers/kubernetes.io~glusterfs/" + Name(targetA), "cpuset.mems"} {
		if err == nil || ExitCode(err) != ExitFailed || !strings.Contains(err.Error(), want) {
			t.Errorf("Exec with a broken cpuset = %v (exit %d); want exit %d naming %q", err, ExitCode(err), ExitFailed, want)
		}
	}
}
