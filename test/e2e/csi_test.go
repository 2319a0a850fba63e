//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/node/csi/csitest"
	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// envSanityChild carries, to the test binary TestCSI runs again for
// csi-sanity, the configuration of that run (a sanityChild in JSON): a
// process runs one csi-sanity suite, and each exec path gets its own.
const envSanityChild = "MOUNTCONTAINERS_E2E_CSI_SANITY"

// sanityChild is what csi-sanity's process needs to know.
type sanityChild struct {
	Socket, Staging, Target string
	Params                  map[string]string
	// ControllerSecrets go with CreateVolume, DeleteVolume and
	// ValidateVolumeCapabilities, NodeSecrets with NodeStageVolume.
	ControllerSecrets, NodeSecrets map[string]string
}

// TestCSI proves the GlusterFS CSI driver (cmd/csi-driver) on the bed's
// node, with the real mount pod of deploy/glusterfs and the real GlusterFS
// server, once through each exec path, which the driver's log must show
// every staging mount took: csi-sanity's specs (Sanity), the real kubelet's
// calls on a static volume (Volumes), the real external-provisioner's on
// dynamic ones (Provisioning), and deploy/csi/glusterfs applied as it is,
// its DaemonSets restarted under a writer (Deployed). One server and mount
// pod serve all four.
func TestCSI(t *testing.T) {
	if cfg := os.Getenv(envSanityChild); cfg != "" {
		runSanityChild(t, cfg)
		return
	}
	bed := framework.Current(t)
	g := setupGlusterfs(t, bed)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := buildCmd(t, "csi-driver")
	t.Run("Sanity", func(t *testing.T) { g.testCSISanity(t, bin) })
	csiDriver := filepath.Join(root, "deploy/csi/glusterfs/csidriver.yaml")
	bed.ApplyFile(t, csiDriver)
	t.Cleanup(func() { bed.Kubectl(t, "delete", "--ignore-not-found", "-f", csiDriver) })
	t.Run("Volumes", func(t *testing.T) {
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { g.testCSIVolume(t, bin, mode) })
		}
	})
	t.Run("Provisioning", func(t *testing.T) {
		provisioner := csiProvisioner(t, root)
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { g.testCSIProvisioning(t, bin, provisioner, mode) })
		}
	})
	// Last: deleting the deployed driver deletes its CSIDriver object.
	t.Run("Deployed", func(t *testing.T) {
		csiImages(t, root)
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) { g.csiDeployment().testCSIDeployed(t, mode) })
		}
	})
	// The same, the driver and the mount pod installed by helm from
	// charts/mountcontainers.
	t.Run("HelmInstall", func(t *testing.T) {
		csiImages(t, root)
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) {
				d := g.csiDeployment()
				d.helm = true
				d.testCSIDeployed(t, mode)
			})
		}
	})
}

// csiProvisioner returns the external-provisioner's binary, built by
// test/bed/build-sidecars.sh. e2e.sh builds it before the suite starts; a
// run that skipped it builds it now (the script holds a lock, so a build in
// progress is waited for, then found cached).
func csiProvisioner(t *testing.T, root string) string {
	t.Helper()
	start := time.Now()
	// build-sidecars.sh logs, then prints the directory last.
	out := strings.TrimSpace(run(t, 20*time.Minute, filepath.Join(root, "test/bed/build-sidecars.sh")))
	provisioner := filepath.Join(out[strings.LastIndex(out, "\n")+1:], "csi-provisioner")
	if _, err := os.Stat(provisioner); err != nil {
		t.Fatalf("build-sidecars.sh: %v\n%s", err, out)
	}
	t.Logf("csi-provisioner ready %s after the test asked for it", time.Since(start).Round(time.Millisecond))
	return provisioner
}

// testCSISanity runs csi-sanity (kubernetes-csi/csi-test, every spec for
// the capabilities the driver offers) against the driver, its controller
// on, through each exec path; csi-sanity runs in a process of its own (this
// test binary again, envSanityChild), one per path.
func (g *glusterEnv) testCSISanity(t *testing.T, bin string) {
	runCSISanity(t, g.bed, "", sanityChild{Params: map[string]string{"server": g.bed.Env.NodeName, "volume": glusterVolume}},
		func(t *testing.T, logPath, dir string, mode mcexec.ExecMode) string {
			return startCSIDriver(t, bin, logPath, dir, mode, g.bed)
		})
}

// runCSISanity runs csi-sanity with child's parameters and secrets against
// the driver start starts in dir (its socket returned), once through each
// exec path, and asserts from the driver's log that every staging mount
// took that path. name tells the driver's log apart ("" for GlusterFS's).
//
// The exec paths run at once, each with its own driver, directories and
// csi-sanity process (its volumes' names are its own): the calls wait on
// the servers much of the time, and the suite is shorter by one run.
func runCSISanity(t *testing.T, bed *framework.Bed, name string, child sanityChild, start func(t *testing.T, logPath, dir string, mode mcexec.ExecMode) string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, mode := range execModes {
		wg.Go(func() {
			t.Run(string(mode), func(t *testing.T) {
				dir := filepath.Join(bed.Env.KubeletRoot, "plugins", "csi-sanity-"+name+string(mode))
				t.Cleanup(func() { _ = os.RemoveAll(dir) })
				logPath := filepath.Join(bed.Env.LogDir, "csi-driver-sanity-"+name+string(mode)+".log")
				child := child
				child.Socket = start(t, logPath, dir, mode)
				child.Staging, child.Target = filepath.Join(dir, "staging"), filepath.Join(dir, "target")
				cfg, err := json.Marshal(child)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCSI$", "-test.count=1", "-test.v", "-test.timeout=15m")
				cmd.Env = append(os.Environ(), envSanityChild+"="+string(cfg))
				started := time.Now()
				out, err := cmd.CombinedOutput()
				t.Logf("csi-sanity through %s (%s):\n%s", mode, time.Since(started).Round(time.Millisecond), sanityLines(out))
				if err != nil {
					t.Fatalf("csi-sanity through %s: %v\n%s", mode, err, out)
				}
				n := stagedVia(t, logPath, viaOf(t, mode))
				if n == 0 {
					t.Fatalf("the driver's log %s shows no staging mount", logPath)
				}
				t.Logf("%d staging mounts, every one in the mount pod via %s", n, viaOf(t, mode))
			})
		})
	}
}

// runSanityChild is csi-sanity's process.
func runSanityChild(t *testing.T, raw string) {
	var c sanityChild
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("%s: %v", envSanityChild, err)
	}
	cfg := sanity.NewTestConfig()
	cfg.Address = c.Socket
	cfg.StagingPath, cfg.TargetPath = c.Staging, c.Target
	cfg.TestVolumeParameters = c.Params
	if c.ControllerSecrets != nil || c.NodeSecrets != nil {
		// csi-sanity reads them from a YAML file only; JSON is YAML.
		data, err := json.Marshal(sanity.CSISecrets{
			CreateVolumeSecret: c.ControllerSecrets, DeleteVolumeSecret: c.ControllerSecrets,
			ControllerValidateVolumeCapabilitiesSecret: c.ControllerSecrets, NodeStageVolumeSecret: c.NodeSecrets,
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg.SecretsFile = filepath.Join(t.TempDir(), "secrets.yaml")
		if err := os.WriteFile(cfg.SecretsFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg.IdempotentCount = 2
	res := csitest.Sanity(t, cfg)
	if res.Passed == 0 || res.NodeLifecycle == 0 {
		t.Errorf("csi-sanity passed %d specs, %d of them the node's lifecycle; want both above 0", res.Passed, res.NodeLifecycle)
	}
}

// sanityLines keeps csi-sanity's accounting and its failures from its
// output.
func sanityLines(out []byte) string {
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "csi-sanity:") || strings.Contains(l, "skipped ") || strings.Contains(l, "FAIL") || strings.Contains(l, "Ran ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// startCSIDriver starts the CSI driver on the node (not registered with
// the kubelet: csi-sanity is its only client), its controller on, its
// commands placed in mode, logging to logPath; it stops it when the test
// ends and returns its socket.
func startCSIDriver(t *testing.T, bin, logPath, dir string, mode mcexec.ExecMode, bed *framework.Bed) string {
	t.Helper()
	sock := filepath.Join(dir, "csi.sock")
	startDriverProcess(t, bin, logPath, sock, "--filesystem", "glusterfs", "--node-id", bed.Env.NodeName,
		"--kubelet-dir", bed.Env.KubeletRoot, "--endpoint", sock, "--register=false", "--controller",
		"--work-dir", filepath.Join(dir, "controller"), "--allowed-servers", bed.Env.HostName,
		"--registration-dir", bed.Env.RegistrationDir, "--runtime-endpoint", bed.Env.CRIEndpoint,
		"--exec-mode", string(mode), "--log-format", "json", "--log-level", "debug")
	return sock
}

// startProvisioningDriver starts the GlusterFS CSI driver, its controller
// on, registered with the kubelet, its commands placed in mode, and the
// external-provisioner beside it, both logging to the bed's log directory
// under name; it stops them when the test ends and returns the driver's
// log.
func startProvisioningDriver(t *testing.T, bed *framework.Bed, bin, provisioner, name string, mode mcexec.ExecMode) string {
	t.Helper()
	return startProvisioner(t, bed, bin, provisioner, name, mode, csiGlusterDriver, "--filesystem", "glusterfs", "--allowed-servers", bed.Env.HostName)
}

// startProvisioner starts the CSI driver of driver with args (its file
// system, ...), its controller on, registered with the kubelet, its
// commands placed in mode, and the external-provisioner beside it, both
// logging to the bed's log directory under name; it stops them when the
// test ends and returns the driver's log.
func startProvisioner(t *testing.T, bed *framework.Bed, bin, provisioner, name string, mode mcexec.ExecMode, driver string, args ...string) string {
	t.Helper()
	logPath := filepath.Join(bed.Env.LogDir, "csi-driver-"+name+".log")
	sock := filepath.Join(bed.Env.KubeletRoot, "plugins", driver, "csi.sock")
	startDriverProcess(t, bin, logPath, sock, append(args,
		"--node-id", bed.Env.NodeName, "--kubelet-dir", bed.Env.KubeletRoot, "--controller",
		"--registration-dir", bed.Env.RegistrationDir,
		"--runtime-endpoint", bed.Env.CRIEndpoint, "--exec-mode", string(mode), "--log-format", "json", "--log-level", "debug")...)
	waitCSINode(t, bed, driver)
	startSidecar(t, provisioner, filepath.Join(bed.Env.LogDir, "csi-provisioner-"+name+".log"),
		"--csi-address="+sock, "--kubeconfig="+bed.Env.Kubeconfig, "--leader-election=false", "--timeout=2m", "--v=3")
	return logPath
}

// startDriverProcess starts bin with args, logging to logPath, waits until
// its socket sock is there, and stops it (SIGTERM) when the test ends.
func startDriverProcess(t *testing.T, bin, logPath, sock string, args ...string) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("csi-driver ended with %v (log %s)", err, logPath)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("csi-driver did not end within 30 s of SIGTERM (log %s)", logPath)
		}
		logf.Close()
	})
	if err := framework.Poll(context.Background(), "the CSI driver's socket "+sock, 100*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			_, err := os.Stat(sock)
			return err == nil, fmt.Sprint(err), nil
		}); err != nil {
		t.Fatalf("%v (log %s)", err, logPath)
	}
}

// stagedVia returns how many staging mounts the driver's log records, and
// fails t unless every one ran via via.
func stagedVia(t *testing.T, logPath string, via mcexec.Via) int {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return recordsVia(t, logPath, data, "staged", via)
}

// ranVia returns how many runs of a utility (the CephFS controller's
// ceph tool) the driver's log records, and fails t unless every one ran
// via via.
func ranVia(t *testing.T, logPath string, via mcexec.Via) int {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return recordsVia(t, logPath, data, "ran", via)
}

// recordsVia returns how many records msg the driver's log (JSON, from
// where) holds that did work (a staging mount found in place did none), and
// fails t unless every one of them says it ran via via.
func recordsVia(t *testing.T, where string, log []byte, msg string, via mcexec.Via) int {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct{ Msg, Message, Dir, Command string }
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Msg != msg {
			continue
		}
		if strings.Contains(r.Message, "is already mounted") {
			continue
		}
		n++
		if !strings.Contains(r.Message, "via "+string(via)) {
			t.Errorf("%s: %s %s%s did not run via %s: %s", where, msg, r.Dir, r.Command, via, r.Message)
		}
	}
	return n
}

// callTimes returns how long (ms) each successful call of a CSI method
// took, from the driver's log.
func callTimes(t *testing.T, logPath, method string) []float64 {
	t.Helper()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var took []float64
	for _, line := range strings.Split(string(data), "\n") {
		var r struct {
			Msg, Method, Code string
			TookMs            float64
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Msg == "csi call" && strings.HasSuffix(r.Method, "/"+method) && r.Code == "OK" {
			took = append(took, r.TookMs)
		}
	}
	return took
}

// buildCmd builds ./cmd/NAME and returns the binary.
func buildCmd(t *testing.T, name string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

// csiGlusterDriver is the GlusterFS CSI driver's name
// (deploy/csi/glusterfs/csidriver.yaml).
const csiGlusterDriver = "glusterfs.mountcontainers.io"

// testCSIVolume registers the driver with the real kubelet through its
// plugins_registry and runs a workload on a PersistentVolume of it: the
// kubelet stages and publishes the volume (a read-write mount and a
// read-only subPath), the staging mount is made in the mount pod (asserted
// from the driver's log), a killed FUSE daemon's mount comes back inside the
// running containers, and after the pod and its claim are deleted nothing
// of the volume is left on the node.
func (g *glusterEnv) testCSIVolume(t *testing.T, bin string, mode mcexec.ExecMode) {
	bed := g.bed
	ctx := context.Background()
	logPath := filepath.Join(bed.Env.LogDir, "csi-driver-"+string(mode)+".log")
	pluginDir := filepath.Join(bed.Env.KubeletRoot, "plugins", csiGlusterDriver)
	startRegisteredCSIDriver(t, bin, logPath, pluginDir, mode)
	waitCSINode(t, bed, csiGlusterDriver)

	name := "csi-" + string(mode)
	sub := "sub-" + string(mode)
	bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %[1]s-%[2]s
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: %[2]s, name: %[1]s}
  csi:
    driver: %[3]s
    volumeHandle: %[2]s-%[1]s
    volumeAttributes: {server: %[4]q, volume: %[5]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: %[1]s-%[2]s
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
    - name: prepare
      image: %[6]s
      imagePullPolicy: Never
      command: ["sh", "-c", "mkdir -p /data/%[7]s && echo marker > /data/%[7]s/marker"]
      volumeMounts:
        - {name: data, mountPath: /data}
  containers:
    - name: main
      image: %[6]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /data}
    - name: reader
      image: %[6]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /sub, subPath: %[7]s, readOnly: true}
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: %[1]s}
`, name, g.ns, csiGlusterDriver, bed.Env.NodeName, glusterVolume, bed.Env.BaseImage, sub))
	start := time.Now()
	p := bed.WaitPod(t, g.ns, name, true, 3*time.Minute)
	t.Logf("pod %s running %s after apply", name, time.Since(start).Round(time.Millisecond))
	staging := csiStagingMount(t, bed.Env.KubeletRoot, csiGlusterDriver)
	// Figures (BENCHMARKS.md), not verdicts: each call against its raw
	// operation in the same run.
	stage, publish := callTimes(t, logPath, "NodeStageVolume"), callTimes(t, logPath, "NodePublishVolume")
	rawMount, rawBind := g.rawMountTimes(t, 3)
	t.Logf("through %s: NodeStageVolume took %v ms, NodePublishVolume %v ms (the driver's log); raw, the same mount(8) in the mount pod's namespace %v ms, a bind on the node %v ms: ratios %.2f and %.2f (medians)", mode,
		stage, publish, rawMount, rawBind, median(stage)/median(rawMount), median(publish)/median(rawBind))
	if n := stagedVia(t, logPath, viaOf(t, mode)); n != 1 {
		t.Fatalf("the driver's log %s shows %d staging mounts; want 1, via %s", logPath, n, viaOf(t, mode))
	}
	data := containerMount(t, bed, g.ns, name, "main", "/data")
	if node := hostMountDev(t, staging); data.dev != node || data.fstype != "fuse.glusterfs" || data.ro {
		t.Fatalf("the workload's /data is %+v; want the staging mount %s (device %s), read-write", data, staging, node)
	}
	if ro := containerMount(t, bed, g.ns, name, "reader", "/sub"); ro.dev != data.dev || ro.root != "/"+sub || !ro.ro {
		t.Fatalf("the reader's /sub is %+v; want device %s, root /%s, read-only", ro, data.dev, sub)
	}

	// The FUSE daemon dies: the mount pod makes the staging mount again
	// and puts it back inside the running containers.
	pids := fuseProcesses(t, staging)
	if len(pids) != 1 {
		t.Fatalf("glusterfs processes serving %s: %v; want one", staging, pids)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := framework.Poll(ctx, "the workload writes its volume again", 200*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			_, se, err := bed.Exec(ctx, 20*time.Second, g.ns, name, "main", "sh", "-c", "echo after > /data/after-"+string(mode))
			return err == nil, se, nil
		}); err != nil {
		t.Fatal(err)
	}
	t.Logf("daemon %d killed: the workload wrote its volume again %s later", pids[0], time.Since(killed).Round(time.Millisecond))
	if now := fuseProcesses(t, staging); len(now) != 1 || now[0] == pids[0] {
		t.Errorf("glusterfs processes serving %s after the kill of %d: %v; want one new", staging, pids[0], now)
	}
	data = containerMount(t, bed, g.ns, name, "main", "/data")
	if node := hostMountDev(t, staging); data.dev != node {
		t.Errorf("the workload's /data after the recovery is %+v; want the new staging mount (device %s)", data, node)
	}
	if got := strings.TrimSpace(bed.MustExec(t, g.ns, name, "reader", "cat", "/sub/marker")); got != "marker" {
		t.Errorf("the reader's subPath shows %q after the recovery", got)
	}
	if ro := containerMount(t, bed, g.ns, name, "reader", "/sub"); ro.dev != data.dev || ro.root != "/"+sub || !ro.ro {
		t.Errorf("the reader's /sub after the recovery is %+v; want device %s, root /%s, read-only", ro, data.dev, sub)
	}
	if restarts := podRestarts(t, bed, g.ns, name); restarts != 0 {
		t.Errorf("the workload's containers restarted %d times", restarts)
	}
	// The node's own bind of the published target, from which the kubelet
	// binds a container it starts (a restarted one), is the new mount too.
	assertPublishedIs(t, bed, csiGlusterDriver, staging)

	// Deleted: nothing of the volume is left on the node.
	deleteStaticCSIVolume(t, bed, g.ns, name, p, csiGlusterDriver)
	if es, err := mountrecord.List(filepath.Join(bed.Env.RegistrationDir, mountrecord.Dir)); err != nil || hasRecord(es, staging) {
		t.Errorf("the mount record of %s is left: %+v, %v", staging, es, err)
	}
}

// rawMountTimes times the raw operations behind NodeStage and
// NodePublish, n times each: the GlusterFS mount helper run directly in the
// mount pod's mount namespace (nsenter; the node has no GlusterFS client),
// without the driver, the resolver, an exec path or a scope, and a bind of
// a directory on the node (mount --bind). Milliseconds.
func (g *glusterEnv) rawMountTimes(t *testing.T, n int) (mountMs, bindMs []float64) {
	t.Helper()
	mp := g.mountPod(t)
	pid := containerPID(t, g.bed.RunningContainerID(t, mp.UID, mp.Spec.Containers[0].Name, time.Minute))
	dir, err := os.MkdirTemp(filepath.Join(g.bed.Env.KubeletRoot, "plugins"), "raw-mount-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	src, target := filepath.Join(dir, "src"), filepath.Join(dir, "target")
	for _, d := range []string{src, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	timed := func(name string, args ...string) float64 {
		start := time.Now()
		run(t, time.Minute, name, args...)
		return float64(time.Since(start).Microseconds()) / 1000
	}
	ns := []string{"-t", strconv.Itoa(pid), "-m", "--"}
	for range n {
		// The distribution's helper itself: /sbin/mount.glusterfs is
		// mount-scope, which puts the daemon in a scope (images/Dockerfile).
		mountMs = append(mountMs, timed("nsenter", append(ns, "/sbin/mount.glusterfs.distrib", g.bed.Env.NodeName+":/"+glusterVolume, target)...))
		run(t, time.Minute, "nsenter", append(ns, "umount", target)...)
		bindMs = append(bindMs, timed("mount", "--bind", src, target))
		run(t, time.Minute, "umount", target)
	}
	return mountMs, bindMs
}

// containerPID returns the PID (on the node) of a process of the running
// container id, found by the container's cgroup.
func containerPID(t *testing.T, id string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup")); err == nil && strings.Contains(string(cg), id) {
			return pid
		}
	}
	t.Fatalf("no process of container %s", id)
	return 0
}

// median is the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// waitCSINode waits until the kubelet lists driver in the node's CSINode:
// it took the driver's registration.
func waitCSINode(t *testing.T, bed *framework.Bed, driver string) {
	t.Helper()
	if err := framework.Poll(context.Background(), "the kubelet lists "+driver+" in CSINode "+bed.Env.NodeName, 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			n, err := bed.Client.StorageV1().CSINodes().Get(ctx, bed.Env.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			return slices.ContainsFunc(n.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver }), fmt.Sprint(n.Spec.Drivers), nil
		}); err != nil {
		t.Fatal(err)
	}
}

// csiMounts returns the mount points of a CSI driver's volumes on the
// node: its staging mounts and the published targets of every CSI volume.
func csiMounts(t *testing.T, kubeletRoot, driver string) []string {
	t.Helper()
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, mi := range infos {
		staged := strings.HasPrefix(mi.MountPoint, filepath.Join(kubeletRoot, "plugins/kubernetes.io/csi", driver)+"/")
		published := strings.HasPrefix(mi.MountPoint, filepath.Join(kubeletRoot, "pods")+"/") && strings.Contains(mi.MountPoint, "/volumes/kubernetes.io~csi/")
		if staged || published {
			found = append(found, mi.MountPoint)
		}
	}
	return found
}

// csiStagingMount returns the one staging mount of a CSI driver on the
// node.
func csiStagingMount(t *testing.T, kubeletRoot, driver string) string {
	t.Helper()
	var staged []string
	for _, m := range csiMounts(t, kubeletRoot, driver) {
		if strings.HasSuffix(m, "/globalmount") {
			staged = append(staged, m)
		}
	}
	if len(staged) != 1 {
		t.Fatalf("staging mounts of %s: %v; want one", driver, staged)
	}
	return staged[0]
}

// podRestarts sums the restarts of a pod's containers.
func podRestarts(t *testing.T, bed *framework.Bed, ns, name string) int32 {
	t.Helper()
	p, err := bed.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// startRegisteredCSIDriver starts the GlusterFS CSI driver on the node,
// registered with the kubelet, its commands placed in mode; it stops it
// when the test ends (which unregisters it).
func startRegisteredCSIDriver(t *testing.T, bin, logPath, pluginDir string, mode mcexec.ExecMode) {
	t.Helper()
	bed := framework.Current(t)
	startDriverProcess(t, bin, logPath, filepath.Join(pluginDir, "csi.sock"),
		"--filesystem", "glusterfs", "--node-id", bed.Env.NodeName, "--kubelet-dir", bed.Env.KubeletRoot,
		"--allowed-servers", bed.Env.HostName, "--registration-dir", bed.Env.RegistrationDir,
		"--runtime-endpoint", bed.Env.CRIEndpoint, "--exec-mode", string(mode), "--log-format", "json", "--log-level", "debug")
}

// csiCephDriver is the CephFS CSI driver's name
// (deploy/csi/cephfs/csidriver.yaml).
const csiCephDriver = "cephfs.mountcontainers.io"

// testCSIVolume runs the CephFS CSI driver on the bed's node, registered
// with the kubelet, its commands placed in mode, and a workload on a static
// PersistentVolume of it whose key is the node-stage secret: the staging
// mount is made in the mount pod (the driver's log says through which
// path), the key reaches ceph-fuse in a root-only file on the tmpfs and
// nowhere else, and after the pod, claim and volume are deleted no mount
// and no key file is left.
func (c *cephfsEnv) testCSIVolume(t *testing.T, bin string, mode mcexec.ExecMode) {
	bed := c.bed
	ctx := context.Background()
	logPath := filepath.Join(bed.Env.LogDir, "csi-driver-cephfs-"+string(mode)+".log")
	pluginDir := filepath.Join(bed.Env.KubeletRoot, "plugins", csiCephDriver)
	startDriverProcess(t, bin, logPath, filepath.Join(pluginDir, "csi.sock"),
		"--filesystem", "cephfs", "--node-id", bed.Env.NodeName, "--kubelet-dir", bed.Env.KubeletRoot,
		"--allowed-servers", bed.Env.NodeIP, "--registration-dir", bed.Env.RegistrationDir, "--secrets-dir", c.secrets,
		"--runtime-endpoint", bed.Env.CRIEndpoint, "--exec-mode", string(mode), "--log-format", "json", "--log-level", "debug")
	waitCSINode(t, bed, csiCephDriver)

	name := "csi-cephfs-" + string(mode)
	bed.Apply(t, c.staticCSIVolume(name, cephfsSecret))
	p := bed.WaitPod(t, c.ns, name, true, 3*time.Minute)
	staging := csiStagingMount(t, bed.Env.KubeletRoot, csiCephDriver)
	t.Logf("through %s: NodeStageVolume took %v ms, NodePublishVolume %v ms (the driver's log)", mode,
		callTimes(t, logPath, "NodeStageVolume"), callTimes(t, logPath, "NodePublishVolume"))
	if n := stagedVia(t, logPath, viaOf(t, mode)); n != 1 {
		t.Fatalf("the driver's log %s shows %d staging mounts; want 1, via %s", logPath, n, viaOf(t, mode))
	}
	content := "written through the CephFS CSI driver " + string(mode)
	if got := bed.MustExec(t, c.ns, name, "main", "sh", "-c", `printf '%s' "$1" > /data/csi-`+string(mode)+` && cat /data/csi-`+string(mode), "sh", content); got != content {
		t.Fatalf("read back %q, want %q", got, content)
	}
	if data := containerMount(t, bed, c.ns, name, "main", "/data"); data.fstype != "fuse.ceph-fuse" || data.dev != hostMountDev(t, staging) {
		t.Fatalf("the workload's /data is %+v; want the staging mount %s (fuse.ceph-fuse)", data, staging)
	}
	keyFile := volume.SecretFile(c.secrets, staging)
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file %s: %v, %v; want mode 0600", keyFile, fi, err)
	}
	c.assertKeyNowhere(t)
	if data, err := os.ReadFile(logPath); err != nil || strings.Contains(string(data), c.srv.key) {
		t.Errorf("the driver's log %s holds the key (%v)", logPath, err)
	}

	// The ceph-fuse daemon dies: the mount pod makes the staging mount
	// again (its key file is still on the tmpfs) and puts it back in the
	// running container and in the node's published bind.
	pids := cephFuseProcesses(t, staging)
	if len(pids) != 1 {
		t.Fatalf("ceph-fuse processes serving %s: %v; want one", staging, pids)
	}
	killed := time.Now()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := framework.Poll(ctx, "the workload writes its volume again", 200*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			_, se, err := bed.Exec(ctx, 20*time.Second, c.ns, name, "main", "sh", "-c", "echo after > /data/after-"+string(mode))
			return err == nil, se, nil
		}); err != nil {
		t.Fatal(err)
	}
	t.Logf("ceph-fuse %d killed: the workload wrote its volume again %s later", pids[0], time.Since(killed).Round(time.Millisecond))
	if now := cephFuseProcesses(t, staging); len(now) != 1 || now[0] == pids[0] {
		t.Errorf("ceph-fuse processes serving %s after the kill of %d: %v; want one new", staging, pids[0], now)
	}
	if data := containerMount(t, bed, c.ns, name, "main", "/data"); data.dev != hostMountDev(t, staging) {
		t.Errorf("the workload's /data after the recovery is %+v; want the new staging mount (device %s)", data, hostMountDev(t, staging))
	}
	assertPublishedIs(t, bed, csiCephDriver, staging)
	if restarts := podRestarts(t, bed, c.ns, name); restarts != 0 {
		t.Errorf("the workload's containers restarted %d times", restarts)
	}

	deleteStaticCSIVolume(t, bed, c.ns, name, p, csiCephDriver)
	if _, err := os.Lstat(keyFile); !os.IsNotExist(err) {
		t.Errorf("the key file %s is left after NodeUnstage: %v", keyFile, err)
	}

	// A node-stage secret with the wrong key: the pod never runs, the
	// kubelet's FailedMount says why (ceph-fuse's own reason, from the
	// mount in the mount pod via mode) without the key, and nothing is
	// left.
	wrong := "csi-cephfs-wrong-" + string(mode)
	bed.Apply(t, c.staticCSIVolume(wrong, cephfsWrong))
	var msg string
	if err := framework.Poll(ctx, "a FailedMount event of "+wrong, 500*time.Millisecond, 3*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			evs, err := bed.Client.CoreV1().Events(c.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + wrong + ",reason=FailedMount"})
			if err != nil {
				return false, "", err
			}
			for _, ev := range evs.Items {
				if strings.Contains(ev.Message, "failed to fetch mon config") && strings.Contains(ev.Message, "via "+string(viaOf(t, mode))) {
					msg = ev.Message
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d events", len(evs.Items)), nil
		}); err != nil {
		t.Fatal(err)
	}
	t.Logf("FailedMount: %s", msg)
	if strings.Contains(msg, c.srv.otherKey) || strings.Contains(msg, c.srv.key) {
		t.Errorf("the event quotes a key")
	}
	wp, err := bed.Client.CoreV1().Pods(c.ns).Get(ctx, wrong, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wp.Status.Phase == corev1.PodRunning {
		t.Errorf("a pod with a wrong key is Running")
	}
	deleteStaticCSIVolume(t, bed, c.ns, wrong, wp, csiCephDriver)
	if left := c.secretFiles(t); len(left) != 0 {
		t.Errorf("key files left in %s: %v", c.secrets, left)
	}
	if data, err := os.ReadFile(logPath); err != nil || strings.Contains(string(data), c.srv.otherKey) {
		t.Errorf("the driver's log %s holds the wrong key (%v)", logPath, err)
	}
}

// staticCSIVolume is the manifest of a static CephFS PersistentVolume of
// the CSI driver, its claim and a pod that mounts it, all named name (the
// volume name-NAMESPACE), staged with the key of Secret secret.
func (c *cephfsEnv) staticCSIVolume(name, secret string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %[1]s-%[2]s
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: %[2]s, name: %[1]s}
  csi:
    driver: %[3]s
    volumeHandle: %[2]s-%[1]s
    volumeAttributes: {monitors: %[4]q, user: %[5]s, fs: cephfs}
    nodeStageSecretRef: {name: %[6]s, namespace: %[2]s}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: %[1]s-%[2]s
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: %[7]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /data}
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: %[1]s}
`, name, c.ns, csiCephDriver, c.bed.Env.NodeIP+":6789", cephClientID, secret, c.bed.Env.BaseImage)
}

// testCSIProvisioning runs the real external-provisioner (built against the
// bed's Kubernetes libraries, test/bed/build-sidecars.sh) and the driver's controller on the
// node: a claim of a StorageClass naming the administrator's GlusterFS
// volume is bound to a new directory of it, two pods share it read-write,
// and deleting the claim deletes the directory.
func (g *glusterEnv) testCSIProvisioning(t *testing.T, bin, provisioner string, mode mcexec.ExecMode) {
	bed := g.bed
	ctx := context.Background()
	logPath := startProvisioningDriver(t, bed, bin, provisioner, "provisioning-"+string(mode), mode)

	sc, claim := g.ns+"-"+string(mode), "data-"+string(mode)
	bed.Apply(t, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: %[1]s
provisioner: %[2]s
parameters: {server: %[3]q, volume: %[4]s}
reclaimPolicy: Delete
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: %[5]s
  namespace: %[6]s
spec:
  accessModes: [ReadWriteMany]
  storageClassName: %[1]s
  resources: {requests: {storage: 1Gi}}
`, sc, csiGlusterDriver, bed.Env.NodeName, glusterVolume, claim, g.ns))
	t.Cleanup(func() { bed.Kubectl(t, "delete", "--ignore-not-found", "storageclass", sc) })
	pv := waitClaimBound(t, bed, g.ns, claim)
	pvName := pv.Name
	handle := pv.Spec.CSI.VolumeHandle
	dir := pv.Spec.CSI.VolumeAttributes["subdir"]
	if dir == "" || !strings.HasSuffix(handle, "/"+glusterVolume+"/"+dir) {
		t.Fatalf("the provisioned volume %s: handle %q, directory %q; want a directory of %s", pvName, handle, dir, glusterVolume)
	}
	brickDir := g.brick + "/" + dir
	bed.MustExec(t, g.ns, "glusterfs-server", "server", "test", "-d", brickDir)

	// Two pods share it read-write.
	for _, name := range []string{"writer-" + string(mode), "reader-" + string(mode)} {
		bed.Apply(t, claimPod(name, g.ns, bed.Env.BaseImage, claim, 0))
	}
	writer := bed.WaitPod(t, g.ns, "writer-"+string(mode), true, 3*time.Minute)
	reader := bed.WaitPod(t, g.ns, "reader-"+string(mode), true, 3*time.Minute)
	content := "provisioned through " + string(mode)
	bed.MustExec(t, g.ns, writer.Name, "main", "sh", "-c", `printf '%s' "$1" > /data/hello && sync`, "sh", content)
	if got := bed.MustExec(t, g.ns, reader.Name, "main", "cat", "/data/hello"); got != content {
		t.Fatalf("the second pod reads %q, want %q", got, content)
	}
	if got := strings.TrimSpace(bed.MustExec(t, g.ns, "glusterfs-server", "server", "cat", brickDir+"/hello")); got != content {
		t.Fatalf("the volume's directory on the brick holds %q, want %q", got, content)
	}
	if n := stagedVia(t, logPath, viaOf(t, mode)); n != 1 {
		t.Fatalf("the driver's log %s shows %d staging mounts for two pods on one node; want 1, via %s", logPath, n, viaOf(t, mode))
	}

	// Deleted: the claim's volume and its directory go.
	deleteClaim(t, bed, g.ns, claim, pvName, writer, reader)
	if _, _, err := bed.Exec(ctx, 20*time.Second, g.ns, "glusterfs-server", "server", "test", "-e", brickDir); err == nil {
		t.Errorf("the volume's directory %s is left on the brick after its claim was deleted", brickDir)
	}
	if left := csiMounts(t, bed.Env.KubeletRoot, csiGlusterDriver); len(left) != 0 {
		t.Errorf("mounts left on the node: %v", left)
	}
}

// assertPublishedIs checks that the one published target of driver on the
// node is a bind of the staging mount staging (the same device) and
// answers.
func assertPublishedIs(t *testing.T, bed *framework.Bed, driver, staging string) {
	t.Helper()
	published := 0
	for _, m := range csiMounts(t, bed.Env.KubeletRoot, driver) {
		if !strings.HasSuffix(m, "/mount") {
			continue
		}
		published++
		var st syscall.Stat_t
		if dev, want := hostMountDev(t, m), hostMountDev(t, staging); dev != want {
			t.Errorf("the node's published target %s is device %s; want the staging mount's %s", m, dev, want)
		} else if err := syscall.Stat(m, &st); err != nil {
			t.Errorf("the node's published target %s: %v", m, err)
		}
	}
	if published != 1 {
		t.Errorf("published targets of %s on the node: %d; want 1", driver, published)
	}
}

// deleteStaticCSIVolume deletes pod p, then the static volume name (its
// claim name, its PersistentVolume name-NS), and waits until no mount of
// driver is left on the node.
func deleteStaticCSIVolume(t *testing.T, bed *framework.Bed, ns, name string, p *corev1.Pod, driver string) {
	t.Helper()
	ctx := context.Background()
	if err := bed.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bed.WaitPodGone(t, ns, p.Name, p.UID, 2*time.Minute)
	bed.Kubectl(t, "-n", ns, "delete", "pvc", name, "--wait")
	bed.Kubectl(t, "delete", "pv", name+"-"+ns, "--wait")
	if err := framework.Poll(ctx, "no mount of "+driver+" left on the node", 250*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			left := csiMounts(t, bed.Env.KubeletRoot, driver)
			return len(left) == 0, fmt.Sprint(left), nil
		}); err != nil {
		t.Fatal(err)
	}
}

// waitClaimBound waits for claim in ns to be bound and returns its volume.
func waitClaimBound(t *testing.T, bed *framework.Bed, ns, claim string) *corev1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	var pvName string
	if err := framework.Poll(ctx, "claim "+claim+" bound", 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			c, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			pvName = c.Spec.VolumeName
			return c.Status.Phase == corev1.ClaimBound, string(c.Status.Phase), nil
		}); err != nil {
		t.Fatal(err)
	}
	pv, err := bed.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil {
		t.Fatalf("claim %s bound to %s, which is not a CSI volume", claim, pvName)
	}
	t.Logf("claim %s bound to %s (volume %s, attributes %v) %s after it was asked for", claim, pvName, pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.VolumeAttributes, time.Since(start).Round(time.Millisecond))
	return pv
}

// claimPod is the manifest of a pod that mounts claim at /data and sleeps,
// as user uid when uid is not 0.
func claimPod(name, ns, image, claim string, uid int) string {
	sc := ""
	if uid != 0 {
		sc = fmt.Sprintf("\n  securityContext: {runAsUser: %d}", uid)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  terminationGracePeriodSeconds: 1%[5]s
  containers:
    - name: main
      image: %[3]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /data}
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: %[4]s}
`, name, ns, image, claim, sc)
}

// deleteClaim deletes pods, then claim, and waits for its volume pvName
// to be deleted (by the driver's DeleteVolume: the classes are Delete).
func deleteClaim(t *testing.T, bed *framework.Bed, ns, claim, pvName string, pods ...*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	for _, p := range pods {
		if err := bed.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bed.WaitPodGone(t, ns, p.Name, p.UID, 2*time.Minute)
	}
	bed.Kubectl(t, "-n", ns, "delete", "pvc", claim, "--wait")
	if err := framework.Poll(ctx, "volume "+pvName+" deleted", 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			_, err := bed.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err), nil
		}); err != nil {
		t.Fatal(err)
	}
}

// startSidecar runs a CSI sidecar on the node with args, logging to
// logPath, until the test ends.
func startSidecar(t *testing.T, bin, logPath string, args ...string) {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
}
