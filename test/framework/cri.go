package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRI labels the kubelet sets on every container it creates.
const (
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// CRI returns a client of the bed's container runtime (CRI API v1), closed at
// the end of the test.
func (b *Bed) CRI(t testing.TB) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+b.Env.CRISocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("connect to CRI %s: %v", b.Env.CRISocket, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// RunningContainerID returns the CRI ID of the running container named
// container of the pod with the given UID, waiting up to timeout for it.
func (b *Bed) RunningContainerID(t testing.TB, podUID types.UID, container string, timeout time.Duration) string {
	t.Helper()
	rs := b.CRI(t)
	var id string
	err := Poll(context.Background(), fmt.Sprintf("running CRI container %q of pod %s", container, podUID), 250*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			resp, err := rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
				State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
				LabelSelector: map[string]string{
					LabelPodUID:        string(podUID),
					LabelContainerName: container,
				},
			}})
			if err != nil {
				return false, err.Error(), nil
			}
			switch len(resp.Containers) {
			case 0:
				return false, "no running container", nil
			case 1:
				id = resp.Containers[0].Id
				return true, "", nil
			default:
				return false, "", fmt.Errorf("%d running containers", len(resp.Containers))
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return id
}
