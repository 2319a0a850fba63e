//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

// nodeFiles are what the mount pods and CSI node plugins of the file
// systems fss (glusterfs, cephfs) leave on the bed's (first) node and
// `mountpod uninstall` removes, with the bed's paths (test/demo/manifests.sh's
// uninstall overlay): the Flexvolume drivers, kubelet-exec-shim
// (glusterfs), the registrations, the CSI drivers' sockets, the clients'
// logs and the plugins' scopes parents in every cgroup hierarchy. present
// are those that must be there once a volume was mounted (the proof that
// their absence afterwards means something).
func nodeFiles(t *testing.T, bed *framework.Bed, fss ...string) (all, present []string) {
	t.Helper()
	n := bed.Env.Nodes[0]
	parent := bed.Env.Vars["BED_SCOPE_PARENT"]
	if parent == "" {
		t.Fatal("the bed's env file has no BED_SCOPE_PARENT")
	}
	logs := map[string]string{"glusterfs": "glusterfs-client", "cephfs": "ceph-client"}
	for _, fs := range fss {
		present = append(present,
			filepath.Join(n.VolumePluginDir, "mountcontainers.io~"+fs),
			filepath.Join(n.RegistrationDir, "kubernetes.io~"+fs+".json"),
			filepath.Join(n.KubeletRoot, "plugins", fs+".mountcontainers.io"),
			filepath.Join(bed.Env.BedDir, "logs", logs[fs]),
		)
		if fs == "glusterfs" {
			present = append(present, filepath.Join(n.ShimDir, "kubelet-exec-shim"))
		}
		scopes, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent + "/kubernetes.io~" + fs)
		if v2, err := filepath.Glob("/sys/fs/cgroup/" + parent + "/kubernetes.io~" + fs); err == nil {
			scopes = append(scopes, v2...)
		}
		if len(scopes) == 0 && !bed.Env.SystemdNode() {
			t.Errorf("no scopes parent of kubernetes.io/%s under /sys/fs/cgroup (parent %s) after a mount", fs, parent)
		}
		all = append(all, scopes...)
		// The Flexvolume driver's shared mounts' directory, when a pod's
		// volume was shared.
		all = append(all, filepath.Join(n.KubeletRoot, "plugins", "mountcontainers.io~"+fs))
	}
	all = append(all, present...)
	all = append(all, filepath.Join(n.RegistrationDir, ".mounts"), filepath.Join(n.RegistrationDir, ".exec"), "/run/mountcontainers")
	for _, p := range present {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("before the uninstall: %v", err)
		}
	}
	return all, present
}

// checkNodeClean fails for each of paths still on the node.
func checkNodeClean(t *testing.T, paths []string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("left on the node after the uninstall: %s", p)
		}
	}
}

// uninstallLog returns the log of the uninstall's init container on the
// first node, for the test's log.
func uninstallLog(t *testing.T, bed *framework.Bed) string {
	t.Helper()
	pods := bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/name=mountcontainers-uninstall", 1, true, 5*time.Minute)
	return strings.TrimSpace(bed.Kubectl(t, "-n", mountpodNS, "logs", pods[0].Name, "-c", "uninstall"))
}
