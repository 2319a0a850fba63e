//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// What the tests read of the node goes through these helpers, so that the
// same proofs hold on both layouts of the bed: the default node (this
// machine: the kubelet's cgroupfs driver, scopes made by the cgroupfs
// backend) and the systemd node (BED_FLAVOR=systemd: a container booted
// with systemd as PID 1, the systemd cgroup driver, scopes made as
// transient units of that systemd). See test/framework/node.go.

// nodeTempDir returns a temporary directory that the node sees at the same
// path: t.TempDir() on the default bed, a directory under the bed's (bound
// into the node) on a systemd node.
func nodeTempDir(t testing.TB) string {
	t.Helper()
	env := framework.CurrentEnv()
	if env == nil || !env.SystemdNode() {
		return t.TempDir()
	}
	base := filepath.Join(env.BedDir, "e2e-tmp")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// nodePath returns the path by which this machine reaches p as the node
// sees it: through the node's PID 1's root on a systemd node (where a
// mount made in the node is), p itself otherwise.
func nodePath(p string) string {
	env := framework.CurrentEnv()
	if env == nil || !env.SystemdNode() {
		return p
	}
	return framework.NodeProcOf() + "/root" + p
}

// systemdRunDir is the hostPath of a mount pod's /run/systemd on the bed:
// the node's own on a systemd node, an empty directory of the bed's
// otherwise (as test/demo/manifests.sh gives it).
func systemdRunDir(env *framework.Env) string {
	if env.SystemdNode() {
		return "/run/systemd"
	}
	return filepath.Join(env.BedDir, "run-systemd")
}

// inPodCgroup reports whether a cgroup path names the pod with this UID,
// in either driver's spelling.
func inPodCgroup(path, uid string) bool {
	for _, part := range framework.PodCgroupParts(uid) {
		if strings.Contains(path, part) {
			return true
		}
	}
	return false
}

// nodePID returns pid (as this machine sees it) in the innermost PID
// namespace of the process: the node's, for a hostPID pod's process on a
// systemd node.
func nodePID(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f, ok := strings.CutPrefix(line, "NSpid:"); ok {
			ns := strings.Fields(f)
			n, err := strconv.Atoi(ns[len(ns)-1])
			if err != nil {
				t.Fatalf("NSpid of %d: %q", pid, line)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status has no NSpid", pid)
	return 0
}

// nodeRun runs a command on the node (framework.Env.NodeCommand) and
// returns its output; it fails the test on an error, or after a minute.
func nodeRun(t *testing.T, env *framework.Env, name string, args ...string) string {
	t.Helper()
	out, err := nodeTry(env, name, args...)
	if err != nil {
		t.Fatalf("on the node: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func nodeTry(env *framework.Env, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, err := env.NodeCommand(ctx, name, args...)
	if err != nil {
		return "", err
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// unitProperties returns systemctl show's properties of a unit of the
// node's systemd.
func unitProperties(t *testing.T, env *framework.Env, unit string, props ...string) map[string]string {
	t.Helper()
	out := nodeRun(t, env, "systemctl", "show", "--property="+strings.Join(props, ","), unit)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// assertScopeUnit fails unless, on a systemd node, the mount at dir of
// plugin has its scope as a transient unit of the node's systemd: active,
// in the slice the docs name for the plugin under the bed's scope parent,
// holding daemon (systemctl status lists it), the daemon's cgroup (in the
// unified hierarchy and systemd's own) the unit's. On the default bed it
// checks nothing and returns "".
func assertScopeUnit(t *testing.T, env *framework.Env, plugin, dir string, daemon int) string {
	t.Helper()
	if !env.SystemdNode() {
		return ""
	}
	parent := env.Vars["BED_SCOPE_PARENT"]
	slice, err := scope.SliceName(parent, plugin)
	if err != nil {
		t.Fatal(err)
	}
	unit := scope.Name(dir) + ".scope"
	p := unitProperties(t, env, unit, "LoadState", "ActiveState", "Slice", "ControlGroup", "CollectMode")
	if p["LoadState"] != "loaded" || p["ActiveState"] != "active" || p["Slice"] != slice || p["CollectMode"] != "inactive-or-failed" {
		t.Fatalf("scope unit %s of %s: %v; want loaded, active, in %s, CollectMode inactive-or-failed", unit, dir, p, slice)
	}
	status, _ := nodeTry(env, "systemctl", "status", "--no-pager", "--lines=0", unit)
	if np := nodePID(t, daemon); !strings.Contains(status, fmt.Sprintf("─%d ", np)) {
		t.Fatalf("systemctl status %s does not list the FUSE daemon (pid %d on the node, %d here):\n%s", unit, np, daemon, status)
	}
	for hier, path := range procCgroups(t, daemon) {
		if (hier == "" || hier == "name=systemd") && !strings.HasSuffix(path, p["ControlGroup"]) {
			t.Fatalf("the FUSE daemon %d is in %s:%s, not in its unit's cgroup %s", daemon, hier, path, p["ControlGroup"])
		}
	}
	t.Logf("systemd node: the FUSE daemon of %s runs in scope unit %s:\n%s", dir, unit, status)
	return unit
}

// nodeScopeUnits lists the node's mount scope units (mount-*.scope) that
// systemd still knows, loaded in any state; none on the default bed.
func nodeScopeUnits(t *testing.T, env *framework.Env) []string {
	t.Helper()
	if !env.SystemdNode() {
		return nil
	}
	out := nodeRun(t, env, "systemctl", "list-units", "--all", "--plain", "--no-legend", "--type=scope", "mount-*.scope")
	var units []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			units = append(units, f[0])
		}
	}
	return units
}
