package shim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// HelperName is the binary that does what needs the container runtime,
// installed next to kubelet-exec-shim: it is the whole shim, linked with
// the runtime's client.
const HelperName = BinaryName + "-cri"

// launcher is the backend of kubelet-exec-shim itself. A plugin with no
// registration runs on the host right here: that decision needs no runtime,
// only two stats. Everything else (a registration, trusted or not, host
// mode nsenter, status) replaces the process with [HelperName] and the
// same arguments, so the helper decides and reports exactly as if it had
// been run in the first place.
type launcher struct {
	args []string // the shim's own, handed on as they are
	proc string   // procfs, "/proc" when empty (tests give another)
}

var _ Backend = (*launcher)(nil)

func (l *launcher) Run(ctx context.Context, cfg *Config, plugin string, argv []string, stdio IO) int {
	if err := registration.ValidatePluginName(plugin); err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", BinaryName, err)
		return ExitShimFailed
	}
	// Whatever is at the registration's path, the helper reads and judges
	// it (and reports a bad one exactly as it would alone).
	registered, err := registration.Exists(cfg.RegistrationDir, plugin)
	if err == nil && !registered && cfg.HostMode == HostModeOS {
		// The keys of every placement decision, as the helper logs them.
		cfg.Logger(stdio.Stderr).DebugContext(ctx, "exec decision", slog.Group("decision",
			"plugin", plugin, "where", "host", "reason", string(boundary.ReasonNotRegistered)))
		host := hostTarget{newSelfSkippingExec()}
		return RunUtility(ctx, cfg, plugin, argv, stdio, func(context.Context) (Target, error) { return host, nil })
	}
	if err == nil && registered && cfg.ExecMode != string(boundary.ModeCRI) {
		// A live exec socket proves the container runs (execsocket.Prove,
		// as the helper's resolver applies it first): no helper, no
		// runtime.
		log := cfg.Logger(stdio.Stderr)
		live, why := proveLive(ctx, cfg, plugin, l.procRoot())
		if live == nil {
			log.DebugContext(ctx, "exec socket does not prove the registration live; the runtime decides", "plugin", plugin, "why", why)
			return l.handover(fmt.Sprintf("plugin %s", plugin), stdio)
		}
		defer live.conn.Close()
		live.log = log
		live.logDecision(ctx, log)
		code, notStarted := runUtility(ctx, cfg, plugin, argv, stdio, func(context.Context) (Target, error) { return live, nil })
		if !notStarted {
			return code
		}
		// The socket went away or turned to another pod before the
		// command started: decided afresh, once, as package exec does.
		log.DebugContext(ctx, "exec socket unusable before the command started; the runtime decides", "plugin", plugin)
	}
	return l.handover(fmt.Sprintf("plugin %s", plugin), stdio)
}

// procRoot is the procfs of the shim's PID namespace.
func (l *launcher) procRoot() string {
	if l.proc != "" {
		return l.proc
	}
	return "/proc"
}

func (l *launcher) Status(_ context.Context, _ *Config, _, _ string, stdio IO) error {
	if code := l.handover("status", stdio); code != 0 {
		return exitWith(code)
	}
	return nil
}

// handover replaces the process with the helper; it returns only when that
// fails, with the shim's failure code after a diagnostic. The helper is
// executed through the very handle that was checked (/proc/self/fd/N), so
// nothing can be put in its place between the check and the exec.
// syscall.Exec, rather than a raw execveat, keeps the Go runtime's own
// preparation for exec.
func (l *launcher) handover(what string, stdio IO) int {
	fd, helper, err := openHelper()
	if err == nil {
		err = syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", fd), l.args, os.Environ())
		unix.Close(fd)
		err = fmt.Errorf("run %s: %w", helper, err)
	}
	fmt.Fprintf(stdio.Stderr, "%s: %s needs the container runtime, which %s reaches: %v\n", BinaryName, what, HelperName, err)
	return ExitShimFailed
}

// openHelper opens the helper next to the running executable; see
// [openHelperIn].
func openHelper() (fd int, path string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return -1, "", fmt.Errorf("find own executable: %w", err)
	}
	dir := filepath.Dir(exe)
	fd, err = openHelperIn(dir)
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w (install it next to %s: %s install does)", err, exe, BinaryName)
	}
	return fd, filepath.Join(dir, HelperName), err
}

// openHelperIn returns an O_PATH descriptor of dir's helper once the opened
// file is a regular file (never a symlink), executable, owned by root or
// the shim's own user and writable by nobody else, in a directory that
// passes [CheckTrustedDir] (its ancestors up to / too): the shim runs it as
// root.
func openHelperIn(dir string) (int, error) {
	dfd, dir, err := openTrustedDir(dir)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dfd)
	p := filepath.Join(dir, HelperName)
	fd, err := unix.Openat(dfd, HelperName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("%s is not a regular file (%s)", p, registration.FileType(st.Mode))
	} else if st.Mode&0o111 == 0 {
		err = &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	} else {
		err = checkOwnerMode(fd, p)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// checkOwnerMode refuses the opened file at path unless it is owned by root
// or the effective user and not writable by group or others.
func checkOwnerMode(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	perm := fs.FileMode(st.Mode & 0o777)
	switch {
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is not owned by root or uid %d: refusing to run it", path, os.Geteuid())
	case perm&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others (%s): refusing to run it", path, perm)
	}
	return nil
}

// hostTarget runs commands on the host.
type hostTarget struct{ *selfSkippingExec }

func (hostTarget) OnHost() bool  { return true }
func (hostTarget) Where() string { return "host" }
