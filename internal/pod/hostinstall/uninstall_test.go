package hostinstall

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// fakeNode is a node's tree under a temporary root, as the mount pods and
// CSI node plugins leave it: the Flexvolume driver (with a log file), the
// shim with a link and a tool of someone else's, a registration with its
// exec socket and a mount record, a CSI driver's socket, secrets, exec
// batches and the FUSE daemons' logs.
type fakeNode struct {
	root string
	u    Uninstall
	// sock is the mount pod's exec socket, on the node.
	sock string
}

func newFakeNode(t *testing.T) *fakeNode {
	t.Helper()
	needRoot(t)
	// Short: the sockets' paths must fit in sun_path.
	root, err := os.MkdirTemp("", "node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	n := &fakeNode{root: root, u: Uninstall{
		HostRoot: root, Mountinfo: filepath.Join(root, "mountinfo"),
		Plugins:         []string{"kubernetes.io/glusterfs", "kubernetes.io/cephfs"},
		RegistrationDir: "/var/lib/kubelet/plugin-containers",
		FlexvolumeDir:   "/usr/libexec/kubernetes/kubelet-plugins/volume/exec", FlexvolumeDrivers: DefaultDrivers,
		ShimDir: DefaultShimDir, RunDir: DefaultRunDir, LogDirs: []string{DefaultLogDir},
		KubeletDir: DefaultKubelet, CSIDrivers: DefaultCSIDrivers,
	}}
	bin := t.TempDir()
	for _, f := range []string{"flexvolume-driver", shim.BinaryName, shim.HelperName} {
		n.write(t, filepath.Join(bin, f), "#!/bin/sh\n")
	}
	c := Config{
		FlexvolumeDir: n.at(n.u.FlexvolumeDir), FlexvolumeSource: filepath.Join(bin, "flexvolume-driver"),
		FlexvolumeLogFile: "/var/log/flexvolume-glusterfs.log",
		ShimDir:           n.at(DefaultShimDir), ShimSource: filepath.Join(bin, shim.BinaryName),
	}
	if err := c.Install([]string{"kubernetes.io/glusterfs"}, n.u.RegistrationDir, nil); err != nil {
		t.Fatal(err)
	}
	n.write(t, n.at("/var/log/flexvolume-glusterfs.log"), "{}\n")
	n.write(t, n.at(DefaultShimDir, "someone-elses-tool"), "#!/bin/sh\n")
	regDir := n.at(n.u.RegistrationDir)
	reg := registration.Registration{PodNamespace: "mountcontainers", PodName: "glusterfs-mountpod-x", PodUID: "6d1f4d2e-0000-4000-8000-000000000001", ContainerName: "mount", ExecSocket: ".exec/6d1f4d2e-0000-4000-8000-000000000001.sock"}
	if err := registration.Write(regDir, "kubernetes.io/glusterfs", reg); err != nil {
		t.Fatal(err)
	}
	n.sock = filepath.Join(n.u.RegistrationDir, reg.ExecSocket)
	n.staleSocket(t, n.sock)
	if err := mountrecord.Write(filepath.Join(regDir, mountrecord.Dir), mountrecord.Record{Version: mountrecord.Version, Plugin: "kubernetes.io/glusterfs", Source: "server:/gv0", Target: "/var/lib/kubelet/pods/6d1f4d2e-0000-4000-8000-000000000002/volumes/mountcontainers.io~glusterfs/data", FSType: "glusterfs"}); err != nil {
		t.Fatal(err)
	}
	n.staleSocket(t, "/var/lib/kubelet/plugins/glusterfs.mountcontainers.io/csi.sock")
	n.write(t, n.at(DefaultRunDir, "secrets", "key-0123"), "AQB...")
	n.write(t, n.at(DefaultRunDir, "exec-batch", "c1", "req"), "")
	n.write(t, n.at(DefaultLogDir, "glusterfs", "data.log"), "log\n")
	n.write(t, n.at("/var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared/0123abcd.lock"), "")
	n.write(t, n.u.Mountinfo, "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n")
	return n
}

// needRoot skips a test that needs root on a developer's machine, and
// fails it in CI, where a skip would hide it (.ci/run runs as root).
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the uninstall trusts only root's files: its tests run as root, and CI runs them so")
	}
	t.Skip("the uninstall trusts only root's files: run as root")
}

// at returns node path p (joined from parts) in the fake tree.
func (n *fakeNode) at(parts ...string) string {
	return filepath.Join(append([]string{n.root}, parts...)...)
}

func (n *fakeNode) write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// staleSocket leaves a socket at node path p that nobody serves.
func (n *fakeNode) staleSocket(t *testing.T, p string) {
	t.Helper()
	l := n.listen(t, p)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}

func (n *fakeNode) listen(t *testing.T, p string) net.Listener {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(n.at(p)), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", n.at(p))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (n *fakeNode) exists(p string) bool {
	_, err := os.Lstat(n.at(p))
	return err == nil
}

// ours are the node paths the uninstall removes.
var ours = []string{
	"/usr/libexec/kubernetes/kubelet-plugins/volume/exec/mountcontainers.io~glusterfs",
	"/var/log/flexvolume-glusterfs.log",
	"/opt/mountcontainers/bin/" + shim.BinaryName, "/opt/mountcontainers/bin/" + shim.HelperName,
	"/opt/mountcontainers/bin/" + shim.MappingFile, "/opt/mountcontainers/bin/mount.glusterfs",
	"/var/lib/kubelet/plugin-containers/kubernetes.io~glusterfs.json",
	"/var/lib/kubelet/plugin-containers/.exec", "/var/lib/kubelet/plugin-containers/.mounts",
	"/var/lib/kubelet/plugins/glusterfs.mountcontainers.io",
	"/var/lib/kubelet/plugins/mountcontainers.io~glusterfs",
	DefaultRunDir, DefaultLogDir,
}

func TestUninstall(t *testing.T) {
	n := newFakeNode(t)
	for _, p := range ours {
		if !n.exists(p) {
			t.Fatalf("the fake node has no %s", p)
		}
	}
	// Another product's registration and mount record, in the same
	// directory.
	regDir := n.at(n.u.RegistrationDir)
	other := registration.Registration{PodNamespace: "other", PodName: "other-x", PodUID: "6d1f4d2e-0000-4000-8000-000000000009", ContainerName: "c"}
	if err := registration.Write(regDir, "example.com/other", other); err != nil {
		t.Fatal(err)
	}
	otherRecord := mountrecord.Record{Version: mountrecord.Version, Plugin: "example.com/other", Source: "server:/v", Target: "/var/lib/kubelet/pods/6d1f4d2e-0000-4000-8000-000000000003/volumes/example.com~other/data", FSType: "glusterfs"}
	if err := mountrecord.Write(filepath.Join(regDir, mountrecord.Dir), otherRecord); err != nil {
		t.Fatal(err)
	}
	if err := n.u.Run(nil); err != nil {
		t.Fatal(err)
	}
	// The directories every plugin shares stay while another is
	// registered.
	shared := []string{DefaultRunDir, DefaultLogDir}
	for _, p := range ours {
		if n.exists(p) != (slices.Contains(shared, p) || p == "/var/lib/kubelet/plugin-containers/.mounts") {
			t.Errorf("%s: exists %v", p, n.exists(p))
		}
	}
	// What is not ours stays, and the directories holding it.
	for _, p := range []string{"/opt/mountcontainers/bin/someone-elses-tool", "/var/lib/kubelet/plugin-containers/example.com~other.json",
		"/var/lib/kubelet/plugin-containers/.mounts/" + mountrecord.FileName(otherRecord.Target),
		"/usr/libexec/kubernetes/kubelet-plugins/volume/exec", "/var/lib/kubelet/plugins", "/var/log"} {
		if !n.exists(p) {
			t.Errorf("%s removed", p)
		}
	}
	// Once nothing else is in them, the shim's and the registrations'
	// directories go too.
	for _, p := range []string{"/opt/mountcontainers/bin/someone-elses-tool", "/var/lib/kubelet/plugin-containers/example.com~other.json",
		"/var/lib/kubelet/plugin-containers/.mounts/" + mountrecord.FileName(otherRecord.Target)} {
		if err := os.Remove(n.at(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.u.Run(nil); err != nil {
		t.Fatalf("again: %v", err)
	}
	for _, p := range append([]string{"/opt/mountcontainers", "/var/lib/kubelet/plugin-containers"}, shared...) {
		if n.exists(p) {
			t.Errorf("%s left once empty", p)
		}
	}
	if !n.exists("/opt") || !n.exists("/var/lib/kubelet") {
		t.Error("a directory above ours removed")
	}
}

// TestUninstallInUse: a mount pod that answers, a CSI node plugin that
// answers, a mount of the drivers: refused, nothing removed, each named.
func TestUninstallInUse(t *testing.T) {
	for _, c := range []struct {
		name string
		use  func(t *testing.T, n *fakeNode)
		want string
	}{
		{"mount pod", func(t *testing.T, n *fakeNode) {
			os.Remove(n.at(n.sock))
			l := n.listen(t, n.sock)
			t.Cleanup(func() { l.Close() })
		}, "mount pod mountcontainers/glusterfs-mountpod-x"},
		{"CSI node plugin", func(t *testing.T, n *fakeNode) {
			p := "/var/lib/kubelet/plugins/glusterfs.mountcontainers.io/csi.sock"
			os.Remove(n.at(p))
			l := n.listen(t, p)
			t.Cleanup(func() { l.Close() })
		}, "CSI node plugin of glusterfs.mountcontainers.io"},
		{"FUSE mount", func(t *testing.T, n *fakeNode) {
			n.write(t, n.u.Mountinfo, "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"+
				`50 1 0:50 / /var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount rw - fuse.glusterfs server:/gv0 rw`+"\n")
		}, "mount /var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount (fuse.glusterfs from server:/gv0)"},
		{"rbd image mapped", func(t *testing.T, n *fakeNode) {
			n.u.Plugins = append(n.u.Plugins, "kubernetes.io/rbd")
			if err := os.MkdirAll(n.at("/sys/bus/rbd/devices/0"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "rbd images are mapped (/sys/bus/rbd/devices: 0)"},
		{"in-tree rbd mount", func(t *testing.T, n *fakeNode) {
			n.u.Plugins = append(n.u.Plugins, "kubernetes.io/rbd")
			n.write(t, n.u.Mountinfo, "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"+
				`50 1 252:0 / /var/lib/kubelet/plugins/kubernetes.io/rbd/mounts/rbd-image-x rw - ext4 /dev/rbd0 rw`+"\n")
		}, "mount /var/lib/kubelet/plugins/kubernetes.io/rbd/mounts/rbd-image-x (ext4 from /dev/rbd0)"},
		{"Flexvolume mount", func(t *testing.T, n *fakeNode) {
			n.write(t, n.u.Mountinfo, "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"+
				`50 1 0:50 / /var/lib/kubelet/pods/x/volumes/mountcontainers.io~cephfs/data rw - fuse.ceph-fuse ceph-fuse rw`+"\n")
		}, "mount /var/lib/kubelet/pods/x/volumes/mountcontainers.io~cephfs/data"},
		{"a node's shared mount, not FUSE", func(t *testing.T, n *fakeNode) {
			n.write(t, n.u.Mountinfo, "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"+
				`50 1 0:50 / /var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared/0123abcd rw - nfs4 server:/x rw`+"\n")
		}, "mount /var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared/0123abcd (nfs4 from server:/x)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newFakeNode(t)
			c.use(t, n)
			err := n.u.Run(nil)
			var live *Live
			if !errors.As(err, &live) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was removed") {
				t.Fatalf("Run = %v; want a refusal naming %q", err, c.want)
			}
			for _, p := range ours {
				if !n.exists(p) {
					t.Errorf("refused uninstall removed %s", p)
				}
			}
		})
	}
}

// TestUninstallScopesFirst: a process in a cgroup below a plugin's parent
// that is not a mount's scope (the in-use check lists scopes only) stops
// the uninstall before any file is removed.
func TestUninstallScopesFirst(t *testing.T) {
	n := newFakeNode(t)
	cg := t.TempDir()
	n.write(t, filepath.Join(cg, "cgroup.controllers"), "cpu memory pids\n")
	n.write(t, filepath.Join(cg, "cgroup.procs"), "1\n")
	n.write(t, filepath.Join(cg, "cgroup.subtree_control"), "")
	n.write(t, filepath.Join(cg, "mountcontainers/kubernetes.io~glusterfs/not-a-scope/cgroup.procs"), "42\n")
	m, err := scope.New(scope.Config{Backend: scope.BackendCgroupfs, CgroupRoot: cg, CgroupNS: scope.CgroupNSOff})
	if err != nil {
		t.Fatal(err)
	}
	n.u.Scopes = m
	err = n.u.Run(nil)
	if !errors.Is(err, scope.ErrPopulated) || !strings.Contains(err.Error(), "no file was removed") {
		t.Fatalf("Run = %v; want the plugin's populated cgroup refused before any file", err)
	}
	for _, p := range ours {
		if !n.exists(p) {
			t.Errorf("%s removed", p)
		}
	}
}

// TestUninstallShimLinks: a tool link that does not lead to the shim, and
// the shim while another plugin's tool links to it, stay.
func TestUninstallShimLinks(t *testing.T) {
	n := newFakeNode(t)
	bin := n.at(DefaultShimDir)
	n.u.Plugins = []string{"kubernetes.io/cephfs"} // mount.glusterfs is another plugin's tool
	if err := n.u.Run(nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"mount.glusterfs", shim.BinaryName, shim.HelperName, shim.MappingFile} {
		if !n.exists(filepath.Join(DefaultShimDir, f)) {
			t.Errorf("%s removed", f)
		}
	}
	if err := os.Remove(filepath.Join(bin, "mount.glusterfs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/sbin/mount.glusterfs.real", filepath.Join(bin, "mount.glusterfs")); err != nil {
		t.Fatal(err)
	}
	n.u.Plugins = []string{"kubernetes.io/glusterfs"}
	if err := n.u.Run(nil); err != nil {
		t.Fatal(err)
	}
	if !n.exists(filepath.Join(DefaultShimDir, "mount.glusterfs")) {
		t.Error("a link to another program removed")
	}
	if n.exists(filepath.Join(DefaultShimDir, shim.BinaryName)) {
		t.Error("the shim left with no tool of another plugin")
	}
}

// TestUninstallWaits: a mount pod that goes within the wait is waited
// for.
func TestUninstallWaits(t *testing.T) {
	n := newFakeNode(t)
	os.Remove(n.at(n.sock))
	l := n.listen(t, n.sock)
	go func() {
		time.Sleep(300 * time.Millisecond)
		l.Close()
	}()
	n.u.Wait = time.Minute
	if err := n.u.Run(nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range ours {
		if n.exists(p) {
			t.Errorf("%s left", p)
		}
	}
}

// TestUninstallHostile: what a writer of a directory the uninstall
// empties can plant there is removed itself, never followed, and a mount
// in it stops the removal.
func TestUninstallHostile(t *testing.T) {
	t.Run("symbolic link in a directory removed", func(t *testing.T) {
		n := newFakeNode(t)
		outside := filepath.Join(t.TempDir(), "precious")
		n.write(t, filepath.Join(outside, "file"), "keep")
		if err := os.Symlink(outside, n.at(DefaultLogDir, "glusterfs", "link")); err != nil {
			t.Fatal(err)
		}
		if err := n.u.Run(nil); err != nil {
			t.Fatal(err)
		}
		if n.exists(DefaultLogDir) {
			t.Error("log directory left")
		}
		if _, err := os.Stat(filepath.Join(outside, "file")); err != nil {
			t.Errorf("the link's target was followed: %v", err)
		}
	})
	t.Run("symbolic link as a directory removed", func(t *testing.T) {
		n := newFakeNode(t)
		outside := filepath.Join(t.TempDir(), "precious")
		n.write(t, filepath.Join(outside, "file"), "keep")
		if err := os.RemoveAll(n.at(DefaultLogDir)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, n.at(DefaultLogDir)); err != nil {
			t.Fatal(err)
		}
		if err := n.u.Run(nil); err != nil {
			t.Fatal(err)
		}
		if n.exists(DefaultLogDir) {
			t.Error("the link left")
		}
		if _, err := os.Stat(filepath.Join(outside, "file")); err != nil {
			t.Errorf("the link's target was followed: %v", err)
		}
	})
	t.Run("symbolic link on the path", func(t *testing.T) {
		n := newFakeNode(t)
		outside := filepath.Join(t.TempDir(), "precious")
		n.write(t, filepath.Join(outside, "mountcontainers", "file"), "keep")
		if err := os.RemoveAll(n.at("/var/log")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, n.at("/var/log")); err != nil {
			t.Fatal(err)
		}
		err := n.u.Run(nil)
		if err == nil || !strings.Contains(err.Error(), "/var/log: a symbolic link on the path: refused") {
			t.Fatalf("Run = %v; want the link on /var/log refused", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "mountcontainers", "file")); err != nil {
			t.Errorf("the link was followed: %v", err)
		}
	})
	t.Run("FIFO as the driver's settings", func(t *testing.T) {
		n := newFakeNode(t)
		settings := n.at(n.u.FlexvolumeDir, "mountcontainers.io~glusterfs", "glusterfs.json")
		if err := os.Remove(settings); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(settings, 0o644); err != nil {
			t.Fatal(err)
		}
		err := n.u.Run(nil)
		if err == nil || !strings.Contains(err.Error(), "is a FIFO, not a regular file: refused") {
			t.Fatalf("Run = %v; want the FIFO refused", err)
		}
		if n.exists(filepath.Join(n.u.FlexvolumeDir, "mountcontainers.io~glusterfs")) {
			t.Error("the driver's directory left")
		}
	})
	t.Run("mount point in a directory removed", func(t *testing.T) {
		n := newFakeNode(t)
		mnt := n.at(DefaultRunDir, "secrets", "mnt")
		if err := os.Mkdir(mnt, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, ""); err != nil {
			t.Fatalf("mount a tmpfs: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
		n.write(t, filepath.Join(mnt, "file"), "keep")
		err := n.u.Run(nil)
		if err == nil || !strings.Contains(err.Error(), DefaultRunDir+"/secrets/mnt is a mount point: refused") {
			t.Fatalf("Run = %v; want the mount point refused", err)
		}
		if _, err := os.Stat(filepath.Join(mnt, "file")); err != nil {
			t.Errorf("a file of the mount removed: %v", err)
		}
		if n.exists(DefaultLogDir) {
			t.Error("the rest was not removed")
		}
	})
	t.Run("mount point in the node's table only", func(t *testing.T) {
		// A pod's copy of the node's / lacks the mounts made after it
		// started: the node's mount table still names them.
		n := newFakeNode(t)
		n.write(t, n.at(DefaultLogDir, "glusterfs", "mnt", "file"), "keep")
		n.write(t, n.u.Mountinfo, "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n60 1 0:60 / "+DefaultLogDir+"/glusterfs/mnt rw - tmpfs tmpfs rw\n")
		err := n.u.Run(nil)
		if err == nil || !strings.Contains(err.Error(), DefaultLogDir+"/glusterfs/mnt is a mount point: refused") {
			t.Fatalf("Run = %v; want the mount point refused", err)
		}
		if !n.exists(DefaultLogDir + "/glusterfs/mnt/file") {
			t.Error("a file beneath the mount point removed")
		}
		if n.exists(DefaultRunDir) {
			t.Error("the rest was not removed")
		}
	})
	t.Run("bad paths", func(t *testing.T) {
		n := newFakeNode(t)
		n.u.LogDirs = []string{"var/log/x"}
		n.u.RunDir = "/run/../etc"
		n.u.FlexvolumeDrivers = []string{"../x"}
		err := n.u.Run(nil)
		for _, want := range []string{`"var/log/x" is not a clean absolute path`, `"/run/../etc" is not a clean absolute path`, "../x"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Run = %v; want it to name %s", err, want)
			}
		}
		for _, p := range ours {
			if !n.exists(p) {
				t.Errorf("refused uninstall removed %s", p)
			}
		}
	})
}
