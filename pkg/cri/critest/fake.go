// Package critest provides an in-process CRI RuntimeService served over a
// real unix socket. It exists for the faults a real runtime cannot be made to
// produce on demand (a call that hangs, UNAVAILABLE, a response of any size,
// a container that vanishes between two calls), for counting the calls a
// client makes, and for table tests of decisions that depend on what the
// runtime lists.
//
// # The real runtime's counterparts
//
// What the unit tests check through this fake is checked against a real
// runtime (containerd) in CI, on the end-to-end test bed (test/e2e):
//
//   - package exec: TestRealRuntime (decisions, commands, outputs, exit
//     codes, missing executables, timeouts, Stop, the response size limit,
//     runc's messages, a container stopped under a cached decision), which
//     test/e2e's TestRealRuntime runs in a pod of the bed and fails if it
//     skipped; TestExecResolver, through a mount pod, in both exec modes.
//   - the exec socket against ExecSync: test/e2e's TestFastPath.
//   - package shim and its helper: test/e2e's TestShim.
//   - the Flexvolume driver: test/e2e's TestGlusterfs, called by a real
//     kubelet and as the kubelet calls it.
package critest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ExecFunc answers an ExecSync request.
type ExecFunc func(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error)

// FakeRuntime is a CRI RuntimeService that lists a fixed set of containers
// and answers ExecSync with a function. Only ListContainers and ExecSync are
// implemented; the other calls answer UNIMPLEMENTED.
type FakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer

	mu         sync.Mutex
	containers []*runtimeapi.Container
	exec       ExecFunc
	listErr    error
	execReqs   []*runtimeapi.ExecSyncRequest
	lists      int

	srv      *grpc.Server
	endpoint string
}

// NewFakeRuntime returns a runtime without containers whose ExecSync answers
// UNIMPLEMENTED until [FakeRuntime.SetExec] is called.
func NewFakeRuntime() *FakeRuntime { return &FakeRuntime{} }

// Serve serves f on a new unix socket in a temporary directory until the
// test ends, and returns its endpoint ("unix://...").
func (f *FakeRuntime) Serve(t testing.TB) string {
	t.Helper()
	// A short directory: unix socket paths are limited to 107 bytes and
	// t.TempDir embeds the test name.
	dir, err := os.MkdirTemp("", "fakecri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "cri.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, f)
	go srv.Serve(l) //nolint:errcheck // returns when stopped
	f.mu.Lock()
	f.srv, f.endpoint = srv, "unix://"+path
	f.mu.Unlock()
	t.Cleanup(srv.Stop)
	return "unix://" + path
}

// Stop stops serving and removes the socket: from then on the runtime is
// unreachable and clients get UNAVAILABLE.
func (f *FakeRuntime) Stop() {
	f.mu.Lock()
	srv := f.srv
	f.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

// SetContainers replaces the containers ListContainers knows of.
func (f *FakeRuntime) SetContainers(cs ...*runtimeapi.Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = cs
}

// SetExec sets the function that answers ExecSync.
func (f *FakeRuntime) SetExec(fn ExecFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exec = fn
}

// SetListError makes ListContainers fail with err (nil restores it).
func (f *FakeRuntime) SetListError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listErr = err
}

// ExecRequests returns the ExecSync requests received so far.
func (f *FakeRuntime) ExecRequests() []*runtimeapi.ExecSyncRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*runtimeapi.ExecSyncRequest(nil), f.execReqs...)
}

// Lookup returns the container with the given ID, if the runtime knows it.
func (f *FakeRuntime) Lookup(id string) (*runtimeapi.Container, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.GetId() == id {
			return c, true
		}
	}
	return nil, false
}

// ListCalls returns how many ListContainers calls were received.
func (f *FakeRuntime) ListCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// ListContainers filters the known containers like a real runtime: by ID,
// sandbox ID, state and every label of the selector.
func (f *FakeRuntime) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	flt := req.GetFilter()
	var out []*runtimeapi.Container
next:
	for _, c := range f.containers {
		if flt.GetId() != "" && flt.GetId() != c.GetId() {
			continue
		}
		if flt.GetPodSandboxId() != "" && flt.GetPodSandboxId() != c.GetPodSandboxId() {
			continue
		}
		if flt.GetState() != nil && flt.GetState().GetState() != c.GetState() {
			continue
		}
		for k, v := range flt.GetLabelSelector() {
			if c.GetLabels()[k] != v {
				continue next
			}
		}
		out = append(out, c)
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

// ExecSync records the request and answers it with the function set by
// [FakeRuntime.SetExec].
func (f *FakeRuntime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	f.mu.Lock()
	f.execReqs = append(f.execReqs, req)
	fn := f.exec
	f.mu.Unlock()
	if fn == nil {
		return nil, status.Error(codes.Unimplemented, "ExecSync not set up")
	}
	return fn(ctx, req)
}

// Container returns a container as the kubelet would label it.
func Container(id, namespace, pod, uid, name string, state runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:    id,
		State: state,
		Labels: map[string]string{
			"io.kubernetes.pod.namespace":  namespace,
			"io.kubernetes.pod.name":       pod,
			"io.kubernetes.pod.uid":        uid,
			"io.kubernetes.container.name": name,
		},
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
	}
}

// Hang is an ExecFunc that never answers: it returns when the caller gives
// up (its deadline or cancellation).
func Hang(ctx context.Context, _ *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	<-ctx.Done()
	return nil, status.FromContextError(ctx.Err()).Err()
}
