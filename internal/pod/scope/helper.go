package scope

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs/fuseargs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs/clientargs"
)

// DivertedSuffix is appended to a mount helper's path by the image's
// dpkg-divert: /sbin/mount.glusterfs is moved to
// /sbin/mount.glusterfs.distrib and the scope helper takes its name.
const DivertedSuffix = ".distrib"

// Settings of the mount helper, from the mount pod's environment (the
// DaemonSet's env reaches commands run through ExecSync and through the exec
// service alike).
const (
	// EnvScopes turns scopes on ("true", the default) or off ("false").
	EnvScopes = "MOUNTPOD_SCOPES"
	// EnvPlugin names the plugin whose parent the scopes go under; default:
	// the one plugin of EnvPlugins.
	EnvPlugin = "MOUNTPOD_SCOPE_PLUGIN"
	// EnvPlugins is the mount pod's comma-separated list of plugins.
	EnvPlugins = boundary.EnvPlugins
	// EnvScripts lists, comma-separated, the helpers mount-scope
	// translates (mount.glusterfs, mount.fuse.ceph) that are to run the
	// distribution's script instead, as any other helper: a way back
	// should a translation fail a mount the script makes, and the
	// before of a measurement (TestLoad). Empty by default.
	EnvScripts = "MOUNTPOD_HELPER_SCRIPTS"
)

// HelperConfig is what the mount helper needs to know.
type HelperConfig struct {
	// Enabled is false when scopes are turned off: the real helper runs
	// as it would without the scope helper.
	Enabled bool
	// Plugin is the plugin whose parent the scope goes under.
	Plugin string
	// Config makes the scope.
	Config Config
}

// HelperConfigFromEnv reads the helper's settings with getenv (os.Getenv):
// those of [ConfigFromEnv], and MOUNTPOD_SCOPE_PLUGIN or the one plugin of
// MOUNTPOD_PLUGINS.
func HelperConfigFromEnv(getenv func(string) string) (HelperConfig, error) {
	var hc HelperConfig
	var err error
	hc.Enabled, hc.Config, err = ConfigFromEnv(getenv)
	if err != nil || !hc.Enabled {
		return hc, err
	}
	hc.Plugin = strings.TrimSpace(getenv(EnvPlugin))
	if hc.Plugin == "" {
		plugins := PluginsFromEnv(getenv)
		if len(plugins) != 1 {
			return hc, fmt.Errorf("cannot tell which plugin a mount belongs to: %s is %q; set %s",
				EnvPlugins, getenv(EnvPlugins), EnvPlugin)
		}
		hc.Plugin = plugins[0]
	}
	return hc, validate(hc.Plugin, "/")
}

// PluginsFromEnv returns the plugins of MOUNTPOD_PLUGINS.
func PluginsFromEnv(getenv func(string) string) []string {
	var plugins []string
	for _, p := range strings.Split(getenv(EnvPlugins), ",") {
		if p = strings.TrimSpace(p); p != "" {
			plugins = append(plugins, p)
		}
	}
	return plugins
}

// ConfigFromEnv reads the mount pod's scope settings with getenv:
// MOUNTPOD_SCOPES (enabled unless "false") and the MOUNTPOD_SCOPE_*
// settings (docs/scopes.md). The configuration is checked.
func ConfigFromEnv(getenv func(string) string) (enabled bool, cfg Config, err error) {
	switch v := strings.TrimSpace(getenv(EnvScopes)); v {
	case "", "true", "1", "on":
	case "false", "0", "off":
		return false, cfg, nil
	default:
		return false, cfg, fmt.Errorf("%s=%q: want true or false", EnvScopes, v)
	}
	limit, err := ParseMemoryLimit(getenv("MOUNTPOD_SCOPE_MEMORY_LIMIT"))
	if err != nil {
		return false, cfg, fmt.Errorf("MOUNTPOD_SCOPE_MEMORY_LIMIT: %w", err)
	}
	cfg = Config{
		Backend:      Backend(getenv("MOUNTPOD_SCOPE_BACKEND")),
		CgroupRoot:   getenv("MOUNTPOD_SCOPE_CGROUP_ROOT"),
		Parent:       getenv("MOUNTPOD_SCOPE_PARENT"),
		MemoryLimit:  limit,
		CgroupNS:     CgroupNSMode(getenv("MOUNTPOD_SCOPE_CGROUPNS")),
		HostCgroupNS: getenv("MOUNTPOD_SCOPE_HOST_CGROUPNS"),
	}
	if cfg.PidsLimit, err = envInt(getenv, "MOUNTPOD_SCOPE_PIDS_LIMIT"); err != nil {
		return false, cfg, err
	}
	adj, err := envInt(getenv, "MOUNTPOD_SCOPE_OOM_SCORE_ADJ")
	if err != nil {
		return false, cfg, err
	}
	if adj < minOOMScoreAdj || adj > maxOOMScoreAdj {
		return false, cfg, fmt.Errorf("MOUNTPOD_SCOPE_OOM_SCORE_ADJ=%d: want %d to %d", adj, minOOMScoreAdj, maxOOMScoreAdj)
	}
	cfg.OOMScoreAdj = int(adj)
	if s := getenv("MOUNTPOD_SCOPE_SYSTEMD_SOCKETS"); s != "" {
		cfg.SystemdSockets = strings.Split(s, ",")
	}
	if s := getenv("MOUNTPOD_SCOPE_TIMEOUT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return false, cfg, fmt.Errorf("MOUNTPOD_SCOPE_TIMEOUT=%q: want a positive duration", s)
		}
		cfg.Timeout = d
	}
	if _, err := cfg.withDefaults(); err != nil {
		return false, cfg, err
	}
	return true, cfg, nil
}

// envInt reads the whole number of the setting name with getenv; empty
// means 0.
func envInt(getenv func(string) string, name string) (int64, error) {
	s := strings.TrimSpace(getenv(name))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a whole number: %w", name, s, err)
	}
	return n, nil
}

// IsMountHelperName reports whether name (a program's argv[0]) is a mount
// helper's, such as /sbin/mount.glusterfs.
func IsMountHelperName(name string) bool {
	b := filepath.Base(name)
	return strings.HasPrefix(b, "mount.") && len(b) > len("mount.")
}

// HelperTarget returns the mount target of a mount helper's arguments
// ([boundary.MountHelperTarget]).
func HelperTarget(argv []string) (target string, ok bool) { return boundary.MountHelperTarget(argv) }

// RealHelper returns the path of the diverted helper behind the helper run
// as argv0: argv0 (found on PATH when it has no slash) plus
// [DivertedSuffix].
func RealHelper(argv0 string) (string, error) {
	p := argv0
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", &commandError{code: ExitNotFound, err: err}
		}
		p = lp
	}
	real := p + DivertedSuffix
	st, err := os.Stat(real)
	switch {
	case err != nil:
		return "", &commandError{code: ExitNotFound, err: fmt.Errorf("mount helper %s: the real helper %s: %w", argv0, real, err)}
	case !st.Mode().IsRegular() || st.Mode()&0o111 == 0:
		return "", &commandError{code: ExitCannotRun, err: fmt.Errorf("mount helper %s: the real helper %s is not an executable file (mode %s)", argv0, real, st.Mode())}
	}
	return real, nil
}

// RunHelper runs as the mount helper argv[0]: when argv is a mount and
// scopes are on (settings read with getenv, see [HelperConfigFromEnv]), it
// places the calling process in the scope of the mount target under the
// plugin's parent and raises its oom_score_adj to at least the configured
// one (see [Config.OOMScoreAdj]); then it replaces itself with the real
// helper, with the
// same arguments and environment, so the daemon the helper starts is born in
// the scope. A call that is not a mount (`mount.glusterfs -V`) runs the real
// helper whatever the settings. It returns only on failure, and then nothing
// was mounted: a mount that cannot get its scope fails rather than start a
// daemon that would die with the mount pod.
//
// A helper of [translatedHelpers] (mount.fuse.ceph, mount.glusterfs) is
// not run at all: its arguments are translated and checked before anything
// else (a refused mount neither gets a scope nor runs anything), and the
// program it would have started (ceph-fuse, glusterfs, found on
// getenv("PATH")) runs in its place. A helper with checks around the mount
// (mount.glusterfs) starts the program as its child and waits for it: the
// target is checked before (nothing runs when it fails) and the mount after
// (a client that exited 0 without a mount that answers is a failure, and a
// mount made is detached); RunHelper then returns nil for a mount made.
// Such a helper, once in its scope, first runs itself again there
// ([reexecInScope], which checks the target again), so that the memory of
// the process that waits is the scope's, not the mount pod's.
func RunHelper(getenv func(string) string, argv []string, env []string) error {
	if len(argv) == 0 {
		return errors.New("mount helper: no arguments")
	}
	name := filepath.Base(argv[0])
	var (
		path   string
		args   []string
		target string
		mount  bool
		th     translatedHelper
		mark   clientargs.Mark
	)
	scripts, err := scriptHelpers(getenv)
	if err != nil {
		return fmt.Errorf("mount helper %s: %w", name, err)
	}
	if t, ok := translatedHelpers[name]; ok && !scripts[name] {
		var err error
		th = t
		if args, target, mount, err = th.translate(argv); err != nil {
			return fmt.Errorf("mount helper %s: %w", name, err)
		}
		if path, err = lookPath(getenv, th.program); err != nil {
			return err
		}
		if mount && th.checked {
			if mark, err = clientargs.Check(target); err != nil {
				return fmt.Errorf("mount helper %s: %w", name, err)
			}
		}
	} else {
		var err error
		if path, err = RealHelper(argv[0]); err != nil {
			return err
		}
		args = argv
		target, mount = HelperTarget(argv)
	}
	placed := mount && th.checked && inScope(getenv)
	env = withoutInScope(env)
	if mount && !placed {
		hc, err := HelperConfigFromEnv(getenv)
		if err != nil {
			return fmt.Errorf("mount helper %s: scope for %s: %w", name, target, err)
		}
		if hc.Enabled {
			m, err := New(hc.Config)
			if err != nil {
				return fmt.Errorf("mount helper %s: scope for %s: %w", name, target, err)
			}
			// Born in its scope (its mount(8) was placed early:
			// PlaceEarly): only Place moves the helper, so it was there
			// from its start, its memory the scope's, with nothing for a
			// Place or [reexecInScope] to give.
			born := InItsScope(m, hc.Plugin, target)
			if !born {
				_, err = m.Place(hc.Plugin, target, 0)
			}
			m.Close()
			if err == nil {
				err = raiseOOMScoreAdj(oomScoreAdjFile(hc.Config, 0), hc.Config.OOMScoreAdj)
			}
			if err != nil {
				return fmt.Errorf("mount helper %s: scope for %s: %w", name, target, err)
			}
			if th.checked && !born {
				reexecInScope(argv, env)
				// Still here: /proc/self/exe cannot be run. The mount
				// goes on in this process, its runtime charged to the
				// mount pod.
			}
		}
	}
	if !mount || !th.checked {
		err := execve(path, args, env)
		return &commandError{code: commandExitCode(err), err: fmt.Errorf("exec %s: %w", path, err)}
	}
	if err := runChild(path, args, env); err != nil {
		return err
	}
	if err := clientargs.Verify(mark, clientargs.LogFile(args)); err != nil {
		return fmt.Errorf("mount helper %s: %w", name, err)
	}
	return nil
}

// EnvInScope marks the helper re-executed in its scope (see
// [reexecInScope]): its value is the process's own PID, which an
// execve keeps, so that the setting inherited from anywhere else (a
// DaemonSet's env, a caller's) is never taken for it.
const EnvInScope = "MOUNTPOD_HELPER_IN_SCOPE"

// reexecInScope replaces a helper that waits for its client (a checked
// helper of [translatedHelpers]) with a fresh run of itself once it is in
// its scope, marked with [EnvInScope]; it returns only when the execve
// fails. Memory is charged to the cgroup a process was in when it
// touched it, and moving a process does not move the charge: the Go
// runtime this process started in the mount pod's cgroup (about 1 MiB with
// its threads and page tables) would stay the mount pod's until the mount
// is made, for every mount in flight. After the execve the mount pod keeps
// only the process's kernel entry; the helper's memory is the scope's, as
// is the client's.
func reexecInScope(argv, env []string) {
	marked := append(withoutInScope(env), EnvInScope+"="+strconv.Itoa(os.Getpid()))
	_ = execve("/proc/self/exe", argv, marked)
}

// inScope reports whether this process is the run of [reexecInScope].
func inScope(getenv func(string) string) bool {
	return getenv(EnvInScope) == strconv.Itoa(os.Getpid())
}

// withoutInScope returns env less [EnvInScope]: the client never sees it.
func withoutInScope(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvInScope+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// runChild runs path with args and env, with this process's standard
// streams, and waits for it. A client that fails is the script's failure
// (exit 1), with the client's own messages before it on stderr.
var runChild = func(path string, args, env []string) error {
	cmd := &exec.Cmd{Path: path, Args: args, Env: env, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return &commandError{code: 1, err: fmt.Errorf("mounting %s on %s failed: %s %v", filepath.Base(path), args[len(args)-1], filepath.Base(path), ee.ProcessState)}
	default:
		return &commandError{code: commandExitCode(err), err: fmt.Errorf("exec %s: %w", path, err)}
	}
}

// scriptHelpers reads [EnvScripts]: a name that is not a translated
// helper's is refused, so that a misspelt name does not go unnoticed.
func scriptHelpers(getenv func(string) string) (map[string]bool, error) {
	v := getenv(EnvScripts)
	if v == "" {
		return nil, nil
	}
	m := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if _, ok := translatedHelpers[n]; !ok {
			return nil, fmt.Errorf("%s=%q: %q is not a helper mount-scope translates (%s, %s)", EnvScripts, v, n, clientargs.Helper, fuseargs.Helper)
		}
		m[n] = true
	}
	return m, nil
}

// execve replaces the process (a seam for the tests, which record the call).
var execve = syscall.Exec

// defaultPath is searched when PATH is empty, as sh(1) would.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// lookPath finds the executable regular file name in the absolute
// directories of getenv("PATH") ([defaultPath] when empty).
func lookPath(getenv func(string) string, name string) (string, error) {
	dirs := getenv("PATH")
	if dirs == "" {
		dirs = defaultPath
	}
	for _, dir := range filepath.SplitList(dirs) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &commandError{code: ExitNotFound, err: fmt.Errorf("%s: %w (PATH %q)", name, exec.ErrNotFound, dirs)}
}

// A translatedHelper is a mount helper whose own program is never run:
// mount-scope, run under the helper's name, translates mount(8)'s arguments
// itself and executes program (looked up on PATH) with them, without a
// shell.
type translatedHelper struct {
	// program is what the helper would have started.
	program string
	// translate turns the helper's argv (argv[0] its name) into program's
	// (argv[0] program). mount is false for a call that is not a mount
	// (no scope); target is then empty. An error means nothing runs.
	translate func(argv []string) (args []string, target string, mount bool, err error)
	// checked: a mount's target is checked before ([clientargs.Check]),
	// program runs as a child and the mount is verified after it
	// ([clientargs.Verify]); the mount's target is args' last.
	checked bool
}

// translatedHelpers are the helpers mount-scope replaces rather than runs,
// by the base name mount(8) runs them under. Each translation is its file
// system's (mount.fuse.ceph: package fuseargs, beside package cephfs, which
// makes the options it reads; mount.glusterfs: package clientargs, beside
// package glusterfs), and links the standard library (and golang.org/x/sys)
// only.
var translatedHelpers = map[string]translatedHelper{
	fuseargs.Helper:   {program: fuseargs.Program, translate: fuseargs.Args},
	clientargs.Helper: {program: clientargs.Program, translate: clientargs.Args, checked: true},
}

// HelperUsage is printed when the scope helper is run under its own name.
func HelperUsage(self string) string {
	return "usage: " + strconv.Quote(self) + " runs as a mount helper: link it as mount.TYPE next to the real helper moved to mount.TYPE" + DivertedSuffix +
		" (dpkg-divert); mount(8) then runs it, and it starts the real helper in the mount's scope (docs/scopes.md)\n"
}
