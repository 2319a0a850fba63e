//go:build e2e && e2e_systemd

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestSystemdNode runs on the systemd bed (BED_FLAVOR=systemd, make
// e2e-systemd; test/bed/systemd-node.sh), beside TestScopes and
// TestRecovery, whose helpers read the node through its PID 1 there and
// check every FUSE daemon's transient scope unit (assertScopeUnit). It
// proves the node is the layout it stands for (systemd as PID 1, the
// kubelet and containerd as its services, both on the systemd cgroup
// driver, pods under kubepods.slice, hybrid cgroups), then mounts a
// GlusterFS volume through the mount pod on each exec path (the driver's
// log names the path) with the FUSE daemon in a transient scope unit of
// the node's systemd under the slice docs/scopes.md names, and ends with
// no scope unit, slice or cgroup of the mounts left once the volumes, the
// mount pod and (the node's uninstall, deploy/uninstall) the plugins'
// slices are gone.
func TestSystemdNode(t *testing.T) {
	bed := framework.Current(t)
	env := bed.Env
	if !env.SystemdNode() {
		t.Fatalf("the bed's node does not run systemd (BED_FLAVOR=%s): run make e2e-systemd", env.Flavor())
	}
	parent := env.Vars["BED_SCOPE_PARENT"]
	nodeCgroup := env.Vars["NODE_1_CGROUP"]
	if parent == "" || nodeCgroup == "" {
		t.Fatal("the bed's env file lacks BED_SCOPE_PARENT or NODE_1_CGROUP: an older up.sh")
	}

	t.Run("Layout", func(t *testing.T) {
		if state := strings.TrimSpace(nodeRun(t, env, "systemctl", "is-system-running")); state != "running" {
			failed, _ := nodeTry(env, "systemctl", "--failed", "--no-pager")
			t.Fatalf("the node's systemd is %q, want running:\n%s", state, failed)
		}
		for _, unit := range []string{"kubelet.service", "containerd.service"} {
			p := unitProperties(t, env, unit, "ActiveState", "SubState", "ControlGroup")
			if p["ActiveState"] != "active" || p["SubState"] != "running" || p["ControlGroup"] != "/system.slice/"+unit {
				t.Errorf("%s on the node: %v; want active, running, in /system.slice/%s", unit, p, unit)
			}
		}
		var configz struct {
			KubeletConfig struct {
				CgroupDriver string `json:"cgroupDriver"`
			} `json:"kubeletconfig"`
		}
		raw := bed.Kubectl(t, "get", "--raw", "/api/v1/nodes/"+env.NodeName+"/proxy/configz")
		if err := json.Unmarshal([]byte(raw), &configz); err != nil || configz.KubeletConfig.CgroupDriver != "systemd" {
			t.Errorf("the kubelet's cgroupDriver is %q (%v), want systemd", configz.KubeletConfig.CgroupDriver, err)
		}
		// Hybrid: the v1 controllers and the unified hierarchy, in which
		// systemd tracks its units.
		mounts := nodeRun(t, env, "findmnt", "-rn", "-o", "TARGET,FSTYPE", "-R", "/sys/fs/cgroup")
		for _, want := range []string{"/sys/fs/cgroup/unified cgroup2", "/sys/fs/cgroup/memory cgroup", "/sys/fs/cgroup/systemd cgroup"} {
			if !strings.Contains(mounts, want+"\n") {
				t.Errorf("the node's cgroup mounts lack %q:\n%s", want, mounts)
			}
		}
		t.Logf("node %s: PID 1 systemd (%s here), kubelet.service and containerd.service running, cgroupDriver systemd, cgroups:\n%s",
			env.NodeName, env.Vars["NODE_1_INIT_PID"], mounts)
	})

	g := setupGlusterfs(t, bed)

	t.Run("PodsUnderKubepodsSlice", func(t *testing.T) {
		mp := g.mountPod(t)
		pid := podProcess(t, mp.UID, "mountpod", "serve")
		for hier, path := range procCgroups(t, pid) {
			if (hier == "" || hier == "name=systemd" || hier == "memory") &&
				(!strings.Contains(path, "/kubepods.slice/") || !strings.Contains(path, "/cri-containerd-")) {
				t.Errorf("the mount pod's process %d is in %s:%s, not in a cri-containerd scope under kubepods.slice", pid, hier, path)
			}
		}
	})

	t.Run("MountsInScopeUnits", func(t *testing.T) {
		for _, mode := range execModes {
			// testWorkload asserts the daemon's unit (assertScopeUnit),
			// the path in the driver's log, and the unmount.
			t.Run(string(mode), func(t *testing.T) { g.testWorkload(t, mode) })
		}
	})

	t.Run("NothingLeft", func(t *testing.T) {
		if units := nodeScopeUnits(t, env); len(units) != 0 {
			t.Fatalf("scope units left on the node with no volume mounted: %v", units)
		}
		if dirs := scopeDirs(t, parent); len(dirs) != 0 {
			t.Fatalf("scope cgroups left with no volume mounted: %v", dirs)
		}
		// The plugin's slice holds its limits and stays, empty, until
		// the plugins are uninstalled: the mount pod first, then the
		// slices stopped (docs/scopes.md).
		slice, err := scope.SliceName(parent, "kubernetes.io/glusterfs")
		if err != nil {
			t.Fatal(err)
		}
		if p := unitProperties(t, env, slice, "ActiveState", "TasksCurrent"); p["ActiveState"] != "active" || p["TasksCurrent"] != "0" {
			t.Errorf("the plugin's slice %s: %v; want active and empty", slice, p)
		}
		bed.Kubectl(t, "delete", "--wait", "--timeout=2m", "-k", filepath.Join(g.out, "mountpod"))
		top, _ := strings.CutSuffix(strings.SplitN(slice, "-", 2)[0], ".slice")
		// The node's uninstall (deploy/uninstall, with the bed's paths):
		// `mountpod uninstall` stops the plugins' slices through systemd.
		uninstall := filepath.Join(g.out, "uninstall")
		bed.ApplyKustomize(t, uninstall)
		t.Logf("the uninstall:\n%s", uninstallLog(t, bed))
		bed.DeleteKustomize(t, uninstall, 2*time.Minute)
		// (Unit names hold "\x2d": no glob patterns here, which would
		// take the backslash as an escape.)
		for _, line := range strings.Split(nodeRun(t, env, "systemctl", "list-units", "--all", "--plain", "--no-legend"), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], top) {
				t.Errorf("unit left after the uninstall: %s", line)
			}
		}
		hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/" + nodeCgroup)
		for _, h := range hierarchies {
			for _, c := range []string{filepath.Join(h, top+".slice"), filepath.Join(h, "payload", top+".slice")} {
				if _, err := os.Stat(c); err == nil {
					t.Errorf("cgroup left after the uninstall: %s", c)
				}
			}
		}
	})
}

// TestSystemdCephFS is TestCephFS's proofs that depend on the node's
// layout, on the systemd node: a CephFS volume mounted through the cephfs
// mount pod on each exec path (ceph-fuse in a transient scope unit, its key
// on the node's tmpfs), its ceph-fuse outliving the mount pod, and a
// killed ceph-fuse made again inside the running workload.
func TestSystemdCephFS(t *testing.T) {
	bed := framework.Current(t)
	if !bed.Env.SystemdNode() {
		t.Fatalf("the bed's node does not run systemd (BED_FLAVOR=%s): run make e2e-systemd", bed.Env.Flavor())
	}
	c := setupCephFS(t, bed)
	t.Run("WorkloadAndSecondClient", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { c.testWorkload(t, mode) })
		}
	})
	t.Run("ScopedDaemonOutlivesMountPod", c.testOutlivesMountPod)
	t.Run("KilledDaemonComesBack", c.testRecovery)
}
