//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/recovery"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestHostileTenant: whoever writes a volume controls its content, and the
// recovery acts on it as root. Here the tenant, through a client of their
// own, turns a subPath that a container has bound into a symbolic link to a
// node directory, then that container's FUSE daemon dies. The recovery must bring the volume back where
// it is the volume, and refuse the subPath: the node directory never shows
// in the container. Once per exec path the driver's mount takes.
func TestHostileTenant(t *testing.T) {
	bed := framework.Current(t)
	g := setupGlusterfs(t, bed)
	for _, mode := range []mcexec.ExecMode{mcexec.ModeSocket, mcexec.ModeCRI} {
		t.Run("SubPathSymlinkTo/"+string(mode), func(t *testing.T) { g.testSubPathSymlink(t, mode) })
	}
}

func (g *glusterEnv) testSubPathSymlink(t *testing.T, mode mcexec.ExecMode) {
	bed := g.bed
	log := g.setDriverMode(t, mode)
	// A node directory with a secret in it, where the mount pod sees it
	// too (the kubelet's directory): what the tenant wants to see.
	node := filepath.Join(bed.Env.KubeletRoot, "e2e-node-secret-"+string(mode))
	if err := os.MkdirAll(node, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(node) })
	secret := fmt.Sprintf("node secret %d", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(node, "secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := "hostile-" + string(mode)
	name := "hostile-" + string(mode)
	bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: %[3]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /data}
    - name: victim
      image: %[3]s
      imagePullPolicy: Never
      command: ["sleep", "infinity"]
      volumeMounts:
        - {name: data, mountPath: /sub, subPath: %[7]s}
  volumes:
    - name: data
      flexVolume:
        driver: %[4]s
        options: {server: %[5]q, volume: %[6]s}
`, name, g.ns, bed.Env.BaseImage, glusterDriver, bed.Env.NodeName, glusterVolume, sub))
	p := bed.WaitPod(t, g.ns, name, true, 2*time.Minute)
	t.Cleanup(func() {
		_ = bed.Client.CoreV1().Pods(g.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		bed.WaitPodGone(t, g.ns, name, p.UID, 2*time.Minute)
	})
	dir := g.volumeDir(p)
	waitMountedVia(t, log, dir, viaOf(t, mode))
	bed.MustExec(t, g.ns, name, "victim", "sh", "-c", "echo mine > /sub/own")

	// The tenant's client of the volume: their own pod here (their own
	// server would do as well).
	tenant := g.workload(t, "tenant-"+string(mode))
	t.Cleanup(func() {
		if t.Failed() {
			mp := g.mountPod(t)
			t.Logf("mount pod log:\n%s", bed.Kubectl(t, "-n", mp.Namespace, "logs", "--tail=40", mp.Name))
		}
	})
	// The daemon dies while the mount pod is held still (SIGSTOP), so that
	// the tenant's move comes before the recovery, as a tenant who waits
	// for the death would have it. The dead client cannot see the move:
	// the victim's bind still names the directory it was made of.
	mp := g.mountPod(t)
	serve := podProcess(t, mp.UID, "mountpod", "serve")
	if err := syscall.Kill(serve, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume := func() {
		if stopped {
			stopped = false
			if err := syscall.Kill(serve, syscall.SIGCONT); err != nil {
				t.Errorf("resume the mount pod's mountpod %d: %v", serve, err)
			}
		}
	}
	t.Cleanup(resume)
	pids := fuseProcesses(t, dir)
	if len(pids) != 1 {
		t.Fatalf("%d glusterfs processes serve %s, want 1", len(pids), dir)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNotConnected(t, dir)
	// The tenant's move, through their client: the subPath becomes a link
	// to the node directory.
	bed.MustExec(t, g.ns, tenant.Name, "main", "sh", "-c",
		fmt.Sprintf("mv /data/%[1]s /data/%[1]s.orig && ln -s %[2]s /data/%[1]s && sync", sub, node))
	if m := containerMount(t, bed, g.ns, name, "victim", "/sub"); m.root != "/"+sub {
		t.Fatalf("the victim's /sub is %+v with its daemon dead; want the bind of /%s", m, sub)
	}
	resume()

	// The volume comes back in the container that mounts it whole, the
	// tenant's link in it ...
	err := framework.Poll(context.Background(), "the volume back in "+name+"/main", 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			out, se, err := bed.Exec(ctx, 30*time.Second, g.ns, name, "main", "readlink", "/data/"+sub)
			return err == nil && strings.TrimSpace(out) == node, fmt.Sprintf("%q %q %v", out, se, err), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	// ... and the victim's subPath is refused, as the pod's Event says,
	// or (the harm) the victim reads the node's secret there.
	var out, se string
	err = framework.Poll(context.Background(), "the subPath refused or the node's secret read", 250*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			out, se, _ = bed.Exec(ctx, 30*time.Second, g.ns, name, "victim", "cat", "/sub/secret")
			if strings.Contains(out, secret) {
				return true, "", nil
			}
			evs, err := bed.Client.CoreV1().Events(g.ns).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + name + ",reason=" + recovery.ReasonRecoveryFailed})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, ev := range evs.Items {
				if strings.Contains(ev.Message, "refused") && strings.Contains(ev.Message, "/"+sub) {
					t.Logf("Event %s: %s", ev.Reason, ev.Message)
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%d Events %s, none refusing /%s; the victim's cat: %q", len(evs.Items), recovery.ReasonRecoveryFailed, sub, strings.TrimSpace(se)), nil
		})
	if err != nil {
		t.Error(err)
	}
	if strings.Contains(out, secret) {
		t.Fatalf("the victim reads the node's secret through its subPath: the recovery attached the node's %s", node)
	}
	// The victim's /sub is never the node directory: still the dead bind
	// of the volume's own directory.
	m := containerMount(t, bed, g.ns, name, "victim", "/sub")
	if m.fstype != "fuse.glusterfs" || m.root != "/"+sub {
		t.Errorf("the victim's /sub is %+v; want the volume's /%s (fuse.glusterfs), never the node's %s", m, sub, node)
	}
	t.Logf("the victim's /sub after the recovery: %+v; reading the node's file there: %q", m, strings.TrimSpace(se))
}
