package shim

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

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
}

var _ Backend = (*launcher)(nil)

func (l *launcher) Run(ctx context.Context, cfg *Config, plugin string, argv []string, stdio IO) int {
	if err := registration.ValidatePluginName(plugin); err != nil {
		fmt.Fprintf(stdio.Stderr, "%s: %v\n", BinaryName, err)
		return ExitShimFailed
	}
	if cfg.HostMode == HostModeOS {
		// Whatever is at the registration's path, the helper reads and
		// judges it (and reports a bad one exactly as it would alone).
		registered, err := registration.Exists(cfg.RegistrationDir, plugin)
		if err == nil && !registered {
			if cfg.Verbose {
				slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).DebugContext(ctx,
					"exec decision", "decision", "plugin "+plugin+": host (not registered)")
			}
			host := hostTarget{newSelfSkippingExec()}
			return RunUtility(ctx, cfg, plugin, argv, stdio, func(context.Context) (Target, error) { return host, nil })
		}
	}
	return l.handover(fmt.Sprintf("plugin %s", plugin), stdio)
}

func (l *launcher) Status(_ context.Context, _ *Config, _, _ string, stdio IO) error {
	if code := l.handover("status", stdio); code != 0 {
		return exitWith(code)
	}
	return nil
}

// handover replaces the process with the helper; it returns only when that
// fails, with the shim's failure code after a diagnostic.
func (l *launcher) handover(what string, stdio IO) int {
	helper, err := helperPath()
	if err == nil {
		err = syscall.Exec(helper, l.args, os.Environ())
		err = fmt.Errorf("run %s: %w", helper, err)
	}
	fmt.Fprintf(stdio.Stderr, "%s: %s needs the container runtime, which %s reaches: %v\n", BinaryName, what, HelperName, err)
	return ExitShimFailed
}

// helperPath returns the helper next to the running executable, once it is
// a regular file, executable, owned by root or the shim's own user and
// writable by nobody else: the shim runs it as root.
func helperPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	p := filepath.Join(filepath.Dir(exe), HelperName)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", fmt.Errorf("%w (install it next to %s: %s install does)", err, exe, BinaryName)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file (%s)", p, fi.Mode().Type())
	case fi.Mode().Perm()&0o111 == 0:
		return "", &fs.PathError{Op: "exec", Path: p, Err: fs.ErrPermission}
	case st == nil || (st.Uid != 0 && int(st.Uid) != os.Geteuid()):
		return "", fmt.Errorf("%s is not owned by root or uid %d: refusing to run it", p, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return "", fmt.Errorf("%s is writable by group or others (%s): refusing to run it", p, fi.Mode().Perm())
	}
	return p, nil
}

// hostTarget runs commands on the host.
type hostTarget struct{ *selfSkippingExec }

func (hostTarget) OnHost() bool  { return true }
func (hostTarget) Where() string { return "host" }
