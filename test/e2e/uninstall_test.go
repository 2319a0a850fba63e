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

// nodeFiles are what the glusterfs mount pod and CSI node plugin leave on
// the bed's (first) node and `mountpod uninstall` removes, with the bed's
// paths (test/demo/manifests.sh's uninstall overlay): the Flexvolume
// driver, kubelet-exec-shim, the registration, the CSI driver's sockets,
// the glusterfs client's logs and the plugin's scopes parent in every
// cgroup hierarchy. present are those that must be there once a volume
// was mounted (the proof that their absence afterwards means something).
func nodeFiles(t *testing.T, bed *framework.Bed) (all, present []string) {
	t.Helper()
	n := bed.Env.Nodes[0]
	parent := bed.Env.Vars["BED_SCOPE_PARENT"]
	if parent == "" {
		t.Fatal("the bed's env file has no BED_SCOPE_PARENT")
	}
	present = []string{
		filepath.Join(n.VolumePluginDir, "mountcontainers.io~glusterfs"),
		filepath.Join(n.ShimDir, "kubelet-exec-shim"),
		filepath.Join(n.RegistrationDir, "kubernetes.io~glusterfs.json"),
		filepath.Join(n.KubeletRoot, "plugins", "glusterfs.mountcontainers.io"),
		filepath.Join(bed.Env.BedDir, "logs", "glusterfs-client"),
	}
	all = append(present, filepath.Join(n.RegistrationDir, ".mounts"), filepath.Join(n.RegistrationDir, ".exec"), "/run/mountcontainers")
	scopes, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent + "/kubernetes.io~glusterfs")
	if v2, err := filepath.Glob("/sys/fs/cgroup/" + parent + "/kubernetes.io~glusterfs"); err == nil {
		scopes = append(scopes, v2...)
	}
	if len(scopes) == 0 && !bed.Env.SystemdNode() {
		t.Errorf("no scopes parent of kubernetes.io/glusterfs under /sys/fs/cgroup (parent %s) after a mount", parent)
	}
	all = append(all, scopes...)
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
