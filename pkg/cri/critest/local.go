package critest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunLocally is an ExecFunc that runs the command on the test machine the
// way containerd answers ExecSync: the exit code and both outputs in the
// response, a missing executable as an error carrying runc's message, and
// the request's timeout as an error "timeout Ns exceeded: context deadline
// exceeded".
func RunLocally(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "empty command")
	}
	if req.GetTimeout() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.GetTimeout())*time.Second)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, req.GetCmd()[0], req.GetCmd()[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, status.Errorf(codes.Unknown, "timeout %ds exceeded: %v", req.GetTimeout(), ctx.Err())
	case errors.As(err, &exit):
		return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(exit.ExitCode())}, nil
	case errors.Is(err, exec.ErrNotFound):
		return nil, status.Errorf(codes.Unknown, `failed to exec in container: failed to start exec "x": OCI runtime exec failed: exec failed: unable to start container process: exec: %q: executable file not found in $PATH: unknown`, req.GetCmd()[0])
	default:
		return nil, status.Errorf(codes.Unknown, `failed to exec in container: failed to start exec "x": OCI runtime exec failed: exec failed: unable to start container process: exec: %q: %v: unknown`, req.GetCmd()[0], err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// Answer returns an ExecFunc that always answers with the given response.
func Answer(stdout, stderr []byte, exitCode int32) ExecFunc {
	return func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{Stdout: stdout, Stderr: stderr, ExitCode: exitCode}, nil
	}
}

// Fail returns an ExecFunc that always fails with a gRPC status.
func Fail(code codes.Code, format string, args ...any) ExecFunc {
	err := status.Error(code, fmt.Sprintf(format, args...))
	return func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		return nil, err
	}
}
