//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/node/shim/shimtest"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

type shimResult struct {
	code           int
	stdout, stderr string
}

// buildShim builds kubelet-exec-shim and its helper into a temporary
// directory.
func buildShim(t testing.TB) string {
	t.Helper()
	bin, err := shimtest.Build(nodeTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runShim runs bin with args and env; it fails the test if the shim hangs.
func runShim(t *testing.T, env []string, bin string, args ...string) shimResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd, err := framework.NodeCommandOf(ctx, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v hung", bin, args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return shimResult{code, stdout.String(), stderr.String()}
}

// shimLog splits the verbose shim's standard error into its "exec
// decision" log lines, its other log records (one per command), and the
// rest (the utility's own standard error), which it returns.
func shimLog(stderr string) (decisions []string, rest string) {
	var b strings.Builder
	for _, line := range strings.SplitAfter(stderr, "\n") {
		record := strings.HasPrefix(line, "time=") && strings.Contains(line, " level=") && strings.Contains(line, " msg=")
		switch {
		case record && strings.Contains(line, `msg="exec decision"`):
			decisions = append(decisions, strings.TrimSpace(line))
		case record:
		default:
			b.WriteString(line)
		}
	}
	return decisions, b.String()
}

// checkShimPath checks the decisions a verbose shim logged: at least one,
// each placing the command in container id through via.
func checkShimPath(t *testing.T, decisions []string, id string, via mcexec.Via) {
	t.Helper()
	if len(decisions) == 0 {
		t.Errorf("the shim logged no decision (is --verbose honoured?)")
	}
	for _, d := range decisions {
		if !strings.Contains(d, `decision.where="container `+id+`"`) || !strings.Contains(d, " decision.via="+string(via)+" ") {
			t.Errorf("decision %q; want container %s via %s", d, id, via)
		}
		// Through a live socket the shim proves the container running
		// itself; through ExecSync the runtime decides.
		if proved := strings.Contains(d, "runtime not asked"); proved != (via == mcexec.ViaSocket) {
			t.Errorf("decision %q: the socket proved the container live: %v; want %v", d, proved, via == mcexec.ViaSocket)
		}
	}
}

func TestShim(t *testing.T) {
	bed := framework.Current(t)
	if _, err := os.Stat("/usr/bin/tini"); err == nil {
		t.Fatal("the host has /usr/bin/tini: the proof that commands run in the image would be meaningless")
	}
	m, pod := startMountPod(t, bed, "shim")
	bin := buildShim(t)
	env := []string{
		"CONTAINER_RUNTIME_ENDPOINT=" + bed.Env.CRIEndpoint,
		shim.EnvRegistrationDir + "=" + bed.Env.RegistrationDir,
	}
	links := filepath.Join(t.TempDir(), "bin")
	if r := runShim(t, env, bin, "install", "--dir", links, "--plugin", m.plugin, "rbd", "mount.glusterfs"); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	pathEnv := "PATH=" + links + ":" + os.Getenv("PATH")

	for _, mode := range execModes {
		t.Run(string(mode), func(t *testing.T) {
			via := viaOf(t, mode)
			// The mode and --verbose through the environment, as the
			// multi-call links read them too.
			s := &shimInPod{
				bed: bed, m: m, pod: pod, bin: bin, links: links, via: via,
				env: slices.Concat(env, []string{pathEnv, shim.EnvExecMode + "=" + string(mode), shim.EnvVerbose + "=1"}),
				id:  bed.RunningContainerID(t, pod.UID, "mount", time.Minute),
			}
			s.test(t)
		})
	}

	t.Run("the runtime decides when the socket cannot prove the pod live", func(t *testing.T) {
		// A registration no mount pod looks after, naming the live pod, with
		// an exec socket that cannot prove it: the shim hands the command
		// to its helper, the runtime finds the container running, and the
		// command runs there through ExecSync.
		const plugin = "e2e.mountcontainers.io/unproved"
		path, _ := registration.Path(bed.Env.RegistrationDir, plugin)
		t.Cleanup(func() { os.Remove(path) })
		id := bed.RunningContainerID(t, pod.UID, "mount", time.Minute)
		live := execserver.Identity{PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID), ContainerName: "mount"}
		other := live
		other.PodName, other.PodUID = "mount-other", "00000000-1111-4222-8333-444444444444"
		for _, tc := range []struct {
			name, reason string
			socket       func(t *testing.T) string // the socket, relative to the registration directory
		}{
			{"socket of another pod", "answers for pod " + pod.Namespace + "/mount-other", func(t *testing.T) string {
				return serveExecAs(t, bed, "unproved-other.sock", other)
			}},
			{"impostor on the node answering as the pod", "is not in container " + id, func(t *testing.T) string {
				return serveExecAs(t, bed, "unproved-impostor.sock", live)
			}},
			{"socket gone", "connection refused", func(t *testing.T) string {
				rel := execclient.SocketDir + "/unproved-gone.sock"
				l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(bed.Env.RegistrationDir, rel), Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				l.SetUnlinkOnClose(false)
				l.Close()
				t.Cleanup(func() { os.Remove(filepath.Join(bed.Env.RegistrationDir, rel)) })
				return rel
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				reg := registration.Registration{PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID), ContainerName: "mount", ExecSocket: tc.socket(t)}
				if err := registration.Write(bed.Env.RegistrationDir, plugin, reg); err != nil {
					t.Fatal(err)
				}
				r := runShim(t, slices.Concat(env, []string{shim.EnvVerbose + "=1"}), bin, "run", "--plugin", plugin, "--", "sh", "-c", `echo "$MOUNTPOD_POD_UID"`)
				decisions, stderr := shimLog(r.stderr)
				if r.code != 0 || r.stdout != string(pod.UID)+"\n" {
					t.Fatalf("code %d, stdout %q, stderr %q; want the pod's UID %s", r.code, r.stdout, stderr, pod.UID)
				}
				checkShimPath(t, decisions, id, mcexec.ViaExecSync)
				for _, d := range decisions {
					if !strings.Contains(d, tc.reason) {
						t.Errorf("decision %q does not say why the socket was not used (%q)", d, tc.reason)
					}
				}
			})
		}
	})

	t.Run("untrusted registrations", func(t *testing.T) {
		// A registration no mount pod looks after, naming the live pod.
		const plugin = "e2e.mountcontainers.io/untrusted"
		reg := registration.Registration{PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: string(pod.UID), ContainerName: "mount"}
		path, _ := registration.Path(bed.Env.RegistrationDir, plugin)
		t.Cleanup(func() { os.Remove(path) })
		for _, tc := range []struct {
			name   string
			spoil  func(t *testing.T)
			reason string
		}{
			{"group writable", func(t *testing.T) {
				if err := os.Chmod(path, 0o664); err != nil {
					t.Fatal(err)
				}
			}, "writable by group or others"},
			{"symlink", func(t *testing.T) {
				target := filepath.Join(t.TempDir(), "reg.json")
				data, _ := registration.Encode(reg)
				if err := os.WriteFile(target, data, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			}, "symbolic link"},
			{"fifo", func(t *testing.T) {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(path, 0o644); err != nil {
					t.Fatal(err)
				}
			}, "FIFO"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				os.Remove(path)
				if err := registration.Write(bed.Env.RegistrationDir, plugin, reg); err != nil {
					t.Fatal(err)
				}
				tc.spoil(t)
				r := runShim(t, env, bin, "run", "--plugin", plugin, "--", "true")
				if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, tc.reason) || !strings.Contains(r.stderr, path) {
					t.Fatalf("code %d, stderr %q; want 125 naming %s and %q", r.code, r.stderr, path, tc.reason)
				}
			})
		}
	})

	t.Run("multi-call links fall back to the host without recursing once the pod is gone", func(t *testing.T) {
		// The pod goes away: the links fall back to the host, which has
		// no rbd or mount.glusterfs, and must not find the shim itself.
		if err := bed.Client.AppsV1().DaemonSets(m.ns).Delete(context.Background(), "mount", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bed.WaitPodGone(t, m.ns, pod.Name, pod.UID, 2*time.Minute)
		for _, mode := range execModes {
			for _, tool := range []string{"rbd", "mount.glusterfs"} {
				host, err := exec.LookPath(tool)
				r := runShim(t, slices.Concat(env, []string{pathEnv, shim.EnvExecMode + "=" + string(mode)}), filepath.Join(links, tool), "--version")
				switch {
				case err == nil && host != filepath.Join(links, tool):
					t.Logf("the host has %s at %s: exit %d", tool, host, r.code)
				case r.code != shim.ExitNotFound:
					t.Errorf("%s (exec mode %s) with the pod gone and none on the host: code %d, %q; want 127", tool, mode, r.code, r.stderr)
				}
			}
		}
	})
}

// shimInPod runs the shim's tests against the live mount pod in one exec
// mode (set in env, with --verbose).
type shimInPod struct {
	bed   *framework.Bed
	m     *mountPod
	pod   *corev1.Pod
	bin   string
	links string // the multi-call links' directory
	env   []string
	id    string // the mount container
	via   mcexec.Via
}

// inPod runs bin and checks that the shim ran the utility in the pod's
// container through the mode's path; it returns the result without the
// decision log lines.
func (s *shimInPod) inPod(t *testing.T, bin string, args ...string) shimResult {
	t.Helper()
	r := runShim(t, s.env, bin, args...)
	var decisions []string
	decisions, r.stderr = shimLog(r.stderr)
	checkShimPath(t, decisions, s.id, s.via)
	return r
}

// run is inPod of `run --plugin P -- args...`.
func (s *shimInPod) run(t *testing.T, args ...string) shimResult {
	t.Helper()
	return s.inPod(t, s.bin, append([]string{"run", "--plugin", s.m.plugin, "--"}, args...)...)
}

func (s *shimInPod) test(t *testing.T) {
	bed, m, pod, bin, run := s.bed, s.m, s.pod, s.bin, s.run
	t.Run("exit codes and streams in the pod", func(t *testing.T) {
		for _, code := range []int{0, 1, 2, 32, 37, 255} {
			r := run(t, "sh", "-c", `echo "out $MOUNTPOD_POD_UID"; echo err >&2; exit `+strconv.Itoa(code))
			if r.code != code || r.stdout != "out "+string(pod.UID)+"\n" || r.stderr != "err\n" {
				t.Errorf("exit %d: got code %d, stdout %q, stderr %q (want the pod's UID %s)", code, r.code, r.stdout, r.stderr, pod.UID)
			}
		}
		if r := run(t, "no-such-tool-xyz"); r.code != shim.ExitNotFound {
			t.Errorf("missing tool in the pod: code %d, stderr %q; want 127", r.code, r.stderr)
		}
	})

	t.Run("the shim alone serves a live exec socket", func(t *testing.T) {
		// A copy of kubelet-exec-shim without its helper: the exec socket
		// path must not need it (the shim proves the pod live itself); the
		// CRI path must (the shim does not link the runtime's client).
		alone := filepath.Join(t.TempDir(), shim.BinaryName)
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(alone, data, 0o755); err != nil {
			t.Fatal(err)
		}
		r := runShim(t, s.env, alone, "run", "--plugin", m.plugin, "--", "sh", "-c", `echo "$MOUNTPOD_POD_UID"`)
		if s.via == mcexec.ViaSocket {
			decisions, stderr := shimLog(r.stderr)
			if r.code != 0 || r.stdout != string(pod.UID)+"\n" {
				t.Fatalf("shim without its helper: code %d, stdout %q, stderr %q; want the pod's UID %s", r.code, r.stdout, stderr, pod.UID)
			}
			checkShimPath(t, decisions, s.id, s.via)
			return
		}
		if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, shim.HelperName) {
			t.Fatalf("shim without its helper, CRI path: code %d, stderr %q; want 125 naming %s", r.code, r.stderr, shim.HelperName)
		}
	})

	t.Run("a file only in the image", func(t *testing.T) {
		r := run(t, "tini", "--version")
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "tini version") {
			t.Fatalf("tini --version through the shim: code %d, %q %q", r.code, r.stdout, r.stderr)
		}
		if r := run(t, "cat", "/proc/1/comm"); r.stdout != "tini\n" {
			t.Fatalf("PID 1 seen through the shim is %q, want tini", r.stdout)
		}
	})

	t.Run("status names the live registration and the path", func(t *testing.T) {
		r := runShim(t, s.env, bin, "status", "-o", "json")
		var sts []shim.Status
		if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || r.code != 0 {
			t.Fatalf("status -o json: code %d, %v: %q %q", r.code, err, r.stdout, r.stderr)
		}
		found := false
		for _, st := range sts {
			if st.Plugin == m.plugin {
				found = true
				if !st.Live || st.PodUID != string(pod.UID) || st.PodName != pod.Name || st.ContainerID != s.id || st.Via != string(s.via) {
					t.Errorf("status of %s = %+v; want live in pod %s, container %s, via %s", m.plugin, st, pod.Name, s.id, s.via)
				}
			}
		}
		if !found {
			t.Errorf("status does not name %s: %+v", m.plugin, sts)
		}
	})

	t.Run("multi-call links run in the pod", func(t *testing.T) {
		r := s.inPod(t, filepath.Join(s.links, "rbd"), "--version")
		if r.code != 0 || !strings.Contains(r.stdout, "ceph version") {
			t.Fatalf("rbd --version through its link: code %d, %q %q", r.code, r.stdout, r.stderr)
		}
		r = s.inPod(t, filepath.Join(s.links, "mount.glusterfs"), "-V")
		if r.code != 0 || !strings.Contains(strings.ToLower(r.stdout+r.stderr), "glusterfs") {
			t.Fatalf("mount.glusterfs -V through its link: code %d, %q %q", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("container stopped runs on the host until it is back", func(t *testing.T) {
		stopContainer(t, bed, s.id)
		// where runs the shim and says where the utility ran; in the pod
		// it checks the path, like run.
		where := func() string {
			r := runShim(t, s.env, bin, "run", "--plugin", m.plugin, "--", "cat", "/proc/1/comm")
			decisions, stderr := shimLog(r.stderr)
			if r.code != 0 {
				return "error " + strconv.Itoa(r.code) + ": " + stderr
			}
			w := strings.TrimSpace(r.stdout)
			if w == "tini" {
				nid := bed.RunningContainerID(t, pod.UID, "mount", time.Minute)
				checkShimPath(t, decisions, nid, s.via)
			}
			return w
		}
		// The kubelet restarts the container soon: the host must be seen
		// in between, and the pod again afterwards.
		err := framework.Poll(context.Background(), "shim runs on the host", 50*time.Millisecond, 20*time.Second,
			func(context.Context) (bool, string, error) {
				w := where()
				return w != "tini" && !strings.HasPrefix(w, "error"), w, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		err = framework.Poll(context.Background(), "shim runs in the restarted container", 250*time.Millisecond, 2*time.Minute,
			func(context.Context) (bool, string, error) {
				w := where()
				return w == "tini", w, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// stopContainer stops a container through CRI.
func stopContainer(t *testing.T, bed *framework.Bed, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bed.CRI(t).StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 2}); err != nil {
		t.Fatal(err)
	}
}

// serveExecAs serves an exec service answering as id, from this test
// process on the node, at name in the registration directory's socket
// directory, until the test ends; it returns the socket relative to the
// registration directory.
func serveExecAs(t *testing.T, bed *framework.Bed, name string, id execserver.Identity) string {
	t.Helper()
	rel := execclient.SocketDir + "/" + name
	execservertest.Serve(t, filepath.Join(bed.Env.RegistrationDir, rel), execserver.Config{Identity: id})
	return rel
}
