//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

// hostMounted reports whether path is a mount point on the host.
func hostMounted(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.ReplaceAll(fields[4], `\040`, " ") == path {
			return true
		}
	}
	return false
}

// TestBedDaemonSet checks what a mount pod needs from the bed: a privileged,
// host-network DaemonSet pod with downward-API env and a Bidirectional hostPath
// under the kubelet root runs; kubectl exec and logs work; the CRI runtime
// finds its container by pod UID and name; and a mount made inside the pod on
// a loop device shows up on the host (and a host mount inside the pod).
func TestBedDaemonSet(t *testing.T) {
	bed := framework.Current(t)
	ns := bed.CreateNamespace(t, "bed")
	hostDir := filepath.Join(bed.Env.KubeletRoot, "bed-test", ns)
	t.Cleanup(func() {
		// Whatever the test left mounted must not outlive it.
		for _, mp := range []string{filepath.Join(hostDir, "disk"), filepath.Join(hostDir, "fromhost")} {
			_ = exec.Command("umount", "-l", mp).Run()
		}
		_ = os.RemoveAll(hostDir)
	})
	// Before the pod: a privileged container's /dev is a snapshot.
	dev := bed.LoopDevice(t, 32, "ext4")

	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: carrier
  namespace: %[1]s
spec:
  selector:
    matchLabels: {app: carrier}
  template:
    metadata:
      labels: {app: carrier}
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: %[2]s
        imagePullPolicy: Never
        command: ["sh", "-c", "echo carrier up on $NODE_NAME; exec sleep infinity"]
        securityContext: {privileged: true}
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        - name: POD_UID
          valueFrom: {fieldRef: {fieldPath: metadata.uid}}
        volumeMounts:
        - name: shared
          mountPath: /shared
          mountPropagation: Bidirectional
      volumes:
      - name: shared
        hostPath: {path: %[3]s, type: DirectoryOrCreate}
`, ns, bed.Env.BaseImage, hostDir)
	start := time.Now()
	bed.Apply(t, manifest)
	pods := bed.WaitPodsBySelector(t, ns, "app=carrier", 1, true, 2*time.Minute)
	pod := pods[0]
	t.Logf("DaemonSet pod %s running %.1fs after apply", pod.Name, time.Since(start).Seconds())
	if !pod.Spec.HostNetwork || pod.Spec.NodeName != bed.Env.NodeName {
		t.Fatalf("pod %s: hostNetwork=%t node=%q, want true and %q", pod.Name, pod.Spec.HostNetwork, pod.Spec.NodeName, bed.Env.NodeName)
	}

	t.Run("exec and downward API", func(t *testing.T) {
		out := bed.MustExec(t, ns, pod.Name, "main", "sh", "-c", `echo "$NODE_NAME $POD_UID"`)
		if want := fmt.Sprintf("%s %s", bed.Env.NodeName, pod.UID); strings.TrimSpace(out) != want {
			t.Fatalf("downward API env = %q, want %q", strings.TrimSpace(out), want)
		}
		logs := bed.Kubectl(t, "logs", "-n", ns, pod.Name, "-c", "main")
		if !strings.Contains(logs, "carrier up on "+bed.Env.NodeName) {
			t.Fatalf("kubectl logs = %q", logs)
		}
	})

	t.Run("CRI finds the container", func(t *testing.T) {
		id := bed.RunningContainerID(t, pod.UID, "main", 30*time.Second)
		if id == "" {
			t.Fatal("empty container ID")
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == "main" && !strings.HasSuffix(cs.ContainerID, "://"+id) {
				t.Fatalf("CRI container %s, pod status says %s", id, cs.ContainerID)
			}
		}
	})

	t.Run("mount in pod propagates to host", func(t *testing.T) {
		target := filepath.Join(hostDir, "disk")
		bed.MustExec(t, ns, pod.Name, "main", "sh", "-c",
			fmt.Sprintf("mkdir -p /shared/disk && mount -t ext4 %s /shared/disk && echo hello > /shared/disk/hello", dev))
		if !hostMounted(t, target) {
			t.Fatalf("%s is not a mount point on the host after mounting %s in the pod", target, dev)
		}
		data, err := os.ReadFile(filepath.Join(target, "hello"))
		if err != nil || strings.TrimSpace(string(data)) != "hello" {
			t.Fatalf("read file written in the pod from the host: %q, %v", data, err)
		}
		bed.MustExec(t, ns, pod.Name, "main", "umount", "/shared/disk")
		if hostMounted(t, target) {
			t.Fatalf("%s still mounted on the host after umount in the pod", target)
		}
	})

	t.Run("mount on host propagates to pod", func(t *testing.T) {
		target := filepath.Join(hostDir, "fromhost")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "bedtest", target).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs on the host: %v: %s", err, out)
		}
		defer func() { _ = exec.Command("umount", target).Run() }()
		out := bed.MustExec(t, ns, pod.Name, "main", "cat", "/proc/self/mountinfo")
		if !strings.Contains(out, " /shared/fromhost ") {
			t.Fatalf("host mount %s not visible in the pod:\n%s", target, out)
		}
	})
}

// TestBedTaintEviction checks that the taint-eviction controller works: a
// NoExecute taint evicts a pod that does not tolerate it, and leaves one that
// does. The evicted pod uses the pod network, so the CNI setup is covered too.
func TestBedTaintEviction(t *testing.T) {
	bed := framework.Current(t)
	ns := bed.CreateNamespace(t, "evict")
	const key = "mountcontainers.test/evict"
	pod := func(name, tolerations string) string {
		return fmt.Sprintf(`apiVersion: v1
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
%[4]s
`, name, ns, bed.Env.BaseImage, tolerations)
	}
	bed.Apply(t, pod("victim", ""))
	bed.Apply(t, pod("survivor", fmt.Sprintf("  tolerations:\n  - {key: %q, operator: Exists, effect: NoExecute}", key)))
	victim := bed.WaitPod(t, ns, "victim", true, 2*time.Minute)
	bed.WaitPod(t, ns, "survivor", true, 2*time.Minute)
	if victim.Status.PodIP == "" || victim.Status.PodIP == bed.Env.NodeIP {
		t.Fatalf("victim pod IP %q: want an address from the CNI bridge", victim.Status.PodIP)
	}

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if r := bed.RunKubectl(ctx, "", "taint", "nodes", bed.Env.NodeName, key+":NoExecute-"); r.Err != nil &&
			!strings.Contains(r.Stderr, "not found") {
			t.Errorf("remove taint: %v", r.Err)
		}
	})
	start := time.Now()
	bed.Kubectl(t, "taint", "nodes", bed.Env.NodeName, key+"=now:NoExecute")
	bed.WaitPodGone(t, ns, "victim", victim.UID, 90*time.Second)
	t.Logf("non-tolerating pod evicted %.1fs after the taint", time.Since(start).Seconds())
	p, err := bed.Client.CoreV1().Pods(ns).Get(context.Background(), "survivor", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("tolerating pod was evicted too: %v", err)
	}
}
