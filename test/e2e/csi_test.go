//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"github.com/mountcontainers/mountcontainers/internal/node/csi/csitest"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// envSanityChild carries, to the test binary TestCSISanity runs again for
// csi-sanity, the configuration of that run (a sanityChild in JSON): a
// process runs one csi-sanity suite, and each exec path gets its own.
const envSanityChild = "MOUNTCONTAINERS_E2E_CSI_SANITY"

// sanityChild is what csi-sanity's process needs to know.
type sanityChild struct {
	Socket, Staging, Target string
	Params                  map[string]string
}

// TestCSISanity runs csi-sanity (kubernetes-csi/csi-test, every spec for
// the capabilities the driver offers) against the GlusterFS CSI driver
// (cmd/csi-driver) running on the bed's node, with the real mount pod of
// deploy/glusterfs and the real GlusterFS server, once through each exec
// path, which the driver's log must show every staging mount took.
func TestCSISanity(t *testing.T) {
	if cfg := os.Getenv(envSanityChild); cfg != "" {
		runSanityChild(t, cfg)
		return
	}
	bed := framework.Current(t)
	setupGlusterfs(t, bed)
	bin := buildCmd(t, "csi-driver")
	for _, mode := range execModes {
		t.Run(string(mode), func(t *testing.T) {
			dir := filepath.Join(bed.Env.KubeletRoot, "plugins", "csi-sanity-"+string(mode))
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			logPath := filepath.Join(bed.Env.LogDir, "csi-driver-sanity-"+string(mode)+".log")
			sock := startCSIDriver(t, bin, logPath, dir, mode, bed)
			child := sanityChild{
				Socket: sock, Staging: filepath.Join(dir, "staging"), Target: filepath.Join(dir, "target"),
				Params: map[string]string{"server": bed.Env.NodeName, "volume": glusterVolume},
			}
			cfg, err := json.Marshal(child)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCSISanity$", "-test.count=1", "-test.v", "-test.timeout=15m")
			cmd.Env = append(os.Environ(), envSanityChild+"="+string(cfg))
			start := time.Now()
			out, err := cmd.CombinedOutput()
			t.Logf("csi-sanity through %s (%s):\n%s", mode, time.Since(start).Round(time.Millisecond), sanityLines(out))
			if err != nil {
				t.Fatalf("csi-sanity through %s: %v\n%s", mode, err, out)
			}
			n := stagedVia(t, logPath, viaOf(t, mode))
			if n == 0 {
				t.Fatalf("the driver's log %s shows no staging mount", logPath)
			}
			t.Logf("%d staging mounts, every one in the mount pod via %s", n, viaOf(t, mode))
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
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--filesystem", "glusterfs", "--node-id", bed.Env.NodeName,
		"--kubelet-dir", bed.Env.KubeletRoot, "--endpoint", sock, "--register=false", "--controller",
		"--work-dir", filepath.Join(dir, "controller"), "--allowed-servers", bed.Env.HostName,
		"--registration-dir", bed.Env.RegistrationDir, "--runtime-endpoint", bed.Env.CRIEndpoint,
		"--exec-mode", string(mode), "--log-format", "json", "--log-level", "debug")
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
		t.Fatal(err)
	}
	return sock
}

// stagedVia returns how many staging mounts the driver's log records, and
// fails t unless every one ran via via.
func stagedVia(t *testing.T, logPath string, via mcexec.Via) int {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct{ Msg, Message, Dir string }
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Msg != "staged" {
			continue
		}
		if strings.Contains(r.Message, "is already mounted") {
			continue
		}
		n++
		if !strings.Contains(r.Message, "via "+string(via)) {
			t.Errorf("the staging mount of %s did not run via %s: %s", r.Dir, via, r.Message)
		}
	}
	return n
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
