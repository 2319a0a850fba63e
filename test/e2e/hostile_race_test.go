//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// testAttachPathSwapped: a container controls every name along the path
// of its mounts, and may change them between the recovery's scan of its
// mount table and the attach, which runs as root in its mount namespace.
// Here the container's volume is at /w/sys; the moment the attach is about
// to start (its program held by the test, through fanotify, as it is
// executed in the container), the container renames /w and puts a symbolic
// link to /proc in its place, so that /w/sys names its /proc/sys, a
// read-only bind of the runtime's. Followed, the attach would detach that
// bind and put the volume there. The recovery must refuse the path (it no
// longer leads to the dead mount) and leave /proc/sys as it was; the volume
// then comes back where the container moved it.
func (g *glusterEnv) testAttachPathSwapped(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	log := g.setDriverMode(t, mode)
	name := "swap-" + string(mode)
	p := g.startPod(t, name, false, sleeper{name: "main", sleep: "infinity", mountPath: "/w/sys"})
	dir := g.volumeDir(p)
	waitMountedVia(t, log, dir, viaOf(t, mode))
	procSys := containerMount(t, bed, g.ns, name, "main", "/proc/sys")
	if procSys.fstype != "proc" || !procSys.ro {
		t.Fatalf("the container's /proc/sys is %+v; want the runtime's read-only bind of proc", procSys)
	}

	// Every execution of the mount pod's program waits for the test's
	// answer; the one that attaches at /w/sys is held.
	mp := g.mountPod(t)
	serve := podProcess(t, mp.UID, "mountpod", "serve")
	hold := holdExec(t, fmt.Sprintf("/proc/%d/exe", serve), func(argv []string) bool {
		i := slices.Index(argv, "--path")
		return slices.Contains(argv, recovery.ReattachCommand) && i >= 0 && i+1 < len(argv) && argv[i+1] == "/w/sys"
	})
	pids := fuseProcesses(t, dir)
	if len(pids) != 1 {
		t.Fatalf("%d glusterfs processes serve %s, want 1", len(pids), dir)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	held := hold.wait(t, 2*time.Minute)
	t.Logf("the attach is held: pid %d, %q", held.pid, held.argv)
	// The container's move, while the attach waits.
	start := time.Now()
	bed.MustExec(t, g.ns, name, "main", "sh", "-c", "mv /w /w.real && ln -s /proc /w && readlink /w")
	t.Logf("the container swapped /w for a link to /proc in %s", time.Since(start).Round(time.Millisecond))
	held.allow(t)

	// The harm (the volume, or nothing, at the container's /proc/sys), or
	// the volume back where the container moved it.
	var sys, moved ctrMount
	harm := false
	err := framework.Poll(context.Background(), "the volume back at /w.real/sys, or /proc/sys changed", 250*time.Millisecond, 3*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			out, se, err := bed.Exec(ctx, 30*time.Second, g.ns, name, "main", "cat", "/proc/self/mountinfo")
			if err != nil {
				return false, se, nil
			}
			sys, moved = topMount(out, "/proc/sys"), topMount(out, "/w.real/sys")
			if harm = sys.fstype != "proc" || !sys.ro; harm {
				return true, "", nil
			}
			_, se, err = bed.Exec(ctx, 30*time.Second, g.ns, name, "main", "ls", "/w.real/sys")
			return err == nil && moved.fstype == "fuse.glusterfs", fmt.Sprintf("/w.real/sys %+v: %s", moved, strings.TrimSpace(se)), nil
		})
	if harm {
		t.Fatalf("the container's /proc/sys is %+v after the recovery; want the runtime's read-only proc bind: the attach followed the container's link", sys)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The container ends with the node's mount. A recovery may still be
	// under way when the volume first answers there (a stressed run saw the
	// node a mount ahead of the container for a moment), so this waits for
	// the two to agree, and logs what it saw first.
	first, node := moved.dev, hostMountDev(t, dir)
	err = framework.Poll(context.Background(), "the container's /w.real/sys the node's mount of "+dir, 250*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			out, se, err := bed.Exec(ctx, 30*time.Second, g.ns, name, "main", "cat", "/proc/self/mountinfo")
			if err != nil {
				return false, se, nil
			}
			moved, node = topMount(out, "/w.real/sys"), hostMountDev(t, dir)
			return moved.dev == node, fmt.Sprintf("container %+v, node %s", moved, node), nil
		})
	t.Logf("the container's /w.real/sys first answered as %s, the node's mount then %s; at last %s and %s", first, hostMountDev(t, dir), moved.dev, node)
	if err != nil {
		t.Error(err)
	}
	logEvents(t, bed, g.ns, name, recovery.ReasonRecoveryFailed)
	logEvents(t, bed, g.ns, name, recovery.ReasonRecovered)
}

// testDeadNumberReused: the kernel gives a dead mount's device number to
// the next anonymous mount made anywhere on the node, once nothing holds
// the dead mount any more. Here the only container that held the dead
// mount ends while the server is down (the recovery has detached the
// node's mount and cannot mount it again), and a tmpfs made on the node
// takes the number, as another pod's token tmpfs or an overlay may. When
// the server is back, the recovery mounts the volume again and must leave
// that tmpfs alone: a dead mount is its number, type and source, and is
// forgotten once nothing holds it.
func (g *glusterEnv) testDeadNumberReused(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	log := g.setDriverMode(t, mode)
	name := "reused-" + string(mode)
	p := g.startPod(t, name, true,
		sleeper{name: "holder", sleep: "1001d", mountPath: "/data"},
		sleeper{name: "keeper", sleep: "infinity"})
	dir := g.volumeDir(p)
	waitMountedVia(t, log, dir, viaOf(t, mode))
	dead := hostMountDev(t, dir)

	// The daemon dies and the server goes down while the mount pod is
	// held still, so that the recovery's first attempt finds the server
	// down: it detaches the node's dead mount and keeps trying.
	resume := g.killDaemonHeld(t, dir)
	g.glusterVolumeCmd(t, "stop")
	t.Cleanup(func() { g.glusterVolumeCmd(t, "start", "force") })
	resume()
	err := framework.Poll(context.Background(), "the node's dead mount at "+dir+" detached", 250*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			fs := hostMount(t, dir)
			return fs == "", "mounted: " + fs, nil
		})
	if err != nil {
		t.Fatal(err)
	}

	// The one container that held the dead mount ends (the pod's policy
	// does not restart it), and the number is free.
	if err := syscall.Kill(podProcess(t, p.UID, "sleep", "1001d"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	grab := takeDeviceNumber(t, dead)
	sentinel := fmt.Sprintf("not the volume %d", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(grab, "sentinel"), []byte(sentinel), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("a tmpfs at %s has the dead mount's number %s", grab, dead)

	// The server comes back; so does the node's mount.
	g.glusterVolumeCmd(t, "start")
	err = framework.Poll(context.Background(), "the volume mounted again at "+dir, 250*time.Millisecond, 3*time.Minute,
		func(context.Context) (bool, string, error) {
			fs := hostMount(t, dir)
			return fs == "fuse.glusterfs", "mounted: " + fs, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	waitPodEvents(t, bed, g.ns, name, recovery.ReasonRecovered, 1, "came back")
	if fs := hostMount(t, grab); fs != "tmpfs" {
		t.Fatalf("the tmpfs at %s, which took the dead mount's number %s, is now %q: the recovery took it for the dead mount", grab, dead, fs)
	}
	if got := readFileOr(filepath.Join(grab, "sentinel")); got != sentinel {
		t.Fatalf("%s/sentinel reads %q, want %q: the recovery replaced the mount there", grab, got, sentinel)
	}
	if now := hostMountDev(t, grab); now != dead {
		t.Errorf("the tmpfs at %s has %s, not the dead mount's %s", grab, now, dead)
	}
}

// glusterVolumeCmd runs "gluster volume ACTION gv0 [args]" in the server.
func (g *glusterEnv) glusterVolumeCmd(t *testing.T, action string, args ...string) {
	t.Helper()
	cmd := append([]string{"gluster", "--mode=script", "volume", action, glusterVolume}, args...)
	out, se, err := g.bed.Exec(context.Background(), 2*time.Minute, g.ns, "glusterfs-server", "server", cmd...)
	if err != nil && !(action == "start" && strings.Contains(se+out, "already started")) {
		t.Errorf("%s: %v: %s %s", strings.Join(cmd, " "), err, out, se)
		return
	}
	t.Logf("%s: %s", strings.Join(cmd, " "), strings.TrimSpace(out))
}

// takeDeviceNumber mounts tmpfs file systems in the test's directory until
// one has the device number dev ("0:MINOR", which the kernel hands out
// lowest first, once it is free), and returns where it is. The others are
// unmounted when the test ends, that one too.
func takeDeviceNumber(t *testing.T, dev string) string {
	t.Helper()
	var major, minor uint32
	if _, err := fmt.Sscanf(dev, "%d:%d", &major, &minor); err != nil || major != 0 {
		t.Fatalf("device number %q: not an anonymous one (0:N)", dev)
	}
	base := t.TempDir()
	var mounted []string
	t.Cleanup(func() {
		for _, m := range slices.Backward(mounted) {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", m, err)
			}
		}
	})
	var got string
	tries := 0
	err := framework.Poll(context.Background(), "a tmpfs with the number "+dev, 100*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			for len(mounted) < 4096 {
				tries++
				d := filepath.Join(base, fmt.Sprint(tries))
				if err := os.Mkdir(d, 0o700); err != nil {
					return false, "", err
				}
				if err := unix.Mount("e2e-number", d, "tmpfs", 0, "size=1m"); err != nil {
					return false, "", fmt.Errorf("mount tmpfs at %s: %w", d, err)
				}
				var st unix.Stat_t
				if err := unix.Stat(d, &st); err != nil {
					return false, "", err
				}
				mi := unix.Minor(st.Dev)
				switch {
				case unix.Major(st.Dev) == major && mi == minor:
					mounted = append(mounted, d)
					got = d
					return true, "", nil
				case unix.Major(st.Dev) == major && mi < minor:
					// A lower free number: kept, so that the next
					// mount gets another.
					mounted = append(mounted, d)
					continue
				}
				// A higher one: dev is not free yet.
				if err := unix.Unmount(d, 0); err != nil {
					return false, "", err
				}
				_ = os.Remove(d)
				return false, fmt.Sprintf("got %d:%d; %d held lower ones", unix.Major(st.Dev), mi, len(mounted)), nil
			}
			return false, "", errors.New("4096 tmpfs mounts, none with the number")
		})
	if err != nil {
		t.Fatalf("%v; what holds %s now: %s", err, dev, holdersOf(dev))
	}
	t.Logf("%d tmpfs mounts made, %d kept, the last has %s", tries, len(mounted), dev)
	return got
}

// holdersOf names the processes whose mount table shows device dev.
func holdersOf(dev string) string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	seen := map[string]bool{}
	for _, p := range procs {
		ns, _ := os.Readlink(filepath.Join(filepath.Dir(p), "ns/mnt"))
		if seen[ns] {
			continue
		}
		seen[ns] = true
		data, _ := os.ReadFile(p)
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[2] == dev {
				cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
				out = append(out, fmt.Sprintf("%s (%s): %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(cmd), "\x00", " "), f[4]))
			}
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, "; ")
}

// topMount returns the topmost mount at path in mountinfo's text.
func topMount(mountinfo, path string) ctrMount {
	var m ctrMount
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[4] != path {
			continue
		}
		m = ctrMount{dev: f[2], root: f[3]}
		for _, o := range strings.Split(f[5], ",") {
			m.ro = m.ro || o == "ro"
		}
		if i := slices.Index(f, "-"); i > 0 && i+1 < len(f) {
			m.fstype = f[i+1]
		}
	}
	return m
}

// logEvents logs the pod's Events of reason.
func logEvents(t *testing.T, bed *framework.Bed, ns, pod, reason string) {
	t.Helper()
	evs, err := bed.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
	if err != nil {
		t.Logf("Events of %s/%s: %v", ns, pod, err)
		return
	}
	for _, ev := range evs.Items {
		t.Logf("Event %s (%d): %s", ev.Reason, ev.Count, ev.Message)
	}
}

// execHolder holds, through a fanotify permission mark, the first
// execution of a program file whose command line match accepts, and lets
// every other execution of it go at once. When the test ends, the group is
// closed, and the kernel lets go whatever is still held.
type execHolder struct {
	f    *os.File
	held chan *heldExec
}

// heldExec is an execution waiting for the test's answer.
type heldExec struct {
	h    *execHolder
	pid  int
	argv []string
	fd   int32
	once sync.Once
}

func holdExec(t *testing.T, program string, match func(argv []string) bool) *execHolder {
	t.Helper()
	fd, err := unix.FanotifyInit(unix.FAN_CLASS_CONTENT|unix.FAN_CLOEXEC|unix.FAN_NONBLOCK, unix.O_RDONLY|unix.O_LARGEFILE|unix.O_CLOEXEC)
	if err != nil {
		t.Fatalf("fanotify_init: %v", err)
	}
	h := &execHolder{f: os.NewFile(uintptr(fd), "fanotify"), held: make(chan *heldExec, 1)}
	if err := unix.FanotifyMark(fd, unix.FAN_MARK_ADD, unix.FAN_OPEN_EXEC_PERM, unix.AT_FDCWD, program); err != nil {
		h.f.Close()
		t.Fatalf("fanotify_mark %s: %v", program, err)
	}
	done := make(chan struct{})
	go h.serve(match, done)
	t.Cleanup(func() {
		h.f.Close()
		<-done
	})
	return h
}

func (h *execHolder) serve(match func(argv []string) bool, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 4096)
	holding := true
	for {
		n, err := h.f.Read(buf)
		if err != nil {
			return
		}
		for b := buf[:n]; len(b) >= int(unsafe.Sizeof(unix.FanotifyEventMetadata{})); {
			ev := (*unix.FanotifyEventMetadata)(unsafe.Pointer(&b[0]))
			if ev.Event_len < uint32(ev.Metadata_len) || int(ev.Event_len) > len(b) {
				break
			}
			b = b[ev.Event_len:]
			if ev.Fd < 0 {
				continue
			}
			data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ev.Pid))
			argv := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
			if ev.Mask&unix.FAN_OPEN_EXEC_PERM != 0 && holding && match(argv) {
				holding = false
				h.held <- &heldExec{h: h, pid: int(ev.Pid), argv: argv, fd: ev.Fd}
				continue
			}
			_ = h.answer(ev.Fd)
		}
	}
}

// answer lets the execution of event fd go, and closes fd.
func (h *execHolder) answer(fd int32) error {
	var resp [8]byte
	binary.NativeEndian.PutUint32(resp[0:], uint32(fd))
	binary.NativeEndian.PutUint32(resp[4:], unix.FAN_ALLOW)
	_, err := h.f.Write(resp[:])
	unix.Close(int(fd))
	return err
}

// wait returns the held execution, waiting up to timeout for it.
func (h *execHolder) wait(t *testing.T, timeout time.Duration) *heldExec {
	t.Helper()
	select {
	case e := <-h.held:
		return e
	case <-time.After(timeout):
		t.Fatalf("no execution held in %s", timeout)
		return nil
	}
}

// allow lets the held execution go.
func (e *heldExec) allow(t *testing.T) {
	t.Helper()
	e.once.Do(func() {
		if err := e.h.answer(e.fd); err != nil {
			t.Errorf("let pid %d go: %v", e.pid, err)
		}
	})
}
