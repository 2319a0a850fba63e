package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/boundary/execsocket"
	"github.com/mountcontainers/mountcontainers/internal/node/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// socketProbeTimeout bounds proving a registration live through its exec
// socket.
const socketProbeTimeout = execsocket.ProbeTimeout

// liveSocket is a registration's exec socket that proved its container
// live (execsocket.Prove): the shim runs the command through it itself, so
// that the live path needs neither the helper nor the runtime.
type liveSocket struct {
	plugin string
	reg    registration.Registration
	conn   *execclient.Conn
	proof  execsocket.Proof
	log    *slog.Logger // one record per command
}

// proveLive returns the registration's exec socket when it proves the
// registered container live, or why not. Anything short of a proof (no or
// an untrusted registration, no socket, a socket that does not answer, or
// answers for another pod, a process the kernel does not place in the
// registered pod's container, or cgroups that cannot be told from here) is
// for the helper to decide through the runtime, which reports a bad
// registration as it would alone.
func proveLive(ctx context.Context, cfg *Config, plugin, procRoot string) (*liveSocket, string) {
	reg, ok, err := registration.Read(cfg.RegistrationDir, plugin)
	switch {
	case err != nil:
		return nil, err.Error()
	case !ok:
		return nil, string(boundary.ReasonNotRegistered)
	case reg.ExecSocket == "":
		return nil, execsocket.NoSocket
	}
	path, err := execsocket.CheckSocket(cfg.RegistrationDir, reg.ExecSocket)
	if err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, socketProbeTimeout)
	defer cancel()
	conn, err := execclient.Dial(ctx, path)
	if err != nil {
		return nil, err.Error()
	}
	proof := execsocket.Prove(ctx, conn, execsocket.Identity{
		PodNamespace: reg.PodNamespace, PodName: reg.PodName, PodUID: reg.PodUID, ContainerName: reg.ContainerName,
	}, procRoot)
	if !proof.Proved() {
		conn.Close()
		return nil, proof.Err().Error()
	}
	return &liveSocket{plugin: plugin, reg: reg, conn: conn, proof: proof}, ""
}

// logDecision logs the decision with the keys of every placement decision
// (pkg/exec's Decision.LogValue), so that one query finds the shim's and
// the helper's alike.
func (l *liveSocket) logDecision(ctx context.Context, log *slog.Logger) {
	log.DebugContext(ctx, "exec decision", slog.Group("decision",
		"plugin", l.plugin, "where", l.Where(), "reason", string(boundary.ReasonRunning),
		"pod", l.reg.PodNamespace+"/"+l.reg.PodName, "podUID", l.reg.PodUID, "container", l.reg.ContainerName,
		"via", string(boundary.ViaSocket), "viaReason", l.proof.Reason()))
}

func (l *liveSocket) OnHost() bool  { return false }
func (l *liveSocket) Where() string { return "container " + l.proof.ContainerID }

// CommandContext returns the command through the exec socket.
func (l *liveSocket) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	return &socketCmd{l: l, ctx: ctx, argv: append([]string{cmd}, args...), log: l.log}
}

// socketCmd is a utilexec.Cmd through the exec socket, with what
// RunUtility uses of one: standard streams and Run.
type socketCmd struct {
	l              *liveSocket
	ctx            context.Context
	argv           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
}

var _ utilexec.Cmd = (*socketCmd)(nil)

var errUnsupported = errors.New("not supported by the shim's exec socket command")

func (c *socketCmd) SetStdin(in io.Reader)   { c.stdin = in }
func (c *socketCmd) SetStdout(out io.Writer) { c.stdout = out }
func (c *socketCmd) SetStderr(out io.Writer) { c.stderr = out }
func (c *socketCmd) SetDir(string)           {}
func (c *socketCmd) SetEnv([]string)         {}
func (c *socketCmd) Stop()                   {}
func (c *socketCmd) Start() error            { return errUnsupported }
func (c *socketCmd) Wait() error             { return errUnsupported }
func (c *socketCmd) CombinedOutput() ([]byte, error) {
	return nil, errUnsupported
}
func (c *socketCmd) Output() ([]byte, error) { return nil, errUnsupported }
func (c *socketCmd) StdoutPipe() (io.ReadCloser, error) {
	return nil, errUnsupported
}
func (c *socketCmd) StderrPipe() (io.ReadCloser, error) {
	return nil, errUnsupported
}

// Run runs the command to its end; its errors are package exec's for the
// same outcome, so that RunUtility gives the same exit codes. An error
// wrapping execclient.ErrNotStarted means nothing ran: the helper may place
// the command afresh.
func (c *socketCmd) Run() error {
	start := time.Now()
	var timeout time.Duration
	if dl, ok := c.ctx.Deadline(); ok {
		timeout = max(time.Millisecond, time.Until(dl))
	}
	res, err := c.l.conn.Run(c.ctx, execclient.Command{
		Argv: c.argv, Timeout: timeout, Plugin: c.l.plugin,
		ExpectPodUID: c.l.reg.PodUID, ExpectContainer: c.l.reg.ContainerName,
		Stdin: c.stdin, Stdout: c.stdout, Stderr: c.stderr,
	})
	where := fmt.Sprintf("in %s of plugin %s", c.l.Where(), c.l.plugin)
	switch {
	case errors.Is(err, execclient.ErrNotStarted):
		return err
	case err != nil && errors.Is(err, context.Canceled):
		err = fmt.Errorf("exec %s %s: %w", c.argv[0], where, context.Canceled)
	case err != nil:
		err = fmt.Errorf("exec %s %s via exec socket: %w", c.argv[0], where, err)
	case res.NotFound:
		err = utilexec.ErrExecutableNotFound
	case res.CannotRun:
		if c.stderr != nil {
			fmt.Fprintf(c.stderr, "%s\n", res.Message)
		}
		err = utilexec.CodeExitError{Err: fmt.Errorf("exit status 126 (%s: %s)", where, res.Message), Code: ExitCannotRun}
	case res.TimedOut:
		err = fmt.Errorf("exec %s %s: timed out after %s: %w", c.argv[0], where, timeout, context.DeadlineExceeded)
	case res.Code != 0:
		err = utilexec.CodeExitError{Err: fmt.Errorf("exit status %d (%s)", res.Code, where), Code: res.Code}
	case res.StdoutTruncated || res.StderrTruncated:
		err = fmt.Errorf("exec %s %s via exec socket: output over the 16 MiB limit", c.argv[0], where)
	}
	c.observe(start, res, err)
	return err
}

// observe logs one record per command, with the keys and values of every
// command's record (pkg/exec's ExecEvent.LogValue, which its LogObserver
// logs for the helper).
func (c *socketCmd) observe(start time.Time, res execclient.Result, err error) {
	if c.log == nil {
		return
	}
	level, result := slog.LevelDebug, boundary.ResultOf(err)
	var exit utilexec.ExitError
	attrs := []any{"plugin", c.l.plugin, "tool", filepath.Base(c.argv[0]), "via", string(boundary.PathSocket), "result", string(result),
		"took", time.Since(start).Round(time.Microsecond)}
	if err == nil || errors.As(err, &exit) {
		attrs = append(attrs, "exitCode", res.Code)
	}
	attrs = append(attrs, "where", c.l.Where())
	if err != nil {
		level = slog.LevelInfo
		attrs = append(attrs, "err", err.Error())
	}
	c.log.Log(context.Background(), level, "exec", slog.Group("command", attrs...))
}
