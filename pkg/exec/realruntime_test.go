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
// MC_TEST_CRI_ENDPOINT (testdata/containerd.sh starts a private one), in a
// pod sandbox they create with MC_TEST_PAUSE_IMAGE and a container of
// MC_TEST_IMAGE (which needs /bin/sh and sleep), labelled as the kubelet
// labels them. Without MC_TEST_CRI_ENDPOINT they are skipped.

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
	image := os.Getenv("MC_TEST_IMAGE")
	if image == "" {
		tb.Fatal("MC_TEST_IMAGE is not set")
	}
	conn, err := cri.Dial(endpoint)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
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
