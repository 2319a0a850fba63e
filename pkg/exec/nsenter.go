package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	utilexec "k8s.io/utils/exec"
)

// DefaultHostPath is searched, in the host's root file system, by
// [Nsenter.LookPath].
var DefaultHostPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// Nsenter is a host executor for callers that themselves run in a
// container with the host's root file system mounted at HostRoot and the
// host's PID namespace (so that HostRoot/proc/1 is the host's init). Each
// command runs as
//
//	nsenter --mount=<HostRoot>/proc/1/ns/mnt [--wd=DIR] -- <absolute host path> ARGS...
//
// The executable is looked up in the host's file system under HostRoot
// (PATH entries of [DefaultHostPath]); a symbolic link as the last path
// component is followed within HostRoot, other absolute links are not.
type Nsenter struct {
	// HostRoot is where the host's "/" is mounted, e.g. "/host".
	HostRoot string
	// Exec runs the nsenter binary; default utilexec.New().
	Exec utilexec.Interface
	// Path is searched for executables; default DefaultHostPath.
	Path []string
}

var _ utilexec.Interface = (*Nsenter)(nil)

// NewNsenter returns an nsenter host executor for the host root at
// hostRoot.
func NewNsenter(hostRoot string) *Nsenter {
	return &Nsenter{HostRoot: hostRoot}
}

func (n *Nsenter) exec() utilexec.Interface {
	if n.Exec == nil {
		return utilexec.New()
	}
	return n.Exec
}

// Command returns a command run in the host's mount namespace.
func (n *Nsenter) Command(cmd string, args ...string) utilexec.Cmd {
	return n.CommandContext(context.Background(), cmd, args...)
}

// CommandContext returns a command run in the host's mount namespace.
func (n *Nsenter) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	return &nsenterCmd{n: n, ctx: ctx, name: cmd, args: args}
}

// LookPath returns the host path of file: file itself when it contains a
// slash (it must be absolute), else the first match in the search path.
// A missing file is exactly utilexec.ErrExecutableNotFound.
func (n *Nsenter) LookPath(file string) (string, error) {
	if strings.Contains(file, "/") {
		if !path.IsAbs(file) {
			return "", fmt.Errorf("look up %s on the host: relative paths are not supported", file)
		}
		if n.executable(file) {
			return path.Clean(file), nil
		}
		return "", utilexec.ErrExecutableNotFound
	}
	dirs := n.Path
	if dirs == nil {
		dirs = DefaultHostPath
	}
	for _, d := range dirs {
		if p := path.Join(d, file); n.executable(p) {
			return p, nil
		}
	}
	return "", utilexec.ErrExecutableNotFound
}

// executable reports whether the host path p is an executable regular
// file, following symbolic links of the last component within HostRoot.
func (n *Nsenter) executable(p string) bool {
	for range 40 {
		full := filepath.Join(n.HostRoot, p)
		st, err := os.Lstat(full)
		if err != nil {
			return false
		}
		if st.Mode()&os.ModeSymlink == 0 {
			return st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
		}
		target, err := os.Readlink(full)
		if err != nil {
			return false
		}
		if path.IsAbs(target) {
			p = target
		} else {
			p = path.Join(path.Dir(p), target)
		}
	}
	return false
}

// nsenterCmd builds the nsenter command when it starts, since SetDir turns
// into an argument (entering a mount namespace resets the working
// directory).
type nsenterCmd struct {
	n      *Nsenter
	ctx    context.Context
	name   string
	args   []string
	dir    string
	env    []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	cmd    utilexec.Cmd
	err    error
}

var _ utilexec.Cmd = (*nsenterCmd)(nil)

func (c *nsenterCmd) build() (utilexec.Cmd, error) {
	if c.cmd != nil || c.err != nil {
		return c.cmd, c.err
	}
	p, err := c.n.LookPath(c.name)
	if err != nil {
		c.err = err
		return nil, err
	}
	args := []string{"--mount=" + filepath.Join(c.n.HostRoot, "proc/1/ns/mnt")}
	if c.dir != "" {
		args = append(args, "--wd="+c.dir)
	}
	args = append(append(args, "--", p), c.args...)
	cmd := c.n.exec().CommandContext(c.ctx, "nsenter", args...)
	if c.env != nil {
		cmd.SetEnv(c.env)
	}
	if c.stdin != nil {
		cmd.SetStdin(c.stdin)
	}
	if c.stdout != nil {
		cmd.SetStdout(c.stdout)
	}
	if c.stderr != nil {
		cmd.SetStderr(c.stderr)
	}
	c.cmd = cmd
	return cmd, nil
}

// SetDir sets the working directory, a host path (nsenter --wd).
func (c *nsenterCmd) SetDir(dir string) { c.dir = dir }

// SetStdin sets standard input.
func (c *nsenterCmd) SetStdin(in io.Reader) { c.stdin = in }

// SetStdout sets standard output.
func (c *nsenterCmd) SetStdout(out io.Writer) { c.stdout = out }

// SetStderr sets standard error.
func (c *nsenterCmd) SetStderr(out io.Writer) { c.stderr = out }

// SetEnv sets the environment of nsenter, which the command inherits.
func (c *nsenterCmd) SetEnv(env []string) { c.env = env }

// StdoutPipe builds the command and returns its stdout pipe.
func (c *nsenterCmd) StdoutPipe() (io.ReadCloser, error) {
	cmd, err := c.build()
	if err != nil {
		return nil, err
	}
	return cmd.StdoutPipe()
}

// StderrPipe builds the command and returns its stderr pipe.
func (c *nsenterCmd) StderrPipe() (io.ReadCloser, error) {
	cmd, err := c.build()
	if err != nil {
		return nil, err
	}
	return cmd.StderrPipe()
}

// Start builds and starts the command.
func (c *nsenterCmd) Start() error {
	cmd, err := c.build()
	if err != nil {
		return err
	}
	return cmd.Start()
}

// Wait waits for the started command.
func (c *nsenterCmd) Wait() error {
	if c.cmd == nil {
		if c.err != nil {
			return c.err
		}
		return errors.New("exec: not started")
	}
	return c.cmd.Wait()
}

// Run builds and runs the command.
func (c *nsenterCmd) Run() error {
	cmd, err := c.build()
	if err != nil {
		return err
	}
	return cmd.Run()
}

// Output builds and runs the command and returns its stdout.
func (c *nsenterCmd) Output() ([]byte, error) {
	cmd, err := c.build()
	if err != nil {
		return nil, err
	}
	return cmd.Output()
}

// CombinedOutput builds and runs the command and returns its output.
func (c *nsenterCmd) CombinedOutput() ([]byte, error) {
	cmd, err := c.build()
	if err != nil {
		return nil, err
	}
	return cmd.CombinedOutput()
}

// Stop signals the started command.
func (c *nsenterCmd) Stop() {
	if c.cmd != nil {
		c.cmd.Stop()
	}
}
