package rollout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/mountcontainers/mountcontainers/internal/boundary/livestatus"
)

// PodExec runs commands in a mount pod's container through the API server
// (pods/exec): the [MountLister] and [StatusReader] of a real cluster.
type PodExec struct {
	Config *rest.Config
	Client kubernetes.Interface
	// MountsCommand prints mountinfo (DefaultMountsCommand if empty).
	MountsCommand []string
	// StatusCommand prints the live-mount report as JSON
	// (DefaultStatusCommand if empty).
	StatusCommand []string
	// CallTimeout bounds one command, its streams included
	// (DefaultCallTimeout if zero). A stream through the API server and
	// the kubelet can stall after the command has exited; bounded, the
	// waits that read a pod again and again ask anew instead of spending
	// their whole time on one stalled call.
	CallTimeout time.Duration
}

// DefaultCallTimeout is PodExec's bound of one command: the mount table and
// the live-mount report take about a second through the API server.
const DefaultCallTimeout = 30 * time.Second

var (
	_ MountLister  = (*PodExec)(nil)
	_ StatusReader = (*PodExec)(nil)
)

// ExecError is the failure of a command run in a pod.
type ExecError struct {
	// Pod is namespace/name.
	Pod     string
	Command []string
	// ExitCode is the command's exit code; -1 when it did not run to an
	// exit (no such container, the connection failed).
	ExitCode int
	Stderr   string
	Err      error
}

// Error names the command, the pod, the cause and the command's stderr.
func (e *ExecError) Error() string {
	msg := fmt.Sprintf("exec %q in %s: %v", strings.Join(e.Command, " "), e.Pod, e.Err)
	if e.Stderr != "" {
		msg += " (stderr: " + e.Stderr + ")"
	}
	return msg
}

// Unwrap returns the cause.
func (e *ExecError) Unwrap() error { return e.Err }

// Run runs cmd in container of pod and returns its standard output. Its
// error is an [*ExecError].
func (p *PodExec) Run(ctx context.Context, pod *corev1.Pod, container string, cmd []string) ([]byte, error) {
	fail := func(err error, stderr string) ([]byte, error) {
		e := &ExecError{Pod: pod.Namespace + "/" + pod.Name, Command: cmd, ExitCode: -1, Stderr: strings.TrimSpace(stderr), Err: err}
		var exit utilexec.ExitError
		if errors.As(err, &exit) && exit.Exited() {
			e.ExitCode = exit.ExitStatus()
		}
		return nil, e
	}
	req := p.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container,
		Command:   cmd,
		Stdout:    true,
		Stderr:    true,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(p.Config, "GET", req.URL().String())
	if err != nil {
		return fail(err, "")
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.Config, "POST", req.URL())
	if err != nil {
		return fail(err, "")
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fail(err, "")
	}
	bound := p.CallTimeout
	if bound <= 0 {
		bound = DefaultCallTimeout
	}
	call, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := time.Now()
	var stdout, stderr bytes.Buffer
	if err := exec.StreamWithContext(call, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		// The connection's deadline may fire a moment before the context
		// says it is done.
		if ctx.Err() == nil && (call.Err() != nil || time.Since(start) >= bound) {
			err = fmt.Errorf("no answer within %s: %w", bound, err)
		}
		return fail(err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Mounts implements [MountLister]: MountsCommand's output parsed as
// /proc/self/mountinfo.
func (p *PodExec) Mounts(ctx context.Context, pod *corev1.Pod, container string) ([]Mount, error) {
	out, err := p.Run(ctx, pod, container, orDefault(p.MountsCommand, DefaultMountsCommand))
	if err != nil {
		return nil, err
	}
	return ParseMountInfo(out)
}

// Status implements [StatusReader]: StatusCommand's output decoded as a
// livestatus.Report.
func (p *PodExec) Status(ctx context.Context, pod *corev1.Pod, container string) (*livestatus.Report, error) {
	out, err := p.Run(ctx, pod, container, orDefault(p.StatusCommand, DefaultStatusCommand))
	if err != nil {
		if unknownCommand(err) {
			return nil, fmt.Errorf("%w: %v", ErrNoStatus, err)
		}
		return nil, err
	}
	return DecodeStatus(out)
}

func orDefault(cmd, def []string) []string {
	if len(cmd) == 0 {
		return def
	}
	return cmd
}
