package cri

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// MaxRecvMsgSize is the largest response accepted from the runtime:
	// 16 MiB, as in the kubelet.
	MaxRecvMsgSize = 16 << 20

	// DialTimeout bounds one attempt to connect to the runtime's socket,
	// including the HTTP/2 handshake.
	DialTimeout = 5 * time.Second

	// MaxBackoff is the longest wait between two connection attempts after
	// the runtime went away.
	MaxBackoff = 3 * time.Second
)

// Labels the kubelet puts on every CRI container it creates.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// ErrResponseTooLarge is wrapped by the error of a call whose response
// exceeds [MaxRecvMsgSize].
var ErrResponseTooLarge = errors.New("runtime response larger than the 16 MiB receive limit")

// Conn is a connection to a CRI runtime. It is safe for concurrent use and
// meant to be shared; Close it when done.
type Conn struct {
	endpoint string
	cc       *grpc.ClientConn
	rt       runtimeapi.RuntimeServiceClient
}

// Dial returns a connection to the runtime at endpoint, resolved by
// [ResolveEndpoint] (so an empty endpoint means the environment or the
// probed defaults). It does no I/O besides probing: the connection is made
// by the first call.
func Dial(endpoint string) (*Conn, error) {
	ep, err := ResolveEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	path, err := SocketPath(ep)
	if err != nil {
		return nil, err
	}
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		d := net.Dialer{Timeout: DialTimeout}
		return d.DialContext(ctx, "unix", path)
	}
	cc, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxRecvMsgSize)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   MaxBackoff,
			},
			MinConnectTimeout: DialTimeout,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to runtime %s: %w", ep, err)
	}
	return &Conn{endpoint: ep, cc: cc, rt: runtimeapi.NewRuntimeServiceClient(cc)}, nil
}

// Endpoint returns the resolved endpoint, a "unix://" URL.
func (c *Conn) Endpoint() string { return c.endpoint }

// Runtime returns the raw RuntimeService client on the shared connection.
func (c *Conn) Runtime() runtimeapi.RuntimeServiceClient { return c.rt }

// Close closes the connection; calls in flight fail.
func (c *Conn) Close() error { return c.cc.Close() }

// FindRunning returns the running containers named containerName in the pod
// with UID podUID, newest first. Normally there is at most one.
func (c *Conn) FindRunning(ctx context.Context, podUID, containerName string) ([]*runtimeapi.Container, error) {
	resp, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{
				LabelPodUID:        podUID,
				LabelContainerName: containerName,
			},
		},
	})
	if err != nil {
		return nil, c.wrap("list containers", err)
	}
	// The runtime filters already; check again in case it ignores a
	// filter, since the answer decides where root runs a command.
	var out []*runtimeapi.Container
	for _, ctr := range resp.GetContainers() {
		l := ctr.GetLabels()
		if ctr.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING &&
			l[LabelPodUID] == podUID && l[LabelContainerName] == containerName {
			out = append(out, ctr)
		}
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Container) int {
		switch {
		case a.GetCreatedAt() > b.GetCreatedAt():
			return -1
		case a.GetCreatedAt() < b.GetCreatedAt():
			return 1
		}
		return strings.Compare(a.GetId(), b.GetId())
	})
	return out, nil
}

// TimeoutSeconds converts a timeout to the whole seconds of an
// ExecSyncRequest, rounded up; at least 1, since 0 means no timeout.
func TimeoutSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	s := math.Ceil(d.Seconds())
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int64(s)
}

// ExecSync runs cmd in the container with the runtime-side timeout (whole
// seconds, rounded up). The caller's ctx should carry a deadline a little
// later than timeout, so that the runtime reports its own timeout first.
// The response's exit code is not interpreted.
func (c *Conn) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	resp, err := c.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{
		ContainerId: containerID,
		Cmd:         cmd,
		Timeout:     TimeoutSeconds(timeout),
	})
	if err != nil {
		return nil, c.wrap("exec sync", err)
	}
	return resp, nil
}

// wrap names the call and the endpoint, and marks an oversized response.
func (c *Conn) wrap(call string, err error) error {
	if status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "larger than max") {
		return fmt.Errorf("%s on %s: %w: %w", call, c.endpoint, ErrResponseTooLarge, err)
	}
	return fmt.Errorf("%s on %s: %w", call, c.endpoint, err)
}

// IsUnavailable reports whether err means the runtime could not be reached
// (gRPC UNAVAILABLE): the socket is missing, refuses connections, or the
// runtime went away.
func IsUnavailable(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code() == codes.Unavailable
	}
	return false
}
