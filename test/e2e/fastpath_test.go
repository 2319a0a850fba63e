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
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestFastPath runs the mount-pod image's exec service (mountpod serve) on
// the bed and checks the resolver's fast path against CRI ExecSync.
func TestFastPath(t *testing.T) {
	bed := framework.Current(t)
	m, pod := startMountPod(t, bed, "fastpath")
	reg, ok, err := registration.Read(bed.Env.RegistrationDir, m.plugin)
	if err != nil || !ok {
		t.Fatalf("registration: %v, %v", ok, err)
	}
	if reg.ExecSocket != execclient.SocketName(string(pod.UID)) {
		t.Fatalf("the registration advertises exec socket %q, want %q", reg.ExecSocket, execclient.SocketName(string(pod.UID)))
	}
	sock := filepath.Join(bed.Env.RegistrationDir, reg.ExecSocket)
	viaSocket := m.executor(t, mcexec.Options{ExecMode: mcexec.ModeSocket})
	viaCRI := m.executor(t, mcexec.Options{ExecMode: mcexec.ModeCRI})

	t.Run("decision", func(t *testing.T) {
		d, err := m.executor(t, mcexec.Options{}).Resolve(context.Background())
		if err != nil || d.Via != mcexec.ViaSocket || d.Socket != sock {
			t.Fatalf("auto decision: %s, %v; want via the exec socket %s", d, err, sock)
		}
	})

	t.Run("same results as ExecSync", func(t *testing.T) {
		type outcome struct {
			out, errOut string
			code        int
			notFound    bool
		}
		runIn := func(x *mcexec.Exec, argv []string, dir string, env []string) outcome {
			cmd := x.Command(argv[0], argv[1:]...)
			if dir != "" {
				cmd.SetDir(dir)
			}
			if env != nil {
				cmd.SetEnv(env)
			}
			var stderr bytes.Buffer
			cmd.SetStderr(&stderr)
			out, err := cmd.Output()
			o := outcome{out: string(out), errOut: stderr.String()}
			switch {
			case err == utilexec.ErrExecutableNotFound: //nolint:errorlint // as mount-utils compares
				o.notFound, o.errOut = true, ""
			case err != nil:
				o.code = exitStatus(t, err)
			}
			return o
		}
		for _, tc := range []struct {
			name string
			argv []string
			dir  string
			env  []string
		}{
			{"true", []string{"true"}, "", nil},
			{"exit codes and both streams", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, "", nil},
			{"exit 255", []string{"sh", "-c", "exit 255"}, "", nil},
			{"killed by a signal", []string{"sh", "-c", "kill -9 $$"}, "", nil},
			{"missing", []string{"no-such-tool-mc"}, "", nil},
			{"missing absolute", []string{"/no/such/tool"}, "", nil},
			{"dir", []string{"pwd"}, "/usr", nil},
			{"env", []string{"sh", "-c", `echo "$A:$B"`}, "", []string{"A=1", "B=x y", "PATH=/usr/bin:/bin"}},
			{"missing with env", []string{"no-such-tool-mc"}, "", []string{"PATH=/usr/bin:/bin"}},
			{"mount tools", []string{"sh", "-c", "command -v mount.glusterfs mkfs.ext4 rbd"}, "", nil},
			{"mkfs of nothing", []string{"mkfs.ext4", "/no/such/device"}, "", nil},
			{"container's hostname", []string{"cat", "/etc/hostname"}, "", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s, c := runIn(viaSocket, tc.argv, tc.dir, tc.env), runIn(viaCRI, tc.argv, tc.dir, tc.env)
				if s != c {
					t.Fatalf("exec socket: %+v\nExecSync:    %+v", s, c)
				}
			})
		}
	})

	t.Run("stdin round trip", func(t *testing.T) {
		data := bytes.Repeat([]byte("mountcontainers\n"), 64<<10) // 1 MiB
		cmd := viaSocket.Command("sha256sum")
		cmd.SetStdin(bytes.NewReader(data))
		out, err := cmd.Output()
		host := exec.Command("sha256sum")
		host.Stdin = bytes.NewReader(data)
		want, _ := host.Output()
		if err != nil || string(out) != string(want) {
			t.Fatalf("sha256sum of stdin in the pod: %q, %v; on the host %q", out, err, want)
		}
	})

	t.Run("a daemon left behind does not hold the call", func(t *testing.T) {
		start := time.Now()
		out, err := viaSocket.Command("sh", "-c", "sleep 300 & echo started").CombinedOutput()
		if err != nil || string(out) != "started\n" {
			t.Fatalf("%q, %v", out, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %s", d)
		}
		viaSocket.Command("pkill", "-x", "sleep").Run() //nolint:errcheck // clean up
	})

	t.Run("non-root peer refused", func(t *testing.T) {
		// Open the file modes so that only SO_PEERCRED stands in the way.
		for _, p := range []string{filepath.Dir(sock), sock} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			mode := fi.Mode().Perm()
			os.Chmod(p, 0o777)
			t.Cleanup(func() { os.Chmod(p, mode) })
		}
		// curl as uid: the HTTP status it got ("000" for none), its exit
		// code and its error message.
		curl := func(uid uint32) (status string, code int, msg string) {
			cmd := exec.Command("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
				"--http2-prior-knowledge", "--unix-socket", sock, "http://localhost/")
			if uid != 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				code = ee.ExitCode()
			case err != nil:
				t.Fatalf("run curl: %v", err)
			}
			return stdout.String(), code, strings.TrimSpace(stderr.String())
		}
		// The control: root gets an HTTP/2 answer (an error status, since
		// a GET is no gRPC call), so the socket, the modes and curl work.
		if status, code, msg := curl(0); code != 0 || status == "000" || status == "" {
			t.Fatalf("curl as root: HTTP %q, exit %d (%s); want an HTTP answer", status, code, msg)
		}
		// uid 65534 connects (the modes allow it) and gets no answer at
		// all: the service closes the connection at once. Which error curl
		// reports depends on when it notices (7, 16, 52, 55 and 56 were
		// all seen); what proves the refusal is no HTTP answer here and
		// the service's own log line below, naming uid 65534 (a connection
		// the file modes stopped would never reach it).
		status, code, msg := curl(65534)
		if status != "000" || code == 0 {
			t.Errorf("curl as uid 65534: HTTP %q, exit %d (%s); want no answer and a failure", status, code, msg)
		}
		t.Logf("curl as uid 65534: exit %d: %s", code, msg)
		err := framework.Poll(context.Background(), "refusal logged", 250*time.Millisecond, 20*time.Second,
			func(ctx context.Context) (bool, string, error) {
				logs := bed.Kubectl(t, "-n", m.ns, "logs", pod.Name)
				return strings.Contains(logs, "refusing connection") && strings.Contains(logs, "uid 65534"), "curl said: " + msg, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("stale socket of a replaced pod is never used", func(t *testing.T) {
		// Another exec service answers as a pod that is not the registered
		// one (the replaced pod, old UID) at a socket the registration is
		// made to advertise.
		stale := reg
		stale.PodUID = "00000000-1111-4222-8333-444444444444"
		stalePath := filepath.Join(bed.Env.RegistrationDir, execclient.SocketName(stale.PodUID))
		defer execservertest.Serve(t, stalePath, execserver.Config{Identity: execserver.Identity{
			PodNamespace: stale.PodNamespace, PodName: stale.PodName, PodUID: stale.PodUID, ContainerName: stale.ContainerName,
		}})()
		forged := reg
		forged.ExecSocket = execclient.SocketName(stale.PodUID)
		// The mount pod restores its registration at once: resolve right
		// after writing, and accept either placement but never the stale
		// socket.
		for range 20 {
			if err := registration.Write(bed.Env.RegistrationDir, m.plugin, forged); err != nil {
				t.Fatal(err)
			}
			d, err := m.executor(t, mcexec.Options{}).Resolve(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if d.Via == mcexec.ViaSocket && d.Socket == stalePath {
				t.Fatalf("the stale socket was used: %s", d)
			}
		}
		// The mount pod puts its own socket back.
		err = framework.Poll(context.Background(), "registration restored with the pod's own socket", 50*time.Millisecond, 30*time.Second,
			func(context.Context) (bool, string, error) {
				r, ok, err := registration.Read(bed.Env.RegistrationDir, m.plugin)
				if err != nil || !ok {
					return false, fmt.Sprintf("%v %v", ok, err), nil
				}
				return r == reg, "socket " + r.ExecSocket, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	})

	t.Run("impostor answering as the registered pod is never used", func(t *testing.T) {
		// Another exec service, root like the mount pod's, answers exactly
		// as the registered pod and container, at a socket the registration
		// is made to advertise. What it says is right; who it is (a process
		// of this test, on the node, in no container) is not: the resolver
		// checks the serving process's cgroups.
		//
		// The forged registration lives in a registration directory of its
		// own, which no mount pod watches: every decision sees it (in the
		// bed's directory the mount pod would restore its file, a race).
		dir, err := os.MkdirTemp(filepath.Dir(bed.Env.RegistrationDir), "impostor-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, execclient.SocketDir), 0o700); err != nil {
			t.Fatal(err)
		}
		impostorPath := filepath.Join(dir, execclient.SocketDir, "impostor.sock")
		defer execservertest.Serve(t, impostorPath, execserver.Config{Identity: execserver.Identity{
			PodNamespace: reg.PodNamespace, PodName: reg.PodName, PodUID: reg.PodUID, ContainerName: reg.ContainerName,
		}})()
		forged := reg
		forged.ExecSocket = execclient.SocketDir + "/impostor.sock"
		if err := registration.Write(dir, m.plugin, forged); err != nil {
			t.Fatal(err)
		}
		r := mcexec.NewResolver(mcexec.Options{Dir: dir, Endpoint: bed.Env.CRIEndpoint})
		t.Cleanup(func() { r.Close() })
		x, err := r.For(m.plugin)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			d, err := x.Resolve(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if d.Via == mcexec.ViaSocket {
				t.Fatalf("decision %d went through a socket: %s", i, d)
			}
			if d.Socket != impostorPath || !strings.Contains(d.ViaReason, "is not in container") {
				t.Fatalf("decision %d: %s; want the impostor's socket %s refused as not in the container", i, d, impostorPath)
			}
			if i == 0 {
				t.Logf("refused: %s", d.ViaReason)
			}
		}
	})

	t.Run("killing the mount pod mid-call returns promptly, then falls back", func(t *testing.T) {
		cmd := viaSocket.Command("sleep", "120")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		id := bed.RunningContainerID(t, pod.UID, "mount", 30*time.Second)
		start := time.Now()
		if _, err := bed.CRI(t).StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err == nil {
			t.Fatal("the call succeeded although the mount pod was killed")
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("the call returned %s after the kill", d)
		}
		bed.Client.CoreV1().Pods(m.ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}) //nolint:errcheck
		// Meanwhile and afterwards, auto mode never fails for want of the
		// socket: it uses ExecSync, the host or the successor's socket.
		x := m.executor(t, mcexec.Options{})
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			d, err := x.Resolve(context.Background())
			if err != nil && !errors.Is(err, mcexec.ErrMismatch) {
				t.Fatalf("decision while the pod is replaced: %v", err)
			}
			if d.Socket == sock && d.Via == mcexec.ViaSocket {
				t.Fatalf("the killed pod's socket is still used: %s", d)
			}
		}
	})
}
