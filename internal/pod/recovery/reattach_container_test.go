package recovery

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// TestReattachInAContainer runs [Reattach] end to end, nsenter and the
// child included (this test binary stands in for mountpod, see TestMain),
// on a process in a mount namespace of its own that holds binds of the
// "dead" mount: the volume at data, a subPath of it read-only at conf.
// Both get the new mount. Then the next mount's subPath is a symbolic link
// out of the volume: conf is refused, named in the error, and keeps what
// it had; data is attached.
func TestReattachInAContainer(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("no util-linux nsenter")
	}
	base := mountfdtest.Base(t)
	old, vol, next := filepath.Join(base, "old"), filepath.Join(base, "new"), filepath.Join(base, "next")
	for _, dir := range []string{old, vol, next} {
		mountfdtest.MountTmpfs(t, dir)
	}
	mkdir(t, filepath.Join(old, "sub"), filepath.Join(vol, "sub"), filepath.Join(base, "node"))
	writeFile(t, filepath.Join(vol, "top"), "volume")
	writeFile(t, filepath.Join(vol, "sub", "ok"), "volume")
	writeFile(t, filepath.Join(base, "node", "secret"), "node")
	symlink(t, filepath.Join(base, "node"), filepath.Join(next, "sub"))
	data, conf := filepath.Join(base, "ctr", "data"), filepath.Join(base, "ctr", "conf")
	mkdir(t, data, conf)
	// The container sees the volume at data and conf only, as a pod does.
	pid := startContainer(t, fmt.Sprintf("mount --bind %[1]s %[2]s\nmount --bind %[1]s/sub %[3]s\nmount -o remount,bind,ro %[3]s\numount -l %[1]s %[4]s %[5]s",
		old, data, conf, vol, next))

	_, oldDev := statPath(t, old)
	done, err := Reattach(context.Background(), "/proc", DeadMount{Mounts: []Identity{tmpfsOf(oldDev)}, Target: old}, vol)
	if err != nil || len(done) != 2 {
		t.Fatalf("reattach: %v, %v; want data and conf", done, err)
	}
	_, volDev := statPath(t, vol)
	mounts := containerMounts(t, pid)
	if m := mounts[data]; m.Root != "/" || (Device{m.Major, m.Minor}) != volDev {
		t.Errorf("data: %+v; want the new mount %s at /", m, volDev)
	}
	if m := mounts[conf]; m.Root != "/sub" || (Device{m.Major, m.Minor}) != volDev || !readOnly(m.MountOptions) {
		t.Errorf("conf: %+v; want the new mount %s at /sub, read-only", m, volDev)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "root", conf, "ok")); err != nil {
		t.Errorf("conf does not show the subPath's file: %v", err)
	}

	done, err = Reattach(context.Background(), "/proc", DeadMount{Mounts: []Identity{tmpfsOf(volDev)}, Target: vol}, next)
	if !errors.Is(err, mountfd.ErrNotInVolume) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d: %s (root /sub)", pid, conf)) {
		t.Errorf("reattach with a symbolic link for a subPath: %v; want conf refused, named", err)
	}
	t.Logf("error: %v", err)
	if len(done) != 1 || done[0].MountPoint != data {
		t.Errorf("attached %v; want data alone", done)
	}
	if m := containerMounts(t, pid)[conf]; (Device{m.Major, m.Minor}) != volDev {
		t.Errorf("conf: %+v; want the mount it had, %s", m, volDev)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "root", conf, "secret")); err == nil {
		t.Errorf("conf shows the node's directory")
	}
}

// tmpfsOf returns the identity of a tmpfs that mountTmpfs mounted, whose
// device is dev.
func tmpfsOf(dev Device) Identity {
	return Identity{Device: dev, FSType: "tmpfs", Source: "tmpfs"}
}

// startContainer runs script in a new private mount namespace, then keeps
// that namespace with a process, whose PID it returns, until the test ends.
func startContainer(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		"sh", "-ec", script+"\necho ready\nexec sleep 600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the container did not start: %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// containerMounts returns pid's mounts by mount point (the last one of
// each).
func containerMounts(t *testing.T, pid int) map[string]mount.MountInfo {
	t.Helper()
	infos, err := mount.ParseMountInfo(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]mount.MountInfo{}
	for _, mi := range infos {
		m[mi.MountPoint] = mi
	}
	return m
}
