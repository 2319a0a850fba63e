//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/shim"
	"github.com/mountcontainers/mountcontainers/internal/shimtest"
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
	bin, err := shimtest.Build(t.TempDir())
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
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
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

func TestShim(t *testing.T) {
	bed := framework.Current(t)
	if _, err := os.Stat("/usr/bin/tini"); err == nil {
		t.Fatal("the host has /usr/bin/tini: the proof that commands run in the image would be meaningless")
	}
	m, pod := startMountPod(t, bed, "shim")
	bin := buildShim(t)
	env := []string{
		"CONTAINER_RUNTIME_ENDPOINT=" + bed.Env.CRIEndpoint,
		"PLUGIN_CONTAINERS_DIR=" + bed.Env.RegistrationDir,
	}
	run := func(t *testing.T, args ...string) shimResult {
		t.Helper()
		return runShim(t, env, bin, append([]string{"run", "--plugin", m.plugin, "--"}, args...)...)
	}

	t.Run("exit codes and streams in the pod", func(t *testing.T) {
		for _, code := range []int{0, 1, 2, 32, 37, 255} {
			r := run(t, "sh", "-c", `echo "out $POD_UID"; echo err >&2; exit `+strconv.Itoa(code))
			if r.code != code || r.stdout != "out "+string(pod.UID)+"\n" || r.stderr != "err\n" {
				t.Errorf("exit %d: got code %d, stdout %q, stderr %q (want the pod's UID %s)", code, r.code, r.stdout, r.stderr, pod.UID)
			}
		}
		if r := run(t, "no-such-tool-xyz"); r.code != shim.ExitNotFound {
			t.Errorf("missing tool in the pod: code %d, stderr %q; want 127", r.code, r.stderr)
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

	t.Run("status names the live registration", func(t *testing.T) {
		r := runShim(t, env, bin, "status", "-o", "json")
		var sts []shim.Status
		if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || r.code != 0 {
			t.Fatalf("status -o json: code %d, %v: %q %q", r.code, err, r.stdout, r.stderr)
		}
		found := false
		for _, s := range sts {
			if s.Plugin == m.plugin {
				found = true
				if !s.Live || s.PodUID != string(pod.UID) || s.PodName != pod.Name || s.ContainerID == "" {
					t.Errorf("status of %s = %+v; want live in pod %s", m.plugin, s, pod.Name)
				}
			}
		}
		if !found {
			t.Errorf("status does not name %s: %+v", m.plugin, sts)
		}
	})

	t.Run("container stopped runs on the host until it is back", func(t *testing.T) {
		id := bed.RunningContainerID(t, pod.UID, "mount", time.Minute)
		stopContainer(t, bed, id)
		where := func() string {
			r := run(t, "cat", "/proc/1/comm")
			if r.code != 0 {
				return "error " + strconv.Itoa(r.code) + ": " + r.stderr
			}
			return strings.TrimSpace(r.stdout)
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

	t.Run("multi-call links run in the pod, then on the host without recursing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "bin")
		r := runShim(t, env, bin, "install", "--dir", dir, "--plugin", m.plugin, "rbd", "mount.glusterfs")
		if r.code != 0 {
			t.Fatalf("install: %d %s", r.code, r.stderr)
		}
		path := []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
		r = runShim(t, append(env, path...), filepath.Join(dir, "rbd"), "--version")
		if r.code != 0 || !strings.Contains(r.stdout, "ceph version") {
			t.Fatalf("rbd --version through its link: code %d, %q %q", r.code, r.stdout, r.stderr)
		}
		r = runShim(t, append(env, path...), filepath.Join(dir, "mount.glusterfs"), "-V")
		if r.code != 0 || !strings.Contains(strings.ToLower(r.stdout+r.stderr), "glusterfs") {
			t.Fatalf("mount.glusterfs -V through its link: code %d, %q %q", r.code, r.stdout, r.stderr)
		}

		// The pod goes away: the links fall back to the host, which has
		// no rbd or mount.glusterfs, and must not find the shim itself.
		if err := bed.Client.AppsV1().DaemonSets(m.ns).Delete(context.Background(), "mount", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bed.WaitPodGone(t, m.ns, pod.Name, pod.UID, 2*time.Minute)
		for _, tool := range []string{"rbd", "mount.glusterfs"} {
			host, err := exec.LookPath(tool)
			r := runShim(t, append(env, path...), filepath.Join(dir, tool), "--version")
			switch {
			case err == nil && host != filepath.Join(dir, tool):
				t.Logf("the host has %s at %s: exit %d", tool, host, r.code)
			case r.code != shim.ExitNotFound:
				t.Errorf("%s with the pod gone and none on the host: code %d, %q; want 127", tool, r.code, r.stderr)
			}
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
