package recovery

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// TestHoldersOnlyOfTheNodesUserNS: anybody may make a user namespace and a
// mount namespace in it (unshare -Urm), which copies every mount, the dead
// one included, and may then mount a /proc of their own there. The attach
// runs as root in a holder's namespace and executes a path resolved there:
// such a namespace must never be a holder. One made by root in the node's
// user namespace (as a container runtime makes them) is.
func TestHoldersOnlyOfTheNodesUserNS(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	vol := filepath.Join(mountfdtest.Base(t), "vol")
	mountfdtest.MountTmpfs(t, vol)
	var id Identity
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, mi := range infos {
		if mi.MountPoint == vol {
			id, _ = identityOf(mi)
		}
	}
	if id.FSType == "" {
		t.Fatalf("no mount at %s", vol)
	}
	node := holdIn(t, "--mount")
	other := holdIn(t, "--user", "--map-root-user", "--mount")

	hs, err := Holders("/proc", []Identity{id})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, h := range hs {
		pids = append(pids, h.pid)
		h.Close()
	}
	found := map[int]bool{}
	for _, p := range pids {
		found[p] = true
	}
	if !found[node] {
		t.Errorf("holders %v: the namespace of %d (the node's user namespace) is missing", pids, node)
	}
	if found[other] {
		t.Errorf("holders %v: the namespace of %d, owned by a user namespace of its own, was taken", pids, other)
	}
}

// holdIn starts `unshare FLAGS sleep` (a new mount namespace holding a copy
// of this one's mounts) and returns its PID once it sleeps there.
func holdIn(t *testing.T, flags ...string) int {
	t.Helper()
	args := append(append([]string{}, flags...), "--propagation", "private", "--", "sleep", "600")
	cmd := exec.Command("unshare", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare %v: %v", flags, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	own, _ := os.Readlink("/proc/self/ns/mnt")
	deadline := time.Now().Add(time.Minute)
	for {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
		if string(comm) == "sleep\n" && ns != "" && ns != own {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare %v: %d is not sleeping in a namespace of its own after a minute", flags, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
