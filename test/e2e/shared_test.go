//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// testSharedMounts proves the driver's shared mounts (SharedMounts) on the
// path of mode: two pods of one volume get binds of one mount of the node,
// made through the mount pod on that path once, served by one FUSE daemon;
// what one writes the other reads; when the daemon dies, the mount pod's
// recovery mounts it again and both pods' /data work again, neither
// restarted, each with an Event naming its volume; the first pod's deletion leaves the node's mount to the
// second, and the second's removes it, its record and its daemon.
func (g *glusterEnv) testSharedMounts(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	mp := g.mountPod(t)
	mountCtr := bed.RunningContainerID(t, mp.UID, "mount", 30*time.Second)
	log := setDriverSettings(t, g.driver, mode, func(s *flexvolume.Settings) { s.SharedMounts = true })

	a := g.startPod(t, "shared-a-"+string(mode), false, sleeper{name: "main", sleep: "infinity", mountPath: "/data"})
	b := g.startPod(t, "shared-b-"+string(mode), false, sleeper{name: "main", sleep: "infinity", mountPath: "/data"})
	dirA, dirB := g.volumeDir(a), g.volumeDir(b)
	root, ok := flexvolume.SharedRoot(dirA)
	if !ok {
		t.Fatalf("no shared mounts' directory for %s", dirA)
	}
	node := sharedMountOf(t, root)
	devA, devB, devNode := hostMountDev(t, dirA), hostMountDev(t, dirB), hostMountDev(t, node)
	if devA != devNode || devB != devNode || hostMount(t, node) != "fuse.glusterfs" {
		t.Fatalf("the pods' volumes are mounts %s and %s, the node's %s (%s): want binds of the node's glusterfs mount", devA, devB, devNode, hostMount(t, node))
	}
	if n := len(fuseProcesses(t, node)); n != 1 {
		t.Fatalf("%d glusterfs processes serve %s, want 1", n, node)
	}
	for _, d := range []string{dirA, dirB} {
		if n := len(fuseProcesses(t, d)); n != 0 {
			t.Fatalf("%d glusterfs processes serve %s, want none: it is a bind", n, d)
		}
	}
	// One mount(8) through the mount pod on mode's path, then a bind.
	// The calls for these two pods: the kubelet may still be retrying
	// the mount of another test's pod, with this test's settings.
	var mounts []driverCall
	for _, c := range driverCalls(t, log, "mount") {
		if c.Dir == dirA || c.Dir == dirB {
			mounts = append(mounts, c)
		}
	}
	if len(mounts) != 2 || !strings.Contains(mounts[0].Message, "via "+string(viaOf(t, mode))) || !strings.Contains(mounts[1].Message, node+" is already mounted") {
		t.Fatalf("driver mounts %+v: want the first through the mount pod via %s, the second a bind of %s alone", mounts, viaOf(t, mode), node)
	}
	t.Logf("two pods, one mount of the node at %s (device %s) through container %.12s via %s, one FUSE daemon", node, devNode, mountCtr, viaOf(t, mode))
	if es, err := mountrecord.List(bed.Env.RegistrationDir + "/" + mountrecord.Dir); err != nil || !hasRecord(es, node) || hasRecord(es, dirA) || hasRecord(es, dirB) {
		t.Fatalf("mount records %+v (%v): want the node's mount's, none of the pods' binds", es, err)
	}
	// The pods are listed beside it, for the recovery's Events.
	if pods, err := mountrecord.ReadPods(node); err != nil || len(pods) != 2 ||
		!slices.ContainsFunc(pods, func(p mountrecord.PodVolume) bool { return p.UID == string(a.UID) && p.Name == a.Name }) ||
		!slices.ContainsFunc(pods, func(p mountrecord.PodVolume) bool { return p.UID == string(b.UID) && p.Name == b.Name }) {
		t.Fatalf("the pods listed beside %s: %+v, %v; want %s and %s", node, pods, err, a.Name, b.Name)
	}
	// The pods' binds are scoped by the node's mount's scope (its daemon
	// serves them): an in-place rollout replaces the mount pod, and
	// counts no mount unscoped.
	for _, d := range []string{node, dirA, dirB} {
		g.assertAdopted(t, d, fuseProcesses(t, node)[0])
	}

	write := func(p string, content string) error {
		_, _, err := bed.Exec(context.Background(), 20*time.Second, g.ns, p, "main", "sh", "-c", `printf '%s' "$1" > /data/shared.txt`, "sh", content)
		return err
	}
	read := func(p string) string {
		out, _, _ := bed.Exec(context.Background(), 20*time.Second, g.ns, p, "main", "cat", "/data/shared.txt")
		return out
	}
	if err := write(a.Name, "from a"); err != nil {
		t.Fatal(err)
	}
	if got := read(b.Name); got != "from a" {
		t.Fatalf("pod b reads %q, want what pod a wrote", got)
	}

	// The daemon dies: one recovery brings both pods' volume back.
	pids := fuseProcesses(t, node)
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var after string
	err := framework.Poll(context.Background(), "both pods' /data back after the daemon's death", 200*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			after = fmt.Sprintf("after %s", time.Since(killed).Round(time.Millisecond))
			if err := write(b.Name, "from b "+after); err != nil {
				return false, "b: " + err.Error(), nil
			}
			got := read(a.Name)
			return got == "from b "+after, fmt.Sprintf("a reads %q", got), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	newDev := hostMountDev(t, node)
	if newDev == devNode || hostMountDev(t, dirA) != newDev || hostMountDev(t, dirB) != newDev {
		t.Fatalf("after the recovery: node %s (was %s), pods %s and %s: want binds of the new mount", newDev, devNode, hostMountDev(t, dirA), hostMountDev(t, dirB))
	}
	for _, d := range []string{node, dirA, dirB} {
		g.assertAdopted(t, d, fuseProcesses(t, node)[0])
	}
	// An Event on each pod, naming its volume, and one on the mount pod.
	for _, p := range []string{a.Name, b.Name} {
		waitPodEvents(t, bed, g.ns, p, recovery.ReasonRecovered, 1, `volume "data" came back`, "files open at the time must be reopened")
	}
	g.waitMountPodEvents(t, mp, recovery.ReasonRecovered, 1, node)
	for _, p := range []string{a.Name, b.Name} {
		got, err := bed.Client.CoreV1().Pods(g.ns).Get(context.Background(), p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := got.Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Fatalf("pod %s restarted %d times", p, n)
		}
	}
	// The binds stay nosuid and nodev, on the node and in the containers:
	// nothing of a writer of the volume runs set-user-ID or opens a device
	// through them after the recovery either.
	for _, p := range []string{a.Name, b.Name} {
		info := bed.MustExec(t, g.ns, p, "main", "cat", "/proc/self/mountinfo")
		opts := ""
		for _, line := range strings.Split(info, "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[4] == "/data" {
				opts = f[5]
			}
		}
		if !strings.Contains(","+opts+",", ",nosuid,") || !strings.Contains(","+opts+",", ",nodev,") {
			t.Fatalf("after the recovery pod %s's /data has the options %q, want nosuid and nodev", p, opts)
		}
	}
	for _, d := range []string{dirA, dirB} {
		if opts := hostMountOptions(t, d); !slices.Contains(opts, "nosuid") || !slices.Contains(opts, "nodev") {
			t.Fatalf("after the recovery the node's %s has the options %q, want nosuid and nodev", d, opts)
		}
	}
	t.Logf("the daemon killed: both pods write and read again %s (the node's mount %s, now device %s), their binds still nosuid and nodev", after, node, newDev)

	// a goes: the node's mount stays for b.
	deletePod(t, g, a.Name, a.UID)
	if got := hostMount(t, dirA); got != "" {
		t.Fatalf("after pod a's deletion %s is still a %s mount", dirA, got)
	}
	if hostMount(t, node) != "fuse.glusterfs" || read(b.Name) != "from b "+after {
		t.Fatalf("after pod a's deletion the node's mount %s is %q and b reads %q", node, hostMount(t, node), read(b.Name))
	}
	// b goes: so do the node's mount, its daemon and its record.
	deletePod(t, g, b.Name, b.UID)
	err = framework.Poll(context.Background(), "the node's mount gone with its last pod", 200*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			es, err := mountrecord.List(bed.Env.RegistrationDir + "/" + mountrecord.Dir)
			if err != nil {
				return false, "", err
			}
			m, n, r := hostMount(t, node), len(fuseProcesses(t, node)), hasRecord(es, node)
			return m == "" && n == 0 && !r, fmt.Sprintf("mount %q, %d daemons, record %t", m, n, r), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	unmounts := driverCalls(t, log, "unmount")
	var last string
	for _, c := range unmounts {
		if c.Dir == dirB {
			last = c.Message
		}
	}
	if !strings.Contains(last, "its last bind: unmounted "+node) {
		t.Fatalf("the driver's unmount of %s said %q: want the node's mount unmounted with it", dirB, last)
	}
	for _, p := range []string{node, node + mountrecord.PodsSuffix, node + ".lock"} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed with the node's mount", p, err)
		}
	}
}

// sharedMountOf returns the one shared mount beneath root (a lock file
// and a list of its pods beside each).
func sharedMountOf(t *testing.T, root string) string {
	t.Helper()
	des, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, de := range des {
		if p := filepath.Join(root, de.Name()); de.IsDir() && mountrecord.IsSharedTarget(p) {
			dirs = append(dirs, p) // not a list of its pods (mountrecord.PodsSuffix)
		}
	}
	if len(dirs) != 1 {
		t.Fatalf("shared mounts in %s: %q, want one", root, dirs)
	}
	return dirs[0]
}

// deletePod deletes pod name of g's namespace and waits until it is gone.
func deletePod(t *testing.T, g *glusterEnv, name string, uid types.UID) {
	t.Helper()
	if err := g.bed.Client.CoreV1().Pods(g.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g.bed.WaitPodGone(t, g.ns, name, uid, 2*time.Minute)
}

// hostMountOptions returns the per-mount options of the (topmost) mount at
// dir in the node's mount table.
func hostMountOptions(t *testing.T, dir string) []string {
	t.Helper()
	infos, err := mount.ParseMountInfo(framework.NodeProcOf() + "/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var opts []string
	for _, mi := range infos {
		if mi.MountPoint == dir {
			opts = mi.MountOptions
		}
	}
	return opts
}

// servedAt returns the mount whose FUSE daemon serves the volume at dir,
// a pod's volume directory: the node's mount that dir binds (shared
// mounts, the driver's default), or dir when it is a mount of its own.
func servedAt(t *testing.T, dir string) string {
	t.Helper()
	root, ok := flexvolume.SharedRoot(dir)
	if !ok {
		return dir
	}
	dev := hostMountDev(t, dir)
	des, _ := os.ReadDir(root)
	for _, de := range des {
		p := filepath.Join(root, de.Name())
		if de.IsDir() && hostMount(t, p) != "" && hostMountDev(t, p) == dev {
			return p
		}
	}
	return dir
}
