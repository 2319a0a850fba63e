//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// mountPod is a mount-pod DaemonSet of the mountpod image, registered for
// one plugin of its own in the bed's registration directory.
type mountPod struct {
	bed     *framework.Bed
	ns      string
	plugin  string
	hostDir string // Bidirectional hostPath, mounted at the same path in the pod
}

// startMountPod applies the DaemonSet and waits for its pod to register.
func startMountPod(t testing.TB, bed *framework.Bed, prefix string) (*mountPod, *corev1.Pod) {
	t.Helper()
	if bed.Env.MountpodImage == "" {
		t.Fatal("the bed has no mount-pod image (MountpodImage is empty)")
	}
	ns := bed.CreateNamespace(t, prefix)
	m := &mountPod{
		bed:     bed,
		ns:      ns,
		plugin:  "e2e.mountcontainers.io/" + ns,
		hostDir: filepath.Join(bed.Env.KubeletRoot, "exec-e2e", ns),
	}
	t.Cleanup(func() {
		// Nothing the test mounted may outlive it.
		out, _ := os.ReadFile("/proc/self/mounts")
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], m.hostDir+"/") {
				_ = exec.Command("umount", "-l", f[1]).Run()
			}
		}
		_ = os.RemoveAll(m.hostDir)
	})
	bed.Apply(t, m.manifest())
	return m, m.waitRegistered(t, "")
}

func (m *mountPod) manifest() string {
	return mountPodDS{
		Namespace: m.ns, Name: "mount", App: "mount", Image: m.bed.Env.MountpodImage,
		Plugins: []string{m.plugin}, RegistrationDir: m.bed.Env.RegistrationDir,
		NodeSelector: "kubernetes.io/hostname: " + m.bed.Env.NodeName, GracePeriod: 2,
		Mounts: []hostPathMount{
			{Name: "registration", HostPath: m.bed.Env.RegistrationDir, MountPath: m.bed.Env.RegistrationDir, Type: "DirectoryOrCreate"},
			{Name: "mounts", HostPath: m.hostDir, MountPath: m.hostDir, Type: "DirectoryOrCreate", Bidirectional: true},
		},
	}.manifest()
}

// waitRegistered waits for a running pod of the DaemonSet other than
// notUID and for its registration, and returns the pod.
func (m *mountPod) waitRegistered(t testing.TB, notUID types.UID) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := framework.Poll(context.Background(), "mount pod registered for "+m.plugin, 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			pods, err := m.bed.Client.CoreV1().Pods(m.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=mount"})
			if err != nil {
				return false, err.Error(), nil
			}
			var state []string
			for _, p := range pods.Items {
				if p.UID == notUID || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
					state = append(state, p.Name+" "+string(p.Status.Phase))
					continue
				}
				r, ok, err := registration.Read(m.bed.Env.RegistrationDir, m.plugin)
				if err != nil {
					return false, "", err
				}
				if !ok || r.PodUID != string(p.UID) {
					return false, fmt.Sprintf("pod %s running, registration %v (%v)", p.Name, r, ok), nil
				}
				pod = p
				return true, "", nil
			}
			return false, fmt.Sprintf("pods: %v", state), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return &pod
}

// countingHost is the host executor of the tests that must run nothing on
// the host: it counts the commands it is asked for.
type countingHost struct {
	utilexec.Interface
	n atomic.Int32
}

func (c *countingHost) Command(cmd string, args ...string) utilexec.Cmd {
	c.n.Add(1)
	return c.Interface.Command(cmd, args...)
}

func (c *countingHost) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	c.n.Add(1)
	return c.Interface.CommandContext(ctx, cmd, args...)
}

func (m *mountPod) executor(t *testing.T, opts mcexec.Options) *mcexec.Exec {
	t.Helper()
	opts.Dir = m.bed.Env.RegistrationDir
	opts.Endpoint = m.bed.Env.CRIEndpoint
	r := mcexec.NewResolver(opts)
	t.Cleanup(func() { r.Close() })
	x, err := r.For(m.plugin)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// testInPod runs the resolver table in the mount pod through x: exit codes
// and outputs, a tool only the image has, a missing binary, concurrency
// commands at once and SafeFormatAndMount of the unformatted device dev.
func testInPod(t *testing.T, m *mountPod, x *pathCheck, pod *corev1.Pod, dev string, concurrency int) {
	t.Run("exit codes and outputs", func(t *testing.T) {
		for _, code := range []int{0, 1, 32, 255} {
			var stderr bytes.Buffer
			cmd := x.Command("sh", "-c", `echo "out $0"; echo "err $0" >&2; exit "$0"`, strconv.Itoa(code))
			cmd.SetStderr(&stderr)
			out, err := cmd.Output()
			if got := exitStatus(t, err); got != code {
				t.Errorf("exit %d: got %d (%v)", code, got, err)
			}
			if want := fmt.Sprintf("out %d\n", code); string(out) != want {
				t.Errorf("exit %d: stdout %q, want %q", code, out, want)
			}
			if want := fmt.Sprintf("err %d\n", code); stderr.String() != want {
				t.Errorf("exit %d: stderr %q, want %q", code, stderr.String(), want)
			}
		}
	})

	t.Run("tool only in the image", func(t *testing.T) {
		var tool string
		for _, c := range []string{"rbd", "mount.glusterfs", "xfs_repair", "tini"} {
			if _, err := exec.LookPath(c); err != nil {
				tool = c
				break
			}
		}
		if tool == "" {
			t.Fatal("every candidate tool is installed on the host; cannot tell where a command ran")
		}
		p, err := x.LookPath(tool)
		if err != nil {
			t.Fatalf("LookPath(%s) in the container: %v", tool, err)
		}
		arg := "--version"
		if tool == "mount.glusterfs" {
			arg = "-V"
		}
		out, err := x.Command(p, arg).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v: %s", p, arg, err, out)
		}
		t.Logf("%s %s: %s", p, arg, strings.SplitN(string(out), "\n", 2)[0])
	})

	t.Run("missing binary", func(t *testing.T) {
		for _, name := range []string{"no-such-tool-mc", "/usr/sbin/no-such-tool-mc"} {
			if err := x.Command(name).Run(); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
				t.Errorf("%s: %v (%T), want exactly ErrExecutableNotFound", name, err, err)
			}
		}
		if _, err := x.LookPath("no-such-tool-mc"); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
			t.Errorf("LookPath: %v", err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range concurrency {
			wg.Go(func() {
				want := fmt.Sprintf("%d %s", i, pod.UID)
				out, err := x.Command("sh", "-c", `echo "$0 $MOUNTPOD_POD_UID"; exit $(($0 % 5))`, strconv.Itoa(i)).Output()
				if exitStatus(t, err) != i%5 || strings.TrimSpace(string(out)) != want {
					t.Errorf("goroutine %d: %q, %v; want %q, exit %d", i, out, err, want, i%5)
				}
			})
		}
		wg.Wait()
	})

	t.Run("SafeFormatAndMount", func(t *testing.T) {
		target := filepath.Join(m.hostDir, "disk-"+filepath.Base(dev))
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		sfm := mount.SafeFormatAndMount{Interface: mcexec.NewMounter(x, nil), Exec: x}
		if f, err := sfm.GetDiskFormat(dev); err != nil || f != "" {
			t.Fatalf("GetDiskFormat(%s) before = %q, %v; want unformatted", dev, f, err)
		}
		if err := sfm.FormatAndMount(dev, target, "ext4", nil); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := sfm.Unmount(target); err != nil {
				t.Error(err)
			}
			if mounted, _ := sfm.IsMountPoint(target); mounted {
				t.Errorf("%s still mounted on the host after Unmount", target)
			}
		}()
		if mounted, err := sfm.IsMountPoint(target); err != nil || !mounted {
			t.Fatalf("%s is not a mount point on the host: %v", target, err)
		}
		if err := os.WriteFile(filepath.Join(target, "hello"), []byte("hello"), 0o644); err != nil {
			t.Fatalf("write through the host's view of the mount: %v", err)
		}
		out, err := x.Command("cat", filepath.Join(target, "hello")).Output()
		if err != nil || string(out) != "hello" {
			t.Errorf("read in the pod: %q, %v", out, err)
		}
		if f, err := sfm.GetDiskFormat(dev); err != nil || f != "ext4" {
			t.Errorf("GetDiskFormat after = %q, %v", f, err)
		}
	})
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	ee, ok := err.(utilexec.ExitError) //nolint:errorlint // mount-utils type-asserts; so do we
	if !ok {
		t.Fatalf("error %v (%T) is not a utilexec.ExitError", err, err)
	}
	return ee.ExitStatus()
}

// execModes are the two paths into a live mount pod: CRI ExecSync (the
// design's) and the mount pod's exec socket (the fast path). A test of what
// runs in a mount pod runs once per mode, as a subtest named after it, and
// asserts the path every command took, so that a silent switch to the other
// path fails it.
var execModes = []mcexec.ExecMode{mcexec.ModeCRI, mcexec.ModeSocket}

// viaOf is the path a command placed in a live container takes in mode.
func viaOf(t testing.TB, mode mcexec.ExecMode) mcexec.Via {
	t.Helper()
	switch mode {
	case mcexec.ModeCRI:
		return mcexec.ViaExecSync
	case mcexec.ModeSocket:
		return mcexec.ViaSocket
	}
	t.Fatalf("exec mode %q has no single path", mode)
	return ""
}

// pathCheck is a plugin's executor that keeps every command it hands out,
// so that the test can check afterwards where each one ran and through
// which path, also for commands a library (mount-utils) creates.
type pathCheck struct {
	*mcexec.Exec
	mu   sync.Mutex
	cmds []*mcexec.Cmd
}

var _ utilexec.Interface = (*pathCheck)(nil)

func (p *pathCheck) Command(cmd string, args ...string) utilexec.Cmd {
	return p.CommandContext(context.Background(), cmd, args...)
}

func (p *pathCheck) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	c := p.Exec.CommandContext(ctx, cmd, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cmds = append(p.cmds, c.(*mcexec.Cmd))
	return c
}

// verify checks that every command handed out since the last verify ran
// in container id through via, and that there was at least one.
func (p *pathCheck) verify(t *testing.T, id string, via mcexec.Via) {
	t.Helper()
	p.mu.Lock()
	cmds := p.cmds
	p.cmds = nil
	p.mu.Unlock()
	if len(cmds) == 0 {
		t.Error("no command was run")
	}
	for i, c := range cmds {
		d, ok := c.Decision()
		if !ok || d.ContainerID != id || d.Via != via {
			t.Errorf("command %d was placed %v (decided %t); want container %s via %s", i, d, ok, id, via)
		}
	}
	t.Logf("%d commands, all in container %.12s via %s", len(cmds), id, via)
}

// TestExecResolver runs the resolver against a mount pod the kubelet runs:
// commands land in its container, through the path the exec mode names
// (once per mode), results pass through unchanged, and the host takes over
// exactly when the rule says.
func TestExecResolver(t *testing.T) {
	bed := framework.Current(t)
	// Before the pod: a privileged container's /dev is a snapshot. One
	// unformatted device per mode: SafeFormatAndMount formats it.
	devs := map[mcexec.ExecMode]string{}
	for _, mode := range execModes {
		devs[mode] = bed.LoopDevice(t, 64, "")
	}
	m, pod := startMountPod(t, bed, "exec")
	ctx := context.Background()
	id := bed.RunningContainerID(t, pod.UID, "mount", 30*time.Second)

	for _, mode := range execModes {
		t.Run(string(mode), func(t *testing.T) {
			host := &countingHost{Interface: utilexec.New()}
			via := viaOf(t, mode)
			e := m.executor(t, mcexec.Options{Host: host, ExecMode: mode})
			d, err := e.Resolve(ctx)
			if err != nil || d.ContainerID != id || d.Reason != mcexec.ReasonRunning || d.Via != via {
				t.Fatalf("decision %v, %v; want container %s via %s", d, err, id, via)
			}
			t.Logf("decision: %v", d)
			x := &pathCheck{Exec: e}
			// 32 ExecSyncs at once in one container stall containerd
			// 1.6.20 here for 13-30 s (measured, with one connection or
			// one each; 8 at once take 0.6 s): 8 on the CRI path.
			concurrency := 32
			if mode == mcexec.ModeCRI {
				concurrency = 8
			}
			testInPod(t, m, x, pod, devs[mode], concurrency)
			x.verify(t, id, via)
			if n := host.n.Load(); n != 0 {
				t.Errorf("%d commands ran on the host", n)
			}
		})
	}
	x := m.executor(t, mcexec.Options{})

	t.Run("container stopped", func(t *testing.T) {
		id := bed.RunningContainerID(t, pod.UID, "mount", 30*time.Second)
		rs := bed.CRI(t)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := rs.StopContainer(sctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 2}); err != nil {
			t.Fatal(err)
		}
		// The kubelet restarts it soon; until then the host runs commands.
		// (mountpod removes its registration on SIGTERM, so the reason is
		// "not registered" or, if the file is still there, "not running".)
		cmd := x.Command("sh", "-c", `echo "${MOUNTPOD_POD_UID:-host}"`)
		out, err := cmd.Output()
		d, _ := cmd.(*mcexec.Cmd).Decision()
		if err != nil || strings.TrimSpace(string(out)) != "host" || !d.OnHost() {
			t.Errorf("after stop: %q, %v, decision %v", out, err, d)
		}
		t.Logf("after stop: %v", d)
		if d.Reason != mcexec.ReasonNotRunning && d.Reason != mcexec.ReasonNotRegistered {
			t.Errorf("reason %q", d.Reason)
		}
		// And back to the (restarted) container once it registers again.
		m.waitRegistered(t, "")
		nid := bed.RunningContainerID(t, pod.UID, "mount", time.Minute)
		if d, err := x.Resolve(ctx); err != nil || d.ContainerID != nid || nid == id {
			t.Errorf("after restart: %v, %v; want container %s (was %s)", d, err, nid, id)
		}
	})

	t.Run("pod replaced, old registration stays", func(t *testing.T) {
		old, ok, err := registration.Read(bed.Env.RegistrationDir, m.plugin)
		if err != nil || !ok {
			t.Fatalf("registration: %v, %v", ok, err)
		}
		// Keep the DaemonSet from recreating the pod until the stale
		// registration is in place, as after a mount pod that crashed.
		patch := func(node string) {
			bed.Kubectl(t, "patch", "daemonset", "mount", "-n", m.ns, "--type=merge", "-p",
				fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/hostname":%q}}}}}`, node))
		}
		patch("nowhere")
		bed.WaitPodGone(t, m.ns, pod.Name, pod.UID, 2*time.Minute)
		if err := registration.Write(bed.Env.RegistrationDir, m.plugin, old); err != nil {
			t.Fatal(err)
		}
		d, err := x.Resolve(ctx)
		if err != nil || !d.OnHost() || d.Reason != mcexec.ReasonNotRunning || d.Registration.PodUID != string(pod.UID) {
			t.Fatalf("stale registration: %v, %v; want host, not running", d, err)
		}
		out, err := x.Command("sh", "-c", `echo "${MOUNTPOD_POD_UID:-host}"`).Output()
		if err != nil || strings.TrimSpace(string(out)) != "host" {
			t.Errorf("stale registration: %q, %v", out, err)
		}
		patch(bed.Env.NodeName)
		newPod := m.waitRegistered(t, pod.UID)
		out, err = x.Command("sh", "-c", `echo "$MOUNTPOD_POD_UID"`).Output()
		if err != nil || strings.TrimSpace(string(out)) != string(newPod.UID) {
			t.Errorf("new pod: %q, %v; want %s", out, err, newPod.UID)
		}
	})

	t.Run("runtime unreachable fails closed", func(t *testing.T) {
		// Whenever the runtime must decide: here, exec mode cri.
		r := mcexec.NewResolver(mcexec.Options{Dir: bed.Env.RegistrationDir, Endpoint: "unix:///nonexistent/cri.sock", ExecMode: mcexec.ModeCRI})
		defer r.Close()
		y, err := r.For(m.plugin)
		if err != nil {
			t.Fatal(err)
		}
		err = y.Command("true").Run()
		if !errors.Is(err, mcexec.ErrRuntimeUnavailable) || !strings.Contains(err.Error(), "/nonexistent/cri.sock") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("a live exec socket needs no runtime", func(t *testing.T) {
		// The socket proves the container running: the runtime, unreachable
		// here, is not asked.
		r := mcexec.NewResolver(mcexec.Options{Dir: bed.Env.RegistrationDir, Endpoint: "unix:///nonexistent/cri.sock"})
		defer r.Close()
		y, err := r.For(m.plugin)
		if err != nil {
			t.Fatal(err)
		}
		d, err := y.Resolve(context.Background())
		if err != nil || d.Via != mcexec.ViaSocket || d.Endpoint != "" || !strings.Contains(d.ViaReason, "runtime not asked") {
			t.Fatalf("Resolve = %s, %v; want via the exec socket, the runtime not asked", d, err)
		}
		if id := bed.RunningContainerID(t, types.UID(d.Registration.PodUID), "mount", time.Minute); d.ContainerID != id {
			t.Errorf("the socket's cgroup names container %s; the runtime says %s", d.ContainerID, id)
		}
		out, err := y.Command("sh", "-c", `echo "$MOUNTPOD_POD_UID"`).Output()
		if err != nil || strings.TrimSpace(string(out)) != string(d.Registration.PodUID) {
			t.Errorf("in the pod: %q, %v; want %s", out, err, d.Registration.PodUID)
		}
	})
}
