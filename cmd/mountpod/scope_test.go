package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope/scopetest"
)

// TestScopeFailures runs `mountpod scope` in this process: only its
// failures, since success replaces the process with the command. Every case
// points the cgroupfs backend at an empty directory, so that none can place
// this process anywhere, whatever it gets wrong.
func TestScopeFailures(t *testing.T) {
	empty := t.TempDir()
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MOUNTPOD_SCOPE_BACKEND", "cgroupfs")
	t.Setenv("MOUNTPOD_SCOPE_CGROUP_ROOT", empty)
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no plugin", nil, []string{"--target", "/mnt/x", "--", "true"}, 125, "--plugin and --target are required"},
		{"no target", nil, []string{"--plugin", "kubernetes.io/glusterfs", "--", "true"}, 125, "--plugin and --target are required"},
		{"no command", nil, []string{"--plugin", "kubernetes.io/glusterfs", "--target", "/mnt/x"}, 125, "no command given"},
		{"unknown flag", nil, []string{"--bogus", "--", "true"}, 125, "flag provided but not defined: -bogus"},
		{"bad memory limit", map[string]string{"MOUNTPOD_SCOPE_MEMORY_LIMIT": "lots"}, []string{"--plugin", "kubernetes.io/glusterfs", "--target", "/mnt/x", "--", "true"}, 125, `invalid memory limit "lots"`},
		{"bad backend", map[string]string{"MOUNTPOD_SCOPE_BACKEND": "docker"}, []string{"--plugin", "kubernetes.io/glusterfs", "--target", "/mnt/x", "--", "true"}, 125, `invalid scope backend "docker"`},
		{"bad plugin", nil, []string{"--plugin", "../../etc", "--target", "/mnt/x", "--", "true"}, 125, `invalid plugin name "../../etc"`},
		{"relative target", nil, []string{"--plugin", "kubernetes.io/glusterfs", "--target", "mnt/x", "--", "true"}, 125, "must be an absolute path"},
		{"no cgroup file system", nil, []string{"--plugin", "kubernetes.io/glusterfs", "--target", "/mnt/x", "--", "true"}, 125, "no cgroup hierarchy under " + empty},
		{"command not found", nil, []string{"--plugin", "kubernetes.io/glusterfs", "--target", "/mnt/x", "--", "no-such-command-here"}, 127, `"no-such-command-here": executable file not found`},
		{"command not executable", nil, []string{"--plugin", "kubernetes.io/glusterfs", "--target", "/mnt/x", "--", notExec}, 126, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runApp(context.Background(), append([]string{"scope"}, tt.args...)...)
			if code != tt.wantCode || stdout != "" || !strings.HasPrefix(stderr, "mountpod: scope: ") || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("mountpod scope %q = %d\nstdout: %s\nstderr: %s\nwant %d, stderr containing %q", tt.args, code, stdout, stderr, tt.wantCode, tt.wantStderr)
			}
		})
	}
}

// TestScopeEndToEnd runs the mountpod binary: the wrapped shell and the
// background process it leaves behind (as mount.glusterfs leaves its FUSE
// daemon) are in the scope of the target in every hierarchy, outside this
// test's cgroups; the exit code is the command's.
func TestScopeEndToEnd(t *testing.T) {
	parent, env := scopetest.Parent(t)
	bin := scopetest.Build(t, ".", "mountpod")
	const plugin, target = "kubernetes.io/glusterfs", "/var/lib/kubelet/pods/0c9f6a2e/volumes/kubernetes.io~glusterfs/data"
	cgroup := "/" + parent + "/kubernetes.io~glusterfs/" + scope.Name(target)

	cmd := exec.Command(bin, scope.Wrap(plugin, target, []string{"sh", "-c", `sleep 30 >/dev/null 2>&1 & echo $!; cat /proc/$$/cgroup`})[1:]...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mountpod scope: %v\n%s", err, stderr.String())
	}
	first, shCgroup, _ := strings.Cut(string(out), "\n")
	daemon, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("output %q: want the background PID first", out)
	}
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })

	sh, err := scope.ParseMembership(strings.NewReader(shCgroup))
	if err != nil || !sh.In(cgroup) {
		t.Errorf("the wrapped shell's cgroups:\n%s\nwant %s everywhere (%v)", shCgroup, cgroup, err)
	}
	self, err := scope.ProcMembership(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	got, err := scope.ProcMembership(daemon)
	if err != nil || !got.In(cgroup) || !got.Outside(self) {
		t.Errorf("the background process's cgroups = %v, %v; want %s everywhere, outside %v", got, err, cgroup, self)
	}

	// Exit codes pass through.
	cmd = exec.Command(bin, scope.Wrap(plugin, target, []string{"sh", "-c", "exit 7"})[1:]...)
	cmd.Env = env
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Errorf("mountpod scope -- sh -c 'exit 7' = %v; want exit 7", err)
	}

	// A command that cannot be executed, found only after placement:
	// 126, and the empty scope stays for Remove.
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(bin, scope.Wrap(plugin, target, []string{garbage})[1:]...)
	cmd.Env = env
	if out, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 126 || !strings.Contains(string(out), "mountpod: scope: exec "+garbage+": exec format error") {
		t.Errorf("mountpod scope -- %s = %v, %s; want exit 126 and the exec error", garbage, cmd.ProcessState, out)
	}

	// Once the daemon is gone, the scope can be removed.
	syscall.Kill(daemon, syscall.SIGKILL)
	scopetest.RemoveOnceEmpty(t, parent, plugin, target)
}

// BenchmarkScope measures what a scope adds to one mount: each op runs the
// real binary as `mountpod scope ... -- true` on the real cgroup file system
// (cgroupfs backend, the same target each time, so the scope is joined as a
// remount would) and, in the same run, `true` alone and `mountpod
// --version` (the binary's own start-up, the part of the cost that is not
// the scope's). Reported: the medians of all three, the median difference
// per op (added-ms, the figure to keep under 5 ms) and the ratio. Needs
// root. scope.Start, which avoids the second Go process, has its own
// benchmark in internal/pod/scope.
//
//	go test ./cmd/mountpod -run '^$' -bench Scope -benchtime 200x
func BenchmarkScope(b *testing.B) {
	_, env := scopetest.Parent(b)
	bin := scopetest.Build(b, ".", "mountpod")
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	args := scope.Wrap("kubernetes.io/glusterfs", "/mnt/bench", []string{"true"})[1:]
	run := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return time.Since(start)
	}
	run(bin, args...) // the parents exist from here on, as on a node
	var raw, scoped, added, version []time.Duration
	b.ResetTimer()
	for range b.N {
		r := run(truePath)
		s := run(bin, args...)
		raw, scoped, added = append(raw, r), append(scoped, s), append(added, s-r)
		version = append(version, run(bin, "--version"))
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(median(version)), "version-ms")
	b.ReportMetric(ms(median(raw)), "raw-ms")
	b.ReportMetric(ms(median(scoped)), "scope-ms")
	b.ReportMetric(ms(median(added)), "added-ms")
	b.ReportMetric(float64(median(scoped))/float64(median(raw)), "scope/raw")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// scopeConfigOf returns the scope configuration `mountpod scope args...`
// would use, and the error that would stop it.
func scopeConfigOf(t *testing.T, args ...string) (scope.Config, error) {
	t.Helper()
	var cfg scope.Config
	var cfgErr error
	cmd := scopeCommand()
	cmd.Action = func(c *cli.Context) error {
		cfg, cfgErr = scopeConfigFrom(c)
		return nil
	}
	app := &cli.App{
		Name: "mountpod", Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard,
		ExitErrHandler: func(*cli.Context, error) {}, // an error is the test's to report, not an exit
	}
	if err := app.Run(append([]string{"mountpod", "scope"}, args...)); err != nil {
		t.Fatalf("mountpod scope %q: %v", args, err)
	}
	return cfg, cfgErr
}

// TestScopeLimitsAreServes: `mountpod scope` takes the pids limit and the
// oom_score_adj from its flags or from the variables serve and the mount
// helper read, with their defaults and checks: its configuration is the
// one scope.ConfigFromEnv makes of the same settings.
func TestScopeLimitsAreServes(t *testing.T) {
	for _, name := range []string{"MOUNTPOD_SCOPE_PIDS_LIMIT", "MOUNTPOD_SCOPE_OOM_SCORE_ADJ"} {
		t.Setenv(name, "")
	}
	cfg, err := scopeConfigOf(t)
	if err != nil || cfg.PidsLimit != 0 || cfg.OOMScoreAdj != 0 {
		t.Errorf("no flag, no variable: pids limit %d, oom_score_adj %d, %v; want 0, 0 (serve's defaults)", cfg.PidsLimit, cfg.OOMScoreAdj, err)
	}

	// Every setting from the environment: the very configuration serve's
	// reading of that environment gives.
	for k, v := range map[string]string{
		"MOUNTPOD_SCOPE_BACKEND":         "cgroupfs",
		"MOUNTPOD_SCOPE_CGROUP_ROOT":     "/host/sys/fs/cgroup",
		"MOUNTPOD_SCOPE_PARENT":          "mc",
		"MOUNTPOD_SCOPE_MEMORY_LIMIT":    "2Gi",
		"MOUNTPOD_SCOPE_PIDS_LIMIT":      "512",
		"MOUNTPOD_SCOPE_OOM_SCORE_ADJ":   "-500",
		"MOUNTPOD_SCOPE_SYSTEMD_SOCKETS": "/run/a,/run/b",
		"MOUNTPOD_SCOPE_CGROUPNS":        "off",
		"MOUNTPOD_SCOPE_HOST_CGROUPNS":   "/host/proc/1/ns/cgroup",
		"MOUNTPOD_SCOPE_TIMEOUT":         "45s",
	} {
		t.Setenv(k, v)
	}
	_, serves, err := scope.ConfigFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = scopeConfigOf(t)
	if err != nil || !reflect.DeepEqual(cfg, serves) {
		t.Errorf("from the environment: %+v, %v; want serve's %+v", cfg, err, serves)
	}

	// A flag wins over its variable.
	cfg, err = scopeConfigOf(t, "--pids-limit", "100", "--oom-score-adj", "300")
	if err != nil || cfg.PidsLimit != 100 || cfg.OOMScoreAdj != 300 {
		t.Errorf("--pids-limit 100 --oom-score-adj 300: pids limit %d, oom_score_adj %d, %v; want 100, 300", cfg.PidsLimit, cfg.OOMScoreAdj, err)
	}

	// Refused as serve refuses them.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pids-limit", "lots"}, "want a whole number"},
		{[]string{"--pids-limit", "-1"}, "must not be negative"},
		{[]string{"--oom-score-adj", "1001"}, "want -1000 to 1000"},
		{[]string{"--oom-score-adj", "-1001"}, "want -1000 to 1000"},
	} {
		if _, err := scopeConfigOf(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}
