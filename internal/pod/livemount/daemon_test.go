package livemount

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// The test binary run with these variables set is a FUSE daemon in a mount
// namespace of its own: see fuseChild.
const (
	childKubeletEnv = "LIVEMOUNT_TEST_FUSE_KUBELET"
	childTargetEnv  = "LIVEMOUNT_TEST_FUSE_TARGET"
	// childScopedEnv is a PID that is in the target's scope with the
	// child.
	childScopedEnv = "LIVEMOUNT_TEST_FUSE_SCOPED"
)

func TestMain(m *testing.M) {
	// The checks of real descriptors must end, however loaded the
	// machine: their bound is a hang guard here.
	endedCheckTimeout = time.Minute
	if dir := os.Getenv(staleEnv); dir != "" {
		if err := staleChild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "stale child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	if kubelet := os.Getenv(childKubeletEnv); kubelet != "" {
		scoped, _ := strconv.Atoi(os.Getenv(childScopedEnv))
		if err := fuseChild(kubelet, os.Getenv(childTargetEnv), scoped); err != nil {
			fmt.Fprintln(os.Stderr, "fuse child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOnlyFUSEHoldersAreDaemons reads a fake /proc: a process counts as a
// mount's daemon only when it runs as root and holds the mount's FUSE
// connection, or, where the kernel names no connection, holds /dev/fuse and
// names the target. Naming the target is never enough.
func TestOnlyFUSEHoldersAreDaemons(t *testing.T) {
	kubelet := t.TempDir()
	a := filepath.Join(kubelet, "pods/a/volumes/x~glusterfs/data")
	blk := filepath.Join(kubelet, "pods/b/volumes/x~ntfs/data")
	mi := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"20 1 0:20 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/gv0 rw", a),
		fmt.Sprintf("31 20 8:1 / %s rw - fuseblk /dev/sda1 rw", blk),
	}
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	user := func(p fakeProc) fakeProc { p.uids = [4]int{1000, 1000, 1000, 1000}; return p }
	setuid := func(p fakeProc) fakeProc { p.uids = [4]int{1000, 0, 0, 0}; return p }
	proc := t.TempDir()
	for pid, p := range map[int]fakeProc{
		100: rootProc([]int{30}, "/usr/sbin/glusterfs", a),              // holds a's connection
		101: rootProc([]int{30}, "/usr/sbin/glusterfs", "--pid-file=x"), // the same, without naming a
		102: rootProc([]int{-1}, "/usr/bin/old-kernel-fuse", a),         // the kernel names no connection
		103: rootProc([]int{8<<20 | 1}, "/usr/bin/ntfs-3g"),             // holds the fuseblk mount's
		200: user(rootProc([]int{30}, "/bin/sleep", "1000", a)),         // another user's
		201: setuid(rootProc([]int{-1}, "/usr/bin/fusermount", a)),      // another user's, set-user-ID root
		202: rootProc(nil, "/bin/sleep", "1000", a),                     // no /dev/fuse
		203: rootProc([]int{99}, "/usr/sbin/glusterfs", a),              // another connection
		204: rootProc([]int{1}, "/usr/bin/ntfs-3g", blk),                // not 8:1's encoding
	} {
		writeProc(t, proc, pid, p)
	}
	real := kernelNamesConnections
	t.Cleanup(func() { kernelNamesConnections = real })
	for _, names := range []bool{true, false} {
		kernelNamesConnections = names
		r, err := Survey(context.Background(), Options{KubeletDir: kubelet, MountInfo: mi, ProcRoot: proc})
		if err != nil {
			t.Fatal(err)
		}
		// Where the kernel names connections, a descriptor naming none
		// (102: perhaps a file a container's root calls /dev/fuse) serves
		// nothing; on an older kernel its command line decides.
		want := map[string][]int{a: {100, 101}, blk: {103}}
		if !names {
			want[a] = []int{100, 101, 102}
		}
		if got := daemonsOf(r); !reflect.DeepEqual(got, want) {
			t.Errorf("kernel names connections %t: daemons %v, want %v", names, got, want)
		}
	}
}

// childReport is what fuseChild prints.
type childReport struct {
	Report Report
	// Named: the kernel names the connection in the descriptor's fdinfo,
	// Conn.
	Named bool
	Conn  uint64
}

// fuseChild mounts a FUSE file system at target, below kubelet, with a
// /dev/fuse descriptor it holds (and never serves), and prints its survey
// of kubelet, where target's scope holds the child and process scoped. It
// runs in a mount namespace of its own, so that no other process on the
// machine sees the mount; its command line does not name target.
func fuseChild(kubelet, target string, scoped int) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /dev/fuse: %w", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount("livemounttest", target, "fuse.livemounttest", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount fuse at %s: %w", target, err)
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		return fmt.Errorf("read fdinfo: %w", err)
	}
	name := scope.Name(target)
	fs := &fakeScopes{scopes: map[string][]scope.Scope{"x.io/fuse": {
		{Name: name, Cgroup: "/mc/x.io~fuse/" + name, PIDs: []int{os.Getpid(), scoped}},
	}}}
	r, err := Survey(context.Background(), Options{KubeletDir: kubelet, Plugins: []string{"x.io/fuse"}, Scopes: fs, StatTimeout: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	c, named := fdinfoConnection(string(info))
	return json.NewEncoder(os.Stdout).Encode(childReport{Report: r, Named: named, Conn: c})
}

// startNaming starts a process of uid that names target on its command
// line and lives until the test ends, and returns its PID.
func startNaming(t *testing.T, uid uint32, target string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read x; :", "sh", target)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	startHeld(t, cmd)
	return cmd.Process.Pid
}

// startHeld starts cmd, which lives until its standard input ends: when
// the test ends.
func startHeld(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
}

// TestDaemonOfARealFUSEMount mounts a FUSE file system and checks that the
// process holding its connection is its daemon, while a process of another
// user and a root process without /dev/fuse, both naming the mount point,
// are not, nor is a process in the mount's scope holding the connection
// of a mount unmounted just before (whose number the kernel gives to the
// next mount made on the machine, most often this one: where it gave it
// to another mount, the stale child's assertion holds trivially, and
// TestRecheckOfRealHolders proves the case whatever the numbers).
func TestDaemonOfARealFUSEMount(t *testing.T) {
	needFUSE(t)
	stale, sr := startStale(t)
	kubelet := t.TempDir()
	target := filepath.Join(kubelet, "pods/a/volumes/x~fuse/data")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	impostors := []int{startNaming(t, 65534, target), startNaming(t, 0, target)}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childKubeletEnv+"="+kubelet, childTargetEnv+"="+target, childScopedEnv+"="+strconv.Itoa(stale))
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fuse child: %v\n%s", err, stderr.Bytes())
	}
	var cr childReport
	if err := json.Unmarshal(out, &cr); err != nil {
		t.Fatalf("fuse child: %v\n%s", err, out)
	}
	if !cr.Named {
		t.Fatalf("fuse child %d: fdinfo of its descriptor names no connection, on a kernel that names them", cmd.Process.Pid)
	}
	if cr.Conn == sr.Ended {
		t.Logf("the mount has the number %d of the stale child %d's unmounted mount", cr.Conn, stale)
	} else {
		t.Logf("the mount has the number %d, not the stale child %d's %d (the kernel gave that to another mount)", cr.Conn, stale, sr.Ended)
	}
	i := slices.IndexFunc(cr.Report.Mounts, func(m Mount) bool { return m.Target == target })
	if i < 0 {
		t.Fatalf("the survey %+v does not list %s", cr.Report, target)
	}
	// Only these processes are the test's: the survey reads the whole
	// machine, where another process may hold a connection of this
	// number too, for the moment the check of its descriptor cannot be
	// made (an exiting process).
	got := cr.Report.Mounts[i].Daemons
	if !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("daemons %v, want the FUSE child %d among them", got, cmd.Process.Pid)
	}
	for _, pid := range impostors {
		if slices.Contains(got, pid) {
			t.Errorf("daemons %v include %d, which only names the mount point (want the FUSE child %d, not %v)", got, pid, cmd.Process.Pid, impostors)
		}
	}
	if slices.Contains(got, stale) {
		t.Errorf("daemons %v include the stale child %d, which holds the ended connection %d (want the FUSE child %d)", got, stale, sr.Ended, cmd.Process.Pid)
	}
	if len(got) > 1 {
		t.Logf("daemons %v: besides the FUSE child %d, processes elsewhere on the machine hold a connection of its number, not known to have ended", got, cmd.Process.Pid)
	}
}
