//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// The rbd user story on real parts: a single-node Ceph in its own pod
// (test/images/ceph-server), the rbd mount pod of deploy/rbd with the
// cluster's address and a client keyring from a Secret at /etc/ceph (as
// users deploy Ceph clients), and rbd run in it through the resolver and
// through kubelet-exec-shim, on both paths. No key is ever in an argv.
// `rbd map` is not proven: this kernel has neither the rbd nor the nbd
// module.

const (
	rbdPlugin    = "kubernetes.io/rbd"
	rbdSelect    = "app.kubernetes.io/instance=rbd-mountpod"
	cephClientID = "mountcontainers"
	// rbdSecret holds ceph.conf, the client's keyring and a keyring of the
	// same client with another key (the wrong-key case).
	rbdSecret = "rbd-ceph-client"
)

type cephEnv struct {
	bed *framework.Bed
	ns  string
	pod corev1.Pod // the rbd mount pod
	id  string     // its container
	dir string     // under the kubelet root: seen at the same path in the mount pod
}

func TestCephRBD(t *testing.T) {
	bed := framework.Current(t)
	c := setupCeph(t, bed)
	for _, mode := range execModes {
		t.Run("ThroughTheResolver/"+string(mode), func(t *testing.T) { c.testResolver(t, mode) })
	}
	shimBin := buildShim(t)
	for _, mode := range execModes {
		t.Run("ThroughTheShim/"+string(mode), func(t *testing.T) { c.testShim(t, shimBin, mode) })
	}
}

// cephServer is a running Ceph server pod and what it exported for the
// client cephClientID.
type cephServer struct {
	ns       string
	conf     string // ceph.conf: fsid and mon_host
	keyring  string // the client's keyring
	key      string // the client's bare key
	otherKey string // a valid key that is not the client's
	adminKey string // client.admin's bare key (the CSI controller's)
}

// startCephServer builds and imports the Ceph server image (cached by its
// inputs) and starts the server pod in a namespace of its own.
func startCephServer(t *testing.T, bed *framework.Bed) *cephServer {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	run(t, 15*time.Minute, filepath.Join(root, "test/bed/images.sh"), "build", "ceph-server",
		filepath.Join(root, "test/images/ceph-server/Dockerfile"), filepath.Join(root, "test/images/ceph-server"))
	run(t, 3*time.Minute, filepath.Join(root, "test/bed/images.sh"), "import", "ceph-server")
	s := &cephServer{ns: bed.CreateNamespace(t, "ceph")}

	start := time.Now()
	bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: ceph-server
  namespace: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 15
  containers:
    - name: server
      image: localhost/mountcontainers/ceph-server:dev
      imagePullPolicy: Never
      env:
        - {name: CEPH_MON_IP, value: %q}
        - {name: CEPH_CLIENT, value: %s}
      readinessProbe:
        exec: {command: [test, -f, /run/ceph-ready]}
        periodSeconds: 1
      volumeMounts:
        - {name: data, mountPath: /var/lib/ceph}
        - {name: export, mountPath: /export}
  volumes:
    - {name: data, emptyDir: {}}
    - {name: export, emptyDir: {}}
`, s.ns, bed.Env.NodeIP, cephClientID))
	bed.WaitPod(t, s.ns, "ceph-server", true, 4*time.Minute)
	t.Logf("Ceph cluster HEALTH_OK, its pod Ready, %s after the pod was created", time.Since(start).Round(time.Millisecond))

	// The client's files, as an administrator hands them to a node.
	s.conf = bed.MustExec(t, s.ns, "ceph-server", "server", "cat", "/export/ceph.conf")
	s.keyring = bed.MustExec(t, s.ns, "ceph-server", "server", "cat", "/export/ceph.client."+cephClientID+".keyring")
	s.key = strings.TrimSpace(bed.MustExec(t, s.ns, "ceph-server", "server", "cat", "/export/client."+cephClientID+".key"))
	s.otherKey = strings.TrimSpace(bed.MustExec(t, s.ns, "ceph-server", "server", "ceph-authtool", "--gen-print-key"))
	s.adminKey = strings.TrimSpace(bed.MustExec(t, s.ns, "ceph-server", "server", "cat", "/export/client.admin.key"))
	if !strings.Contains(s.keyring, "[client."+cephClientID+"]") || !strings.Contains(s.conf, "mon_host") || s.otherKey == "" || s.key == "" || s.adminKey == "" || !strings.Contains(s.keyring, s.key) {
		t.Fatalf("exports: ceph.conf %q, keyring %d bytes, key %d bytes, another key %q", s.conf, len(s.keyring), len(s.key), s.otherKey)
	}
	return s
}

// setupCeph starts the Ceph server pod, makes the client Secret from what it
// exports, and starts the rbd mount pod with the Secret at /etc/ceph.
func setupCeph(t *testing.T, bed *framework.Bed) *cephEnv {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	srv := startCephServer(t, bed)
	c := &cephEnv{bed: bed, ns: srv.ns}
	otherKey := srv.otherKey
	applyMountpodNamespace(t, bed, root)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: rbdSecret, Namespace: mountpodNS},
		StringData: map[string]string{
			"ceph.conf": srv.conf,
			"ceph.client." + cephClientID + ".keyring": srv.keyring,
			"wrong.keyring": fmt.Sprintf("[client.%s]\n\tkey = %s\n", cephClientID, otherKey),
		},
	}
	if _, err := bed.Client.CoreV1().Secrets(mountpodNS).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bed.Client.CoreV1().Secrets(mountpodNS).Delete(context.Background(), rbdSecret, metav1.DeleteOptions{})
	})

	overlay := rbdOverlay(t, bed, root)
	start := time.Now()
	bed.ApplyKustomize(t, overlay)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if r := bed.RunKubectl(ctx, "", "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-k", overlay); r.Err != nil {
			t.Logf("delete rbd mount pod: %v", r.Err)
		}
	})
	c.pod = bed.WaitPodsBySelector(t, mountpodNS, rbdSelect, 1, true, 2*time.Minute)[0]
	if err := framework.Poll(context.Background(), "the rbd registration", 200*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			reg, ok, err := registration.Read(bed.Env.RegistrationDir, rbdPlugin)
			return ok && err == nil && reg.PodUID == string(c.pod.UID), fmt.Sprintf("%+v %v %v", reg, ok, err), nil
		}); err != nil {
		t.Fatal(err)
	}
	c.id = bed.RunningContainerID(t, c.pod.UID, "mount", 30*time.Second)
	t.Logf("rbd mount pod from deploy/rbd ready and registered in %s", time.Since(start).Round(time.Millisecond))
	// The key reaches the pod as a file of the Secret, never as an
	// argument or an environment variable of the pod.
	for _, e := range c.pod.Spec.Containers[0].Env {
		if strings.Contains(e.Value, strings.TrimSpace(otherKey)) || strings.Contains(e.Value, "key =") {
			t.Fatalf("env %s of the mount pod holds a key", e.Name)
		}
	}

	c.dir = filepath.Join(bed.Env.KubeletRoot, "ceph-e2e-"+c.ns)
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(c.dir) })
	return c
}

// rbdOverlay writes an overlay of the real deploy/rbd that points it at
// the bed's paths (as test/demo/manifests.sh does for deploy/glusterfs),
// runs the locally built image, and mounts the client Secret at /etc/ceph.
func rbdOverlay(t *testing.T, bed *framework.Bed, root string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rbd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, filepath.Join(root, "deploy/rbd"))
	if err != nil {
		t.Fatal(err)
	}
	scopeParent := bed.Env.Vars["BED_SCOPE_PARENT"]
	if scopeParent == "" {
		scopeParent = "mountcontainers-bed"
	}
	img := bed.Env.MountpodImage
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
images:
  - name: localhost/mountcontainers/mountpod
    newName: %[2]s
    newTag: %[3]s
patches:
  - target: {kind: DaemonSet, name: rbd-mountpod}
    patch: |-
      - {op: replace, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
      - {op: test, path: /spec/template/spec/volumes/0/name, value: kubelet-dir}
      - {op: replace, path: /spec/template/spec/volumes/0/hostPath/path, value: %[4]s}
      # deploy/rbd's strategic merge puts its own entries first.
      - {op: test, path: /spec/template/spec/containers/0/volumeMounts/1/name, value: kubelet-dir}
      - {op: replace, path: /spec/template/spec/containers/0/volumeMounts/1/mountPath, value: %[4]s}
      - {op: test, path: /spec/template/spec/containers/0/env/6/name, value: MOUNTPOD_REGISTRATION_DIR}
      - {op: replace, path: /spec/template/spec/containers/0/env/6/value, value: %[5]s}
      - {op: test, path: /spec/template/spec/volumes/3/name, value: lib-modules}
      - {op: replace, path: /spec/template/spec/volumes/3/hostPath/path, value: %[6]s/lib-modules}
      - {op: test, path: /spec/template/spec/containers/0/env/9/name, value: MOUNTPOD_SCOPE_PARENT}
      - {op: replace, path: /spec/template/spec/containers/0/env/9/value, value: %[7]s}
      - {op: test, path: /spec/template/spec/volumes/5/name, value: systemd-run}
      - {op: replace, path: /spec/template/spec/volumes/5/hostPath/path, value: %[6]s/run-systemd}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}}
      - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_PORT, value: %[8]q}}
      # The cluster's address and the client's keyring, as users hand them
      # to Ceph clients: files of a Secret, where rbd looks for them.
      - {op: add, path: /spec/template/spec/volumes/-, value: {name: ceph-client, secret: {secretName: %[9]s, defaultMode: 0400}}}
      - {op: add, path: /spec/template/spec/containers/0/volumeMounts/-, value: {name: ceph-client, mountPath: /etc/ceph, readOnly: true}}
`, base, img[:strings.LastIndex(img, ":")], img[strings.LastIndex(img, ":")+1:], bed.Env.KubeletRoot, bed.Env.RegistrationDir,
		bed.Env.BedDir, scopeParent, bed.Env.Vars["API_PORT"], rbdSecret)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rbdArgs is how every command names the client: its keyring and the
// monitors come from /etc/ceph.
var rbdArgs = []string{"--id", cephClientID}

// testResolver runs the rbd commands in the mount pod through the
// resolver in one exec mode, and asserts the path each took.
func (c *cephEnv) testResolver(t *testing.T, mode mcexec.ExecMode) {
	r := mcexec.NewResolver(mcexec.Options{Dir: c.bed.Env.RegistrationDir, Endpoint: c.bed.Env.CRIEndpoint, ExecMode: mode})
	defer r.Close()
	e, err := r.For(rbdPlugin)
	if err != nil {
		t.Fatal(err)
	}
	via := viaOf(t, mode)
	x := &pathCheck{Exec: e}
	rbd := func(t *testing.T, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		start := time.Now()
		out, err := x.CommandContext(ctx, "rbd", slices.Concat(rbdArgs, args)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rbd %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("rbd %s: %s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		return string(out)
	}
	img := "rbd/e2e-" + string(mode)
	rbd(t, "create", "--size", "64", img)
	if out := rbd(t, "info", img); !strings.Contains(out, "size 64 MiB") {
		t.Errorf("rbd info %s: %q, want size 64 MiB", img, out)
	}
	rbd(t, "resize", "--size", "128", img)
	if out := rbd(t, "info", img); !strings.Contains(out, "size 128 MiB") {
		t.Errorf("rbd info after resize: %q, want size 128 MiB", out)
	}
	rbd(t, "snap", "create", img+"@s1")
	if out := rbd(t, "snap", "ls", img); !strings.Contains(out, "s1") {
		t.Errorf("rbd snap ls: %q, want s1", out)
	}
	rbd(t, "snap", "rm", img+"@s1")
	if out := rbd(t, "snap", "ls", img); strings.Contains(out, "s1") {
		t.Errorf("rbd snap ls after rm: %q", out)
	}

	// import and export of 64 MiB, through a directory the pod sees at the
	// same path as the host (ExecSync carries no stdin).
	in, out := filepath.Join(c.dir, string(mode)+".in"), filepath.Join(c.dir, string(mode)+".out")
	want := writeRandom(t, in, 64<<20)
	imported := img + "-import"
	rbd(t, "import", in, imported)
	rbd(t, "export", imported, out)
	if got := fileSHA256(t, out); got != want {
		t.Errorf("export of %s: sha256 %s, imported %s", imported, got, want)
	}
	bench := rbd(t, "bench", "--io-type", "write", "--io-size", "4M", "--io-total", "384M", imported)
	if !strings.Contains(bench, "elapsed:") {
		t.Errorf("rbd bench: %q, want its summary", bench)
	}
	t.Logf("rbd bench: %s", lastLine(bench))
	rbd(t, "rm", imported)
	rbd(t, "rm", img)
	if ls := rbd(t, "ls", "rbd"); strings.Contains(ls, "e2e-"+string(mode)) {
		t.Errorf("rbd ls after rm: %q", ls)
	}

	// A wrong key: rbd's own exit code and message.
	cmd := x.Command("rbd", "--id", cephClientID, "--keyring", "/etc/ceph/wrong.keyring", "ls", "rbd")
	wout, err := cmd.CombinedOutput()
	var ee utilexec.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 13 || !strings.Contains(string(wout), "Permission denied") {
		t.Errorf("rbd ls with a wrong key: %v, %q; want exit 13 and Permission denied", err, wout)
	}
	x.verify(t, c.id, via)
}

// testShim runs rbd through kubelet-exec-shim, as a program that only
// execs a command would, in one exec mode.
func (c *cephEnv) testShim(t *testing.T, bin string, mode mcexec.ExecMode) {
	env := []string{
		"CONTAINER_RUNTIME_ENDPOINT=" + c.bed.Env.CRIEndpoint,
		shim.EnvRegistrationDir + "=" + c.bed.Env.RegistrationDir,
		shim.EnvExecMode + "=" + string(mode),
		shim.EnvVerbose + "=1",
	}
	via := viaOf(t, mode)
	img := "rbd/e2e-shim-" + string(mode)
	rbd := func(t *testing.T, args ...string) shimResult {
		t.Helper()
		r := runShim(t, env, bin, slices.Concat([]string{"run", "--plugin", rbdPlugin, "--", "rbd"}, rbdArgs, args)...)
		var decisions []string
		decisions, r.stderr = shimLog(r.stderr)
		checkShimPath(t, decisions, c.id, via)
		return r
	}
	for _, args := range [][]string{{"create", "--size", "64", img}, {"info", img}, {"rm", img}} {
		if r := rbd(t, args...); r.code != 0 {
			t.Fatalf("shim rbd %v: code %d, %q %q", args, r.code, r.stdout, r.stderr)
		} else if args[0] == "info" && !strings.Contains(r.stdout, "size 64 MiB") {
			t.Errorf("shim rbd info: %q, want size 64 MiB on the shim's stdout", r.stdout)
		}
	}
	r := rbd(t, "--keyring", "/etc/ceph/wrong.keyring", "ls", "rbd")
	if r.code != 13 || !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("shim rbd with a wrong key: code %d, stderr %q; want 13 and Permission denied", r.code, r.stderr)
	}
}

// writeRandom writes n random bytes to path and returns their sha256.
func writeRandom(t *testing.T, path string, n int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
