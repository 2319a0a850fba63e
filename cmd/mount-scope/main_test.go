package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope/scopetest"
)

const plugin = "kubernetes.io/glusterfs"

// helperDir returns a directory with the built binary linked as
// mount.fuse.test and, as its diverted real helper, the shell script body.
func helperDir(t testing.TB, bin, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "mount.fuse.test")); err != nil {
		t.Fatal(err)
	}
	if body != "" {
		if err := os.WriteFile(filepath.Join(dir, "mount.fuse.test"+scope.DivertedSuffix), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHelper runs the binary as mount(8) runs a helper: the real helper and
// the daemon it leaves behind run in the scope of the mount target, outside
// this test's cgroups, and get the helper's arguments and exit code.
func TestHelper(t *testing.T) {
	parent, env := scopetest.Parent(t)
	bin := scopetest.Build(t, ".", "mount-scope")
	target := filepath.Join(t.TempDir(), "mnt")
	cgroup := "/" + parent + "/kubernetes.io~glusterfs/" + scope.Name(target)
	dir := helperDir(t, bin, `[ -n "$EXIT" ] && exit $EXIT
sleep 30 >/dev/null 2>&1 &
echo $!
echo "$*"
cat /proc/$$/cgroup
`)
	env = append(env, "MOUNTPOD_PLUGINS="+plugin)
	self, err := scope.ProcMembership(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(filepath.Join(dir, "mount.fuse.test"), "srv:/vol", target, "-o", "ro")
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mount.fuse.test: %v\n%s", err, stderr.String())
	}
	lines := strings.SplitN(string(out), "\n", 3)
	daemon, err := strconv.Atoi(lines[0])
	if err != nil || len(lines) < 3 {
		t.Fatalf("output %q: want the daemon's PID, the arguments, the cgroups", out)
	}
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	if want := "srv:/vol " + target + " -o ro"; lines[1] != want {
		t.Errorf("the real helper got %q, want %q", lines[1], want)
	}
	if m, err := scope.ParseMembership(strings.NewReader(lines[2])); err != nil || !m.In(cgroup) {
		t.Errorf("the real helper's cgroups:\n%s\nwant %s everywhere (%v)", lines[2], cgroup, err)
	}
	if m, err := scope.ProcMembership(daemon); err != nil || !m.In(cgroup) || !m.Outside(self) {
		t.Errorf("the daemon's cgroups = %v, %v; want %s everywhere, outside %v", m, err, cgroup, self)
	}

	// The real helper's exit code is the helper's.
	cmd = exec.Command(filepath.Join(dir, "mount.fuse.test"), "srv:/vol", target)
	cmd.Env = append(env, "EXIT=32")
	if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 32 {
		t.Errorf("exit code %v, want the real helper's 32", err)
	}

	syscall.Kill(daemon, syscall.SIGKILL)
	scopetest.RemoveOnceEmpty(t, parent, plugin, target)
}

// TestHelperWithoutScope: scopes off, or a call that is not a mount, run the
// real helper where the caller is, and make no scope.
func TestHelperWithoutScope(t *testing.T) {
	parent, env := scopetest.Parent(t)
	bin := scopetest.Build(t, ".", "mount-scope")
	target := filepath.Join(t.TempDir(), "mnt")
	dir := helperDir(t, bin, "cat /proc/$$/cgroup\n")
	self, err := scope.ProcMembership(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"scopes off", []string{"MOUNTPOD_SCOPES=false"}, []string{"srv:/vol", target}},
		// Whatever the settings: a pod serving two plugins (no scope
		// plugin to tell) still answers mount.glusterfs -V.
		{"not a mount", []string{"MOUNTPOD_PLUGINS=a.io/x,b.io/y"}, []string{"-V"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(dir, "mount.fuse.test"), tc.args...)
			cmd.Env = append(env, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			m, err := scope.ParseMembership(strings.NewReader(string(out)))
			if err != nil || m.InAny("/"+parent) {
				t.Errorf("cgroups %v (%v): want none under %s", m, err, parent)
			}
			if self.Outside(m) {
				t.Errorf("cgroups %v, want this test's %v", m, self)
			}
		})
	}
	mgr, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	if l, err := mgr.List(plugin); err != nil || len(l) != 0 {
		t.Errorf("scopes %v (%v), want none", l, err)
	}
}

// TestHelperFailures: the binary's own failures, each before the real
// helper runs, with the exit code and a message naming what failed.
func TestHelperFailures(t *testing.T) {
	bin := scopetest.Build(t, ".", "mount-scope")
	target := filepath.Join(t.TempDir(), "mnt")
	withReal := helperDir(t, bin, "echo RAN\n")
	noReal := helperDir(t, bin, "")
	empty := t.TempDir()
	base := append(os.Environ(), "MOUNTPOD_SCOPE_BACKEND=cgroupfs", "MOUNTPOD_SCOPE_CGROUP_ROOT="+empty)
	for _, tc := range []struct {
		name, dir, argv0 string
		env              []string
		code             int
		want             string
	}{
		{"own name", withReal, bin, nil, 125, "runs as a mount helper"},
		{"real helper missing", noReal, "mount.fuse.test", []string{"MOUNTPOD_PLUGINS=" + plugin}, 127, "the real helper " + filepath.Join(noReal, "mount.fuse.test.distrib")},
		{"plugin unknown", withReal, "mount.fuse.test", []string{"MOUNTPOD_PLUGINS=a.io/x,b.io/y"}, 125, "set MOUNTPOD_SCOPE_PLUGIN"},
		{"bad plugin", withReal, "mount.fuse.test", []string{"MOUNTPOD_SCOPE_PLUGIN=../../etc"}, 125, `invalid plugin name "../../etc"`},
		{"bad switch", withReal, "mount.fuse.test", []string{"MOUNTPOD_SCOPES=maybe"}, 125, `MOUNTPOD_SCOPES="maybe"`},
		{"no cgroup file system", withReal, "mount.fuse.test", []string{"MOUNTPOD_PLUGINS=" + plugin}, 125, "scope for " + target},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.argv0
			if !filepath.IsAbs(path) {
				path = filepath.Join(tc.dir, path)
			}
			cmd := exec.Command(path, "srv:/vol", target)
			cmd.Env = append(append([]string{}, base...), tc.env...)
			out, _ := cmd.CombinedOutput()
			if cmd.ProcessState.ExitCode() != tc.code || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "RAN") {
				t.Errorf("exit %d, output %q; want exit %d, a message containing %q, the real helper not run", cmd.ProcessState.ExitCode(), out, tc.code, tc.want)
			}
		})
	}
}

// BenchmarkHelper measures what the scope adds to one mount: each op runs
// the real helper (a shell script that exits) directly, and through the
// scope helper as mount(8) would, the same target each time (a remount
// joins its scope). Reported: both medians, the median difference (added-ms:
// the figure to keep under 5 ms) and the ratio; and the median with scopes
// off (scopes-off-ms: one more program's start without the placement).
// Needs root.
//
//	go test ./cmd/mount-scope -run '^$' -bench Helper -benchtime 200x
func BenchmarkHelper(b *testing.B) {
	_, env := scopetest.Parent(b)
	bin := scopetest.Build(b, ".", "mount-scope")
	dir := helperDir(b, bin, "exit 0\n")
	env = append(env, "MOUNTPOD_PLUGINS="+plugin)
	off := append(slices.Clone(env), scope.EnvScopes+"=false")
	target := filepath.Join(b.TempDir(), "mnt")
	run := func(name string, env []string) time.Duration {
		cmd := exec.Command(name, "srv:/vol", target)
		cmd.Env = env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", name, err, out)
		}
		return time.Since(start)
	}
	helper := filepath.Join(dir, "mount.fuse.test")
	run(helper, env) // the parents exist from here on, as on a node
	var raw, scoped, unscoped, added []time.Duration
	b.ResetTimer()
	for range b.N {
		r := run(helper+scope.DivertedSuffix, env)
		s := run(helper, env)
		u := run(helper, off)
		raw, scoped, unscoped, added = append(raw, r), append(scoped, s), append(unscoped, u), append(added, s-r)
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(med(raw), "raw-ms")
	b.ReportMetric(med(scoped), "scope-ms")
	b.ReportMetric(med(unscoped), "scopes-off-ms")
	b.ReportMetric(med(added), "added-ms")
	b.ReportMetric(med(scoped)/med(raw), "scope/raw")
}

// TestHelperLinksLittle keeps the helper's start-up small: it runs for
// every FUSE mount, and Kubernetes' packages (validation, quantities),
// package regexp and the registration package's watcher cost more to
// initialise than the Go runtime takes to start (BENCHMARKS.md).
func TestHelperLinksLittle(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/mountcontainers/mountcontainers/internal/pod/scope") {
		t.Fatal("the helper does not link internal/pod/scope: the check below proves nothing")
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "k8s.io/") || d == "regexp" || strings.HasPrefix(d, "github.com/fsnotify/") ||
			d == "github.com/mountcontainers/mountcontainers/pkg/registration" {
			t.Errorf("the mount helper links %s", d)
		}
	}
}

// TestHelperCephFuse runs the binary as /sbin/mount.fuse.ceph: it never runs
// the diverted script; ceph-fuse (from PATH) gets the translated arguments,
// one argument per value whatever shell syntax it holds, and runs (with
// the daemon it leaves) in the mount target's scope; a refused option runs
// nothing and makes no scope.
func TestHelperCephFuse(t *testing.T) {
	parent, env := scopetest.Parent(t)
	bin := scopetest.Build(t, ".", "mount-scope")
	target := filepath.Join(t.TempDir(), "mnt")
	cgroup := "/" + parent + "/kubernetes.io~glusterfs/" + scope.Name(target)
	sbin, pathDir := t.TempDir(), t.TempDir()
	if err := os.Symlink(bin, filepath.Join(sbin, "mount.fuse.ceph")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sbin, "mount.fuse.ceph"+scope.DivertedSuffix), []byte("#!/bin/sh\necho SCRIPT RAN\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pathDir, "ceph-fuse"), []byte(`#!/bin/sh
sleep 30 >/dev/null 2>&1 &
echo $!
for a; do printf '[%s]' "$a"; done; echo
cat /proc/$$/cgroup
`), 0o755); err != nil {
		t.Fatal(err)
	}
	env = append(env, "MOUNTPOD_PLUGINS="+plugin, "PATH="+pathDir+":/usr/bin:/bin")

	cmd := exec.Command(filepath.Join(sbin, "mount.fuse.ceph"), "none", target, "-o", "rw,ceph.id=a,ceph.keyfile=/k;touch /tmp/x,_netdev")
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mount.fuse.ceph: %v\n%s", err, stderr.String())
	}
	lines := strings.SplitN(string(out), "\n", 3)
	daemon, err := strconv.Atoi(lines[0])
	if err != nil || len(lines) < 3 {
		t.Fatalf("output %q: want the daemon's PID, the arguments, the cgroups", out)
	}
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	if want := "[--id=a][--keyfile=/k;touch /tmp/x][" + target + "][-o][rw]"; lines[1] != want {
		t.Errorf("ceph-fuse got %s, want %s", lines[1], want)
	}
	if m, err := scope.ParseMembership(strings.NewReader(lines[2])); err != nil || !m.In(cgroup) {
		t.Errorf("ceph-fuse's cgroups:\n%s\nwant %s everywhere (%v)", lines[2], cgroup, err)
	}
	if m, err := scope.ProcMembership(daemon); err != nil || !m.In(cgroup) {
		t.Errorf("the daemon's cgroups = %v, %v; want %s everywhere", m, err, cgroup)
	}
	syscall.Kill(daemon, syscall.SIGKILL)
	scopetest.RemoveOnceEmpty(t, parent, plugin, target)

	other := filepath.Join(t.TempDir(), "mnt")
	cmd = exec.Command(filepath.Join(sbin, "mount.fuse.ceph"), "none", other, "-o", "ceph.id=a,ceph.keyfile=")
	cmd.Env = env
	out, _ = cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != scope.ExitFailed || !strings.Contains(string(out), `option "ceph.keyfile" has an empty value`) || strings.Contains(string(out), "RAN") || strings.Contains(string(out), "--id") {
		t.Errorf("empty value: exit %d, output %q; want exit %d, the option named, nothing run", code, out, scope.ExitFailed)
	}
	mgr, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	if l, err := mgr.List(plugin); err != nil || len(l) != 0 {
		t.Errorf("scopes %v (%v) after a refused mount, want none", l, err)
	}
}

// TestHelperOOMScoreAdj: the real helper, and so the daemon it starts, runs
// with at least the configured oom_score_adj (0 by default), never with a
// lower one than it was started with.
func TestHelperOOMScoreAdj(t *testing.T) {
	parent, env := scopetest.Parent(t)
	bin := scopetest.Build(t, ".", "mount-scope")
	target := filepath.Join(t.TempDir(), "mnt")
	dir := helperDir(t, bin, "cat /proc/$$/oom_score_adj\n")
	env = append(env, "MOUNTPOD_PLUGINS="+plugin)
	for _, tc := range []struct {
		start, setting, want string
	}{
		{"0", "", "0"},
		{"200", "", "200"},
		{"0", "300", "300"},
		{"200", "-500", "200"},
	} {
		// The shell sets the score the helper starts with, then becomes it.
		cmd := exec.Command("sh", "-c", `echo "$0" >/proc/self/oom_score_adj && exec "$@"`, tc.start, filepath.Join(dir, "mount.fuse.test"), "srv:/vol", target)
		cmd.Env = append(slices.Clone(env), "MOUNTPOD_SCOPE_OOM_SCORE_ADJ="+tc.setting)
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("started with %s, MOUNTPOD_SCOPE_OOM_SCORE_ADJ=%q: oom_score_adj %q (%v), want %s", tc.start, tc.setting, got, err, tc.want)
		}
	}
	scopetest.RemoveOnceEmpty(t, parent, plugin, target)
}

// TestHelperGlusterfs runs the binary as /sbin/mount.glusterfs: it never
// runs the diverted script; glusterfs (from PATH) gets the translated
// arguments, one argument per value, and runs (with the daemon it leaves)
// in the mount target's scope, as the helper's child; a client that exits
// 0 without a FUSE mount on the target, or fails, is a failed mount (exit
// 1, as the script's); a refused option runs nothing and makes no scope.
// (A mount that is made is the end-to-end suite's: every GlusterFS mount
// there goes through this helper.)
func TestHelperGlusterfs(t *testing.T) {
	parent, env := scopetest.Parent(t)
	bin := scopetest.Build(t, ".", "mount-scope")
	target := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	cgroup := "/" + parent + "/kubernetes.io~glusterfs/" + scope.Name(target)
	sbin, pathDir := t.TempDir(), t.TempDir()
	if err := os.Symlink(bin, filepath.Join(sbin, "mount.glusterfs")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sbin, "mount.glusterfs"+scope.DivertedSuffix), []byte("#!/bin/sh\necho SCRIPT RAN\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pathDir, "glusterfs"), []byte(`#!/bin/sh
sleep 30 >/dev/null 2>&1 &
echo $!
for a; do printf '[%s]' "$a"; done; echo
echo "parent $PPID $(tr '\0' '\n' </proc/$PPID/environ | grep '^MOUNTPOD_HELPER_IN_SCOPE=') own ${MOUNTPOD_HELPER_IN_SCOPE-unset}"
cat /proc/$$/cgroup
exit "${GLUSTERFS_EXIT:-0}"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	env = append(env, "MOUNTPOD_PLUGINS="+plugin, "PATH="+pathDir+":/usr/bin:/bin")

	cmd := exec.Command(filepath.Join(sbin, "mount.glusterfs"), "srv1:/vol", target, "-o", "rw,log-level=ERROR,xlator-option=*dht*.x=$(touch${IFS}/tmp/x);*,backup-volfile-servers=srv2")
	// A stale marker from the caller is not taken for the helper's own.
	cmd.Env = append(slices.Clone(env), scope.EnvInScope+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	lines := strings.SplitN(string(out), "\n", 4)
	daemon, err := strconv.Atoi(lines[0])
	if err != nil || len(lines) < 4 {
		t.Fatalf("output %q (stderr %q): want the daemon's PID, the arguments, the helper's marker, the cgroups", out, stderr.String())
	}
	// The helper that waits for glusterfs ran itself again once in the
	// scope: its environment (its last execve's) has the marker with its
	// own PID, which glusterfs's does not have.
	if want := fmt.Sprintf("parent %d %s=%d own unset", cmd.Process.Pid, scope.EnvInScope, cmd.Process.Pid); lines[2] != want {
		t.Errorf("the helper and its client: %q, want %q (the helper re-executed in its scope, the marker kept from the client)", lines[2], want)
	}
	lines = append(lines[:2], lines[3])
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	if want := "[--log-level=ERROR][--xlator-option=*dht*.x=$(touch${IFS}/tmp/x);*][--process-name][fuse][--volfile-server=srv1][--volfile-server=srv2][--volfile-id=/vol][" + target + "]"; lines[1] != want {
		t.Errorf("glusterfs got %s, want %s", lines[1], want)
	}
	if m, err := scope.ParseMembership(strings.NewReader(lines[2])); err != nil || !m.In(cgroup) {
		t.Errorf("glusterfs's cgroups:\n%s\nwant %s everywhere (%v)", lines[2], cgroup, err)
	}
	if m, err := scope.ProcMembership(daemon); err != nil || !m.In(cgroup) {
		t.Errorf("the daemon's cgroups = %v, %v; want %s everywhere", m, err, cgroup)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "nothing is mounted on "+target) || strings.Contains(string(out)+stderr.String(), "RAN") {
		t.Errorf("a client that exits 0 without a mount: exit %d, stderr %q; want exit 1, nothing mounted, the script not run", code, stderr.String())
	}
	syscall.Kill(daemon, syscall.SIGKILL)
	scopetest.RemoveOnceEmpty(t, parent, plugin, target)

	// Born in its scope, as a helper that mount(8) forks once the exec
	// service or a CRI batch has placed it (scope.PlaceEarly): the helper
	// does not run itself again, and the client still runs in the scope.
	early, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	cmd = exec.Command("sh", "-c", `read go && exec "$0" "$@"`, filepath.Join(sbin, "mount.glusterfs"), "srv1:/vol", target)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var born strings.Builder
	cmd.Stdout, cmd.Stderr = &born, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := early.Place(plugin, target, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	cmd.Wait()
	lines = strings.SplitN(born.String(), "\n", 4)
	if daemon, err = strconv.Atoi(lines[0]); err != nil || len(lines) < 4 {
		t.Fatalf("born in its scope: output %q (stderr %q): want the daemon's PID, the arguments, the helper's marker, the cgroups", born.String(), stderr.String())
	}
	if want := fmt.Sprintf("parent %d  own unset", cmd.Process.Pid); lines[2] != want {
		t.Errorf("born in its scope, the helper and its client: %q, want %q (the helper not run again)", lines[2], want)
	}
	if m, err := scope.ParseMembership(strings.NewReader(lines[3])); err != nil || !m.In(cgroup) {
		t.Errorf("born in its scope, glusterfs's cgroups:\n%s\nwant %s everywhere (%v)", lines[3], cgroup, err)
	}
	syscall.Kill(daemon, syscall.SIGKILL)
	scopetest.RemoveOnceEmpty(t, parent, plugin, target)

	// The client fails: its status is not the helper's, 1 is (the script's).
	cmd = exec.Command(filepath.Join(sbin, "mount.glusterfs"), "srv1:/vol", target)
	cmd.Env = append(slices.Clone(env), "GLUSTERFS_EXIT=7")
	out, _ = cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "mounting glusterfs on "+target+" failed") {
		t.Errorf("a failing client: exit %d, output %q; want exit 1, the mount named", code, out)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); first != "" {
		if pid, err := strconv.Atoi(first); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	scopetest.RemoveOnceEmpty(t, parent, plugin, target)

	for _, tc := range []struct {
		name   string
		target string
		opts   string
		code   int
		err    string
	}{
		{"unknown option", target, "bogus", 1, `invalid option "bogus"`},
		{"no mount point", filepath.Join(t.TempDir(), "missing"), "ro", 1, "no such file"},
		{"over /tmp", "/tmp", "ro", 2, "cannot mount over /tmp"},
	} {
		cmd = exec.Command(filepath.Join(sbin, "mount.glusterfs"), "srv1:/vol", tc.target, "-o", tc.opts)
		cmd.Env = env
		out, _ = cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(string(out), tc.err) || strings.Contains(string(out), "[") || strings.Contains(string(out), "RAN") {
			t.Errorf("%s: exit %d, output %q; want exit %d, %q, nothing run", tc.name, code, out, tc.code, tc.err)
		}
	}
	mgr, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, Parent: parent})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	if l, err := mgr.List(plugin); err != nil || len(l) != 0 {
		t.Errorf("scopes %v (%v) after refused mounts, want none", l, err)
	}
}
