package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
)

// Exec is the utilexec.Interface of one volume plugin, handed out by
// [Resolver.For]. Every command it creates is placed by a fresh decision
// when it starts; LookPath answers for wherever commands would run now.
type Exec struct {
	r      *Resolver
	plugin string
}

var _ Executor = (*Exec)(nil)

// Executor is a plugin's executor as a volume host uses it: a
// utilexec.Interface that also says where each command it handed out was
// placed, and keeps the records of the mounts made through the plugin's
// mount pod (see [Mounter]). [Exec] is one, and so is a type that embeds
// an *Exec and hands out its commands.
type Executor interface {
	utilexec.Interface
	// DecisionOf returns where cmd, a command of this executor, was
	// placed; see [Exec.DecisionOf].
	DecisionOf(cmd utilexec.Cmd) (d Decision, ok bool)
	// RecordsDir returns the directory of the plugin's mount records; see
	// [Exec.RecordsDir].
	RecordsDir() string
	// RecordMount records the mount that cmd made; see
	// [Exec.RecordMount].
	RecordMount(cmd utilexec.Cmd, m MountRecord) (podDropped, err error)
	// ForgetMount removes the record of the mount at target; see
	// [Exec.ForgetMount].
	ForgetMount(target string) error
}

// Plugin returns the plugin name.
func (e *Exec) Plugin() string { return e.plugin }

// DecisionOf returns where cmd was placed, when cmd is a command that an
// executor of e's plugin and resolver handed out (CommandContext's or
// Command's, also through a type that embeds e); ok is false before it
// started, when its decision failed, and for any other command.
func (e *Exec) DecisionOf(cmd utilexec.Cmd) (d Decision, ok bool) {
	c, isCmd := cmd.(*Cmd)
	if !isCmd || c.e.r != e.r || c.e.plugin != e.plugin {
		return Decision{}, false
	}
	return c.Decision()
}

// Resolve decides where the plugin's commands run now; see
// [Resolver.Resolve].
func (e *Exec) Resolve(ctx context.Context) (Decision, error) {
	return e.r.Resolve(ctx, e.plugin)
}

// Command returns a command that runs with [DefaultTimeout] (or the
// resolver's Timeout) when it runs in a container.
func (e *Exec) Command(cmd string, args ...string) utilexec.Cmd {
	return e.CommandContext(context.Background(), cmd, args...)
}

// CommandContext returns a command bound to ctx: cancelling ctx stops it,
// and ctx's deadline replaces the default timeout in a container.
func (e *Exec) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	return &Cmd{e: e, ctx: ctx, name: cmd, args: append([]string(nil), args...)}
}

// lookPathScript mirrors os/exec.LookPath with shell built-ins only; $1 is
// the file. Exit 127 means not found.
const lookPathScript = `f=$1
case $f in
*/*) if [ -f "$f" ] && [ -x "$f" ]; then printf '%s\n' "$f"; exit 0; fi; exit 127;;
esac
IFS=:
for d in $PATH; do
	[ -n "$d" ] || d=.
	if [ -f "$d/$f" ] && [ -x "$d/$f" ]; then printf '%s\n' "$d/$f"; exit 0; fi
done
exit 127`

// LookPath finds file where the plugin's commands run now: on the host with
// the host executor, in the container by searching the container's PATH with
// /bin/sh (the mount image must have one). A missing file is exactly
// utilexec.ErrExecutableNotFound.
func (e *Exec) LookPath(file string) (string, error) {
	ctx := context.Background()
	d, err := e.r.decide(ctx, e.plugin, true)
	if err != nil {
		return "", err
	}
	if d.OnHost() {
		return e.r.host.LookPath(file)
	}
	argv := []string{"/bin/sh", "-c", lookPathScript, "sh", file}
	out, _, err := e.r.execIn(ctx, d, argv)
	if errors.Is(err, errGone) || errors.Is(err, errSocketGone) {
		e.r.forget(e.plugin, d.ContainerID)
		if d, err = e.r.decide(ctx, e.plugin, false); err != nil {
			return "", err
		}
		if d.OnHost() {
			return e.r.host.LookPath(file)
		}
		out, _, err = e.r.execIn(ctx, d, argv)
	}
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return strings.TrimSuffix(string(out), "\n"), nil
	case errors.As(err, &exit) && exit.ExitStatus() == 127:
		return "", utilexec.ErrExecutableNotFound
	case err == utilexec.ErrExecutableNotFound: //nolint:errorlint // utilexec compares by equality
		return "", fmt.Errorf("look up %s in %s of plugin %s: the container has no /bin/sh", file, d.Where(), e.plugin)
	}
	return "", fmt.Errorf("look up %s in %s of plugin %s: %w", file, d.Where(), e.plugin, err)
}

// execIn runs argv in d's container, through the exec socket or ExecSync,
// with the resolver's timeout, and returns its output.
func (r *Resolver) execIn(ctx context.Context, d Decision, argv []string) (stdout, stderr []byte, err error) {
	if d.Via == ViaSocket {
		return r.runSocket(ctx, d, socketCall{argv: argv, timeout: r.timeout})
	}
	return r.execSync(ctx, d, argv, r.timeout, nil)
}

// execSync runs argv in the decided container. A non-zero exit is a
// utilexec.CodeExitError and a missing executable utilexec.ErrExecutableNotFound,
// both unwrapped; a timeout wraps ErrTimeout and context.DeadlineExceeded.
// The runtime gets timeout rounded up to whole seconds; the call's own
// deadline is a little later so that the runtime reports first. cancel, if
// not nil, is where the call's cancel function is published (for Stop).
func (r *Resolver) execSync(ctx context.Context, d Decision, argv []string, timeout time.Duration, publish func(context.CancelFunc)) (stdout, stderr []byte, err error) {
	if r.batching(d, argv) {
		return r.execSyncBatched(ctx, d, argv, timeout, publish)
	}
	return r.execSyncOne(ctx, d, argv, timeout, publish)
}

// execSyncOne runs argv in d's container by one ExecSync.
func (r *Resolver) execSyncOne(ctx context.Context, d Decision, argv []string, timeout time.Duration, publish func(context.CancelFunc)) (stdout, stderr []byte, err error) {
	conn, err := r.connection()
	if err != nil {
		return nil, nil, fmt.Errorf("exec %s in %s of plugin %s: %w", argv[0], d.Where(), d.Plugin, err)
	}
	secs := time.Duration(cri.TimeoutSeconds(timeout)) * time.Second
	// Detach from ctx's deadline (the runtime enforces it, rounded up, and
	// reports it better) but not from its cancellation.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), secs+grace(secs))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			cancel()
		}
	})
	defer stop()
	if publish != nil {
		publish(cancel)
	}
	resp, err := conn.ExecSync(callCtx, d.ContainerID, argv, timeout)
	if err != nil {
		return nil, nil, callError(callCtx, argv[0], d, secs, err)
	}
	if resp.GetExitCode() != 0 {
		return resp.GetStdout(), resp.GetStderr(), utilexec.CodeExitError{
			Err:  fmt.Errorf("exit status %d (in %s of plugin %s)", resp.GetExitCode(), d.Where(), d.Plugin),
			Code: int(resp.GetExitCode()),
		}
	}
	return resp.GetStdout(), resp.GetStderr(), nil
}

// grace is how much longer than the runtime's timeout the gRPC call may
// take: a quarter of it, between 500 ms and 5 s.
func grace(d time.Duration) time.Duration {
	return min(max(d/4, 500*time.Millisecond), 5*time.Second)
}

// callError is execError for an ExecSync call made with callCtx. A call
// that ended Canceled after its own deadline had passed, a deadline nobody
// cut short (a cancellation leaves callCtx Canceled), timed out: at the
// deadline a runtime's gRPC server cancels its handler's context before it
// marks the stream done, so the handler's Canceled status can reach the
// client instead of the stream reset that gRPC reports as DeadlineExceeded.
func callError(callCtx context.Context, name string, d Decision, timeout time.Duration, err error) error {
	if status.Code(err) == codes.Canceled && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		err = status.Error(codes.DeadlineExceeded, err.Error())
	}
	return execError(name, d, timeout, err)
}

// execError turns an ExecSync failure into the error callers of utilexec
// expect.
func execError(name string, d Decision, timeout time.Duration, err error) error {
	st, _ := status.FromError(err)
	msg := st.Message()
	switch {
	case notFoundMessage(msg):
		return utilexec.ErrExecutableNotFound
	case st.Code() == codes.DeadlineExceeded || strings.Contains(msg, "deadline exceeded") && strings.Contains(msg, "timeout"):
		return fmt.Errorf("exec %s in %s of plugin %s: %w after %s: %w", name, d.Where(), d.Plugin, ErrTimeout, timeout, context.DeadlineExceeded)
	case isGone(err):
		return fmt.Errorf("exec %s in %s of plugin %s: %w: %w", name, d.Where(), d.Plugin, errGone, err)
	case st.Code() == codes.Canceled:
		return fmt.Errorf("exec %s in %s of plugin %s: %w", name, d.Where(), d.Plugin, context.Canceled)
	}
	return fmt.Errorf("exec %s in %s of plugin %s: %w", name, d.Where(), d.Plugin, err)
}

// notFoundMessage recognises the runtimes' "could not start the exec
// because the executable is missing" errors: containerd and CRI-O pass
// runc's message through ("exec: \"x\": executable file not found in $PATH",
// "exec: \"/x\": stat /x: no such file or directory").
func notFoundMessage(msg string) bool {
	if strings.Contains(msg, "executable file not found") {
		return true
	}
	i := strings.Index(msg, `exec: "`)
	return i >= 0 && (strings.Contains(msg[i:], "no such file or directory") || strings.Contains(msg[i:], "permission denied"))
}

// errGone marks an exec that failed because the container was gone.
var errGone = errors.New("container gone")

// isGone reports whether ExecSync failed because the container stopped or
// vanished after the decision, before the command started: NotFound (the
// container was removed), FailedPrecondition, or containerd's "container is
// in CONTAINER_EXITED state" and CRI-O's "container is not created or
// running", which both come as UNKNOWN.
func isGone(err error) bool {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.NotFound, codes.FailedPrecondition:
		return true
	case codes.Unknown:
		msg := st.Message()
		return strings.Contains(msg, "container is in CONTAINER_") && strings.HasSuffix(msg, " state") ||
			strings.Contains(msg, "container is not created or running")
	}
	return false
}

// stdinEmpty reports whether in certainly has nothing to read without
// reading it.
func stdinEmpty(in any) bool {
	switch v := in.(type) {
	case nil:
		return true
	case interface{ Len() int }:
		return v.Len() == 0
	}
	return false
}

// combine returns stdout followed by stderr: ExecSync returns them apart,
// so their interleaving is lost.
func combine(stdout, stderr []byte) []byte {
	out := make([]byte, 0, len(stdout)+len(stderr))
	return append(append(out, stdout...), stderr...)
}
