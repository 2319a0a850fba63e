package exec

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// The real-runtime tests and benchmarks run against the runtime named by
// MC_TEST_CRI_ENDPOINT, in one of two containers:
//
//   - with MC_TEST_POD_UID (and MC_TEST_POD_NAMESPACE, MC_TEST_POD_NAME,
//     MC_TEST_CONTAINER), the running container of that pod, which a
//     kubelet runs: a kubelet kills every sandbox it did not create, so on
//     a node this is the only way (test/e2e's TestRealRuntime runs
//     TestRealRuntime so on the test bed, in CI). The pod's restart policy
//     must be Never: TestRealRuntime stops the container at the end.
//   - otherwise a pod sandbox they create (the runtime's sandbox image) with
//     a container of MC_TEST_IMAGE, labelled as the kubelet labels them,
//     on a runtime without a kubelet (testdata/containerd.sh starts one).
//
// The image needs /bin/sh, sleep, head and mount. Without
// MC_TEST_CRI_ENDPOINT they are skipped.

type realPod struct {
	conn        *cri.Conn
	sandboxID   string
	containerID string
	reg         registration.Registration
}

func realRuntimeConfigured() bool { return os.Getenv("MC_TEST_CRI_ENDPOINT") != "" }

func realRuntime(tb testing.TB) *realPod {
	tb.Helper()
	endpoint := os.Getenv("MC_TEST_CRI_ENDPOINT")
	if endpoint == "" {
		tb.Skip("MC_TEST_CRI_ENDPOINT is not set (see testdata/containerd.sh)")
	}
	conn, err := cri.Dial(endpoint)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	if uid := os.Getenv("MC_TEST_POD_UID"); uid != "" {
		return kubeletPod(tb, conn, registration.Registration{
			PodNamespace: os.Getenv("MC_TEST_POD_NAMESPACE"), PodName: os.Getenv("MC_TEST_POD_NAME"),
			PodUID: uid, ContainerName: os.Getenv("MC_TEST_CONTAINER"),
		})
	}
	image := os.Getenv("MC_TEST_IMAGE")
	if image == "" {
		tb.Fatal("MC_TEST_IMAGE is not set")
	}
	ctx := context.Background()
	uid := fmt.Sprintf("mc-test-%d", time.Now().UnixNano())
	p := &realPod{conn: conn, reg: registration.Registration{
		PodNamespace: "kube-system", PodName: "mount-test", PodUID: uid, ContainerName: "mount",
	}}
	podLabels := map[string]string{
		cri.LabelPodName: p.reg.PodName, cri.LabelPodNamespace: p.reg.PodNamespace, cri.LabelPodUID: uid,
	}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.reg.PodName, Namespace: p.reg.PodNamespace, Uid: uid},
		Labels:   podLabels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	sb, err := conn.Runtime().RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		tb.Fatalf("run sandbox: %v", err)
	}
	p.sandboxID = sb.GetPodSandboxId()
	tb.Cleanup(func() {
		ctx := context.Background()
		conn.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.sandboxID})     //nolint:errcheck
		conn.Runtime().RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sandboxID}) //nolint:errcheck
	})
	labels := map[string]string{cri.LabelContainerName: p.reg.ContainerName}
	for k, v := range podLabels {
		labels[k] = v
	}
	c, err := conn.Runtime().CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: p.sandboxID,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: p.reg.ContainerName},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Command:  []string{"sleep", "infinity"},
			Labels:   labels,
		},
		SandboxConfig: sbCfg,
	})
	if err != nil {
		tb.Fatalf("create container: %v", err)
	}
	p.containerID = c.GetContainerId()
	if _, err := conn.Runtime().StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: p.containerID}); err != nil {
		tb.Fatalf("start container: %v", err)
	}
	return p
}

// kubeletPod is the running container of reg's pod, which a kubelet runs.
func kubeletPod(tb testing.TB, conn *cri.Conn, reg registration.Registration) *realPod {
	tb.Helper()
	if err := reg.Validate(); err != nil {
		tb.Fatalf("MC_TEST_POD_*, MC_TEST_CONTAINER: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := conn.FindRunning(ctx, reg.PodUID, reg.ContainerName)
	if err != nil || len(cs) != 1 {
		tb.Fatalf("running container %s of pod %s: %d found, %v", reg.ContainerName, reg, len(cs), err)
	}
	return &realPod{conn: conn, containerID: cs[0].GetId(), reg: reg}
}

// stop stops the container, as when the mount pod's container exits.
func (p *realPod) stop(tb testing.TB) {
	tb.Helper()
	if _, err := p.conn.Runtime().StopContainer(context.Background(), &runtimeapi.StopContainerRequest{ContainerId: p.containerID, Timeout: 1}); err != nil {
		tb.Fatal(err)
	}
}

// register writes p's registration into a new directory and returns a
// resolver on it that shares p's connection.
func (p *realPod) resolver(tb testing.TB, opts Options) *Resolver {
	tb.Helper()
	dir := tb.TempDir() + "/plugin-containers"
	if err := registration.Write(dir, testPlugin, p.reg); err != nil {
		tb.Fatal(err)
	}
	opts.Dir = dir
	opts.Conn = p.conn
	r := NewResolver(opts)
	tb.Cleanup(func() { r.Close() })
	return r
}
