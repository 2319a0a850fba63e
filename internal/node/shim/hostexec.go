package shim

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	utilexec "k8s.io/utils/exec"
)

// selfSkippingExec is the host executor of the shim in os mode: it looks
// commands up on PATH like os/exec, but never finds the shim itself (its
// install directory, or any file with the device and inode of the running
// executable, kubelet-exec-shim or its helper next to it), so a tool name
// that falls back to the host cannot recurse into the shim.
type selfSkippingExec struct {
	exec    utilexec.Interface
	selfDir string
	self    []syscall.Stat_t // the shim's own files that could be found
	path    string           // PATH to search
}

var _ utilexec.Interface = (*selfSkippingExec)(nil)

// NewHostExec returns the shim's host executor in os mode: os/exec, except
// that a command is never the shim itself.
func NewHostExec() utilexec.Interface { return newSelfSkippingExec() }

func newSelfSkippingExec() *selfSkippingExec {
	e := &selfSkippingExec{exec: utilexec.New(), path: os.Getenv("PATH")}
	if exe, err := os.Executable(); err == nil {
		e.selfDir = filepath.Dir(exe)
		for _, p := range []string{exe, filepath.Join(e.selfDir, BinaryName), filepath.Join(e.selfDir, HelperName)} {
			var st syscall.Stat_t
			if syscall.Stat(p, &st) == nil {
				e.self = append(e.self, st)
			}
		}
	}
	return e
}

func (e *selfSkippingExec) Command(cmd string, args ...string) utilexec.Cmd {
	return e.CommandContext(context.Background(), cmd, args...)
}

func (e *selfSkippingExec) CommandContext(ctx context.Context, cmd string, args ...string) utilexec.Cmd {
	p, err := e.LookPath(cmd)
	if err != nil {
		return &failedCmd{err: err}
	}
	return e.exec.CommandContext(ctx, p, args...)
}

// LookPath finds file on PATH, skipping the shim and every empty or
// relative PATH entry. A name with a slash is used as it is, unless it is
// the shim.
func (e *selfSkippingExec) LookPath(file string) (string, error) {
	if strings.Contains(file, "/") {
		if e.isSelf(file) {
			return "", fmt.Errorf("%s is kubelet-exec-shim itself: %w", file, utilexec.ErrExecutableNotFound)
		}
		// k8s.io/utils/exec reports every start failure as "not found";
		// tell "cannot be invoked" apart here.
		fi, err := os.Stat(file)
		switch {
		case err != nil:
			return "", fmt.Errorf("%s: %w", file, utilexec.ErrExecutableNotFound)
		case fi.IsDir():
			return "", &fs.PathError{Op: "exec", Path: file, Err: syscall.EISDIR}
		case fi.Mode()&0o111 == 0:
			return "", &fs.PathError{Op: "exec", Path: file, Err: fs.ErrPermission}
		}
		return file, nil
	}
	for _, dir := range filepath.SplitList(e.path) {
		// An empty or relative entry names a directory relative to the
		// current one, which would let whoever controls that directory
		// choose the binary that runs as root; os/exec refuses "." too.
		if !filepath.IsAbs(dir) {
			continue
		}
		if e.selfDir != "" && sameDir(dir, e.selfDir) {
			continue
		}
		p := filepath.Join(dir, file)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 || e.isSelf(p) {
			continue
		}
		return p, nil
	}
	return "", utilexec.ErrExecutableNotFound
}

func (e *selfSkippingExec) isSelf(p string) bool {
	var st syscall.Stat_t
	if len(e.self) == 0 || syscall.Stat(p, &st) != nil {
		return false
	}
	for _, s := range e.self {
		if st.Dev == s.Dev && st.Ino == s.Ino {
			return true
		}
	}
	return false
}

func sameDir(a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// failedCmd is a command that could not be created; every way of running it
// returns the error.
type failedCmd struct{ err error }

var _ utilexec.Cmd = (*failedCmd)(nil)

func (c *failedCmd) Run() error                         { return c.err }
func (c *failedCmd) CombinedOutput() ([]byte, error)    { return nil, c.err }
func (c *failedCmd) Output() ([]byte, error)            { return nil, c.err }
func (c *failedCmd) SetDir(string)                      {}
func (c *failedCmd) SetStdin(io.Reader)                 {}
func (c *failedCmd) SetStdout(io.Writer)                {}
func (c *failedCmd) SetStderr(io.Writer)                {}
func (c *failedCmd) SetEnv([]string)                    {}
func (c *failedCmd) StdoutPipe() (io.ReadCloser, error) { return nil, c.err }
func (c *failedCmd) StderrPipe() (io.ReadCloser, error) { return nil, c.err }
func (c *failedCmd) Start() error                       { return c.err }
func (c *failedCmd) Wait() error                        { return c.err }
func (c *failedCmd) Stop()                              {}
