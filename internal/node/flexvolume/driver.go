package flexvolume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// DefaultTimeout bounds each mount or umount the driver runs. The kubelet
// puts no bound on a Flexvolume call.
const DefaultTimeout = time.Minute

// Replies of a call.
const (
	StatusSuccess      = "Success"
	StatusFailure      = "Failure"
	StatusNotSupported = "Not supported"
)

// Status is the JSON reply of a driver call.
type Status struct {
	Status       string        `json:"status"`
	Message      string        `json:"message,omitempty"`
	Capabilities *Capabilities `json:"capabilities,omitempty"`
}

// Capabilities is the init reply's capabilities object. The kubelet assumes
// true for any capability left out, so all are given.
type Capabilities struct {
	// Attach is false: a GlusterFS volume needs no attach/detach.
	Attach bool `json:"attach"`
	// SELinuxRelabel is false: a FUSE mount cannot be relabelled.
	SELinuxRelabel bool `json:"selinuxRelabel"`
	// FSGroup is false: like the in-tree glusterfs plugin, ownership of a
	// shared volume is not changed on every mount.
	FSGroup bool `json:"fsGroup"`
	// SupportsMetrics is false.
	SupportsMetrics bool `json:"supportsMetrics"`
	// RequiresFSResize is false.
	RequiresFSResize bool `json:"requiresFSResize"`
}

// ExitCode is the driver's exit code for the reply: 1 for Not supported,
// 0 for Success and for Failure.
//
// A failure exits 0 because the kubelet logs every argument of a call that
// exits non-zero without replying Not supported, and the arguments hold
// the volume's options, among them its secrets (kubernetes.io/secret/*,
// such as a CephFS user's key); on exit 0 it takes a Failure reply as the
// call's failure and logs only its message. Every call is treated alike,
// not only mount: the kubelet passes the options to other calls too
// (getvolumename, attach, mountdevice), and a call's name is no promise
// of what its arguments hold. Not supported keeps exit 1, which the
// kubelet handles without logging the arguments.
func (s Status) ExitCode() int {
	if s.Status == StatusNotSupported {
		return 1
	}
	return 0
}

// MountChecker answers whether a path is a mount point, on the node (a
// mount.Interface satisfies it).
type MountChecker interface {
	IsLikelyNotMountPoint(file string) (bool, error)
}

// Driver serves the Flexvolume calls of one driver.
type Driver struct {
	// FS is the file system the driver mounts; default [glusterfs.FS].
	FS fs.Filesystem
	// Plugin is the volume plugin whose mount pod runs the utilities.
	Plugin string
	// Exec runs mount and umount, and keeps the mount records: the
	// plugin's executor of a resolver.
	Exec mcexec.Executor
	// Mounts answers mount-point queries on the node; default mount.New("").
	Mounts MountChecker
	// Timeout bounds each mount or umount; default [DefaultTimeout].
	Timeout time.Duration
	// Servers decides which servers a volume may name; the zero value is
	// the policy of an empty allow-list ([Settings].AllowedServers).
	Servers fs.ServerPolicy
	// Resolver looks up server names on the node; default
	// net.DefaultResolver.
	Resolver fs.Resolver
	// SecretsDir receives the secrets of mounts that need one
	// ([fs.Mount].Secret); it must be on a tmpfs. Default [DefaultSecretsDir].
	SecretsDir string
	// Log receives one record per call (the call, its target directory and
	// its reply); nil discards it. See [Settings].LogFile.
	Log *slog.Logger
	// Notice, when set, is added to the message of every Success and
	// Failure reply: a problem that did not stop the call, such as a log
	// file that could not be opened. The kubelet reads standard error
	// as part of the reply, so the reply is the only place to say it.
	Notice string
}

// Run serves the call in args (args[0] is the call, such as "mount"),
// writes the JSON reply to out and returns the exit code. The reply never
// quotes a secret the arguments carry (see [redact]), and a panic is a
// Failure, not a crash: a crash exits non-zero (see [Status.ExitCode]).
func (d *Driver) Run(ctx context.Context, args []string, out io.Writer) int {
	start := time.Now()
	s := redact(d.safeCall(ctx, args), args)
	if d.Notice != "" && s.Status != StatusNotSupported {
		s.Message = strings.TrimPrefix(s.Message+"; "+d.Notice, "; ")
	}
	d.logCall(ctx, args, s, start)
	return WriteStatus(out, s)
}

// safeCall is [Driver.Call] with a panic turned into a Failure.
func (d *Driver) safeCall(ctx context.Context, args []string) (s Status) {
	defer func() {
		if r := recover(); r != nil {
			s = failure("internal error: %v", r)
		}
	}()
	return d.Call(ctx, args)
}

// logCall writes the record of a call to the driver's log, if any: the
// call, its target directory (never the options) and its reply.
func (d *Driver) logCall(ctx context.Context, args []string, s Status, start time.Time) {
	if d.Log == nil {
		return
	}
	attrs := []any{"status", s.Status, "message", s.Message, "tookMs", float64(time.Since(start).Microseconds()) / 1000}
	if len(args) > 0 {
		attrs = append(attrs, "call", args[0])
	}
	if len(args) > 1 {
		attrs = append(attrs, "dir", args[1])
	}
	d.Log.InfoContext(ctx, "flexvolume call", attrs...)
}

// OpenLog opens the log file of [Settings].LogFile for appending (created
// with mode 0600) and returns a JSON logger on it at debug level, so that
// it also carries the resolver's placement decisions, and the file to
// close. Only a regular file is accepted (see [openLogFile]); the error
// names the file.
func OpenLog(path string) (*slog.Logger, io.Closer, error) {
	f, err := openLogFile(path)
	if err != nil {
		return nil, nil, err
	}
	return slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})), f, nil
}

// openLogFile opens path for appending, creating it with mode 0600. The
// open neither follows a symbolic link nor blocks: a FIFO without a reader
// fails at once instead of hanging every call, and whatever the open
// found is checked to be a regular file before anything is written to it.
func openLogFile(path string) (*os.File, error) {
	flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_CLOEXEC | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	f, err := os.OpenFile(path, flags, 0o600)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("log file %s is a symbolic link: refused", path)
	case errors.Is(err, syscall.ENXIO):
		return nil, fmt.Errorf("log file %s is not a regular file (a FIFO or socket with no reader): refused", path)
	case err != nil:
		return nil, fmt.Errorf("open log file: %w", err)
	}
	if err := checkLogFile(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkLogFile fails unless the open file f is a regular file, and then
// clears O_NONBLOCK, which only served the open.
func checkLogFile(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat log file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("log file %s is not a regular file (%v): refused", path, fi.Mode().Type())
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("log file %s: %w", path, err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetNonblock(int(fd), false) }); err != nil {
		return fmt.Errorf("log file %s: %w", path, err)
	}
	if serr != nil {
		return fmt.Errorf("clear O_NONBLOCK on log file %s: %w", path, serr)
	}
	return nil
}

// WriteStatus writes s as one line of JSON to out and returns its exit
// code. A reply that cannot be written exits 0 all the same: the kubelet
// fails a call whose reply it cannot decode, and a non-zero exit would
// make it log the call's arguments (see [Status.ExitCode]).
func WriteStatus(out io.Writer, s Status) int {
	data, err := json.Marshal(s)
	if err != nil {
		data = []byte(`{"status":"Failure","message":"encode reply"}`)
	}
	if _, err := out.Write(append(data, '\n')); err != nil {
		return 0
	}
	return s.ExitCode()
}

// Call serves the call in args and returns its reply.
func (d *Driver) Call(ctx context.Context, args []string) Status {
	if len(args) == 0 {
		return failure("no call given (want init, mount or unmount)")
	}
	switch call, rest := args[0], args[1:]; call {
	case "init":
		return Status{Status: StatusSuccess, Capabilities: &Capabilities{}}
	case "mount":
		if len(rest) != 2 {
			return failure("mount: want 2 arguments (DIR OPTIONS), got %d", len(rest))
		}
		return d.mount(ctx, rest[0], rest[1])
	case "unmount":
		if len(rest) != 1 {
			return failure("unmount: want 1 argument (DIR), got %d", len(rest))
		}
		return d.unmount(ctx, rest[0])
	default:
		return Status{Status: StatusNotSupported}
	}
}

func failure(format string, args ...any) Status {
	return Status{Status: StatusFailure, Message: fmt.Sprintf(format, args...)}
}

func (d *Driver) mounts() MountChecker {
	if d.Mounts == nil {
		return mount.New("")
	}
	return d.Mounts
}

func (d *Driver) filesystem() fs.Filesystem {
	if d.FS == nil {
		return glusterfs.FS{}
	}
	return d.FS
}

func (d *Driver) secretsDir() string {
	if d.SecretsDir == "" {
		return DefaultSecretsDir
	}
	return d.SecretsDir
}

func (d *Driver) timeout() time.Duration {
	if d.Timeout <= 0 {
		return DefaultTimeout
	}
	return d.Timeout
}

// checkDir accepts a clean absolute path.
func checkDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.ContainsRune(dir, 0) {
		return fmt.Errorf("target directory %q is not a clean absolute path", dir)
	}
	return nil
}

// state is what the node sees at a target directory.
type state int

const (
	notMounted state = iota
	mounted
	corrupted // a dead FUSE mount: "Transport endpoint is not connected"
	missing
)

func (d *Driver) state(dir string) (state, error) {
	notMnt, err := d.mounts().IsLikelyNotMountPoint(dir)
	switch {
	case err == nil && notMnt:
		return notMounted, nil
	case err == nil:
		return mounted, nil
	case mount.IsCorruptedMnt(err):
		return corrupted, nil
	case errors.Is(err, os.ErrNotExist):
		return missing, nil
	default:
		return notMounted, fmt.Errorf("check %s: %w", dir, err)
	}
}

func (d *Driver) mount(ctx context.Context, dir, rawOpts string) Status {
	if err := checkDir(dir); err != nil {
		return failure("mount: %v", err)
	}
	vals, err := fs.DecodeOptions([]byte(rawOpts))
	if err != nil {
		return failure("mount: %v", err)
	}
	m, err := d.filesystem().Mount(ctx, vals, fs.Env{Servers: d.Servers, Resolver: d.Resolver})
	if err != nil {
		return failure("mount: %v", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return failure("mount: create target directory: %v", err)
	}
	switch st, err := d.state(dir); {
	case err != nil:
		return failure("mount: %v", err)
	case st == mounted:
		return Status{Status: StatusSuccess, Message: dir + " is already mounted"}
	case st == corrupted:
		return failure("mount: %s is a broken mount (transport endpoint is not connected): unmount it first", dir)
	}
	what := m.Describe()
	if m.Secret != nil {
		p, err := writeSecret(d.secretsDir(), dir, m.Secret.Data)
		if err != nil {
			return failure("mount %s at %s: %v", what, dir, err)
		}
		m = m.WithSecretFile(p)
	}
	where, cmd, err := d.run(ctx, "mount", m.Args(dir)...)
	if err != nil {
		return failure("mount %s at %s: %v%s", what, dir, err, d.dropSecret(m, dir))
	}
	if st, err := d.state(dir); err != nil || st != mounted {
		// The mount was made where the node cannot see it: typically a
		// mount pod whose kubelet directory is not Bidirectional.
		_, _, uerr := d.run(ctx, "umount", dir)
		return failure("mount %s at %s: mount(8) succeeded %s but the node does not see a mount there (is the mount pod's kubelet directory mounted with mountPropagation: Bidirectional?)%s%s",
			what, dir, where, suffix("; undoing it failed", uerr), d.dropSecret(m, dir))
	}
	msg := fmt.Sprintf("mounted %s at %s %s", what, dir, where) + d.record(ctx, cmd, m, dir)
	return Status{Status: StatusSuccess, Message: msg}
}

// dropSecret removes the secret file of a mount that was not made, and
// returns what to add to the reply when that fails.
func (d *Driver) dropSecret(m fs.Mount, dir string) string {
	if m.Secret == nil {
		return ""
	}
	if err := removeSecret(d.secretsDir(), dir); err != nil {
		return fmt.Sprintf(" (%v)", err)
	}
	return ""
}

// record records m, made at dir by cmd, when it was made through the mount
// pod (see [mcexec.Exec.RecordMount]), so that the mount pod can make it
// again if its FUSE daemon dies; it returns what to add to the reply when
// that fails (the mount stays). The pod the options name is kept only when
// it is the pod whose volume directory the target is: the options can
// name any pod, the target is the kubelet's.
func (d *Driver) record(ctx context.Context, cmd utilexec.Cmd, m fs.Mount, dir string) string {
	podDropped, err := d.Exec.RecordMount(cmd, mcexec.MountRecord{Source: m.Source, Target: dir, FSType: m.FSType, Options: m.Options, Pod: m.Pod})
	if podDropped != nil && d.Log != nil {
		d.Log.WarnContext(ctx, "mount recorded without the pod its options name", "record", mountrecord.FileName(dir), "dir", dir, "err", podDropped)
	}
	if err != nil {
		return fmt.Sprintf(" (it will not come back by itself if its daemon dies: %v)", err)
	}
	return ""
}

// forget removes dir's mount record and secret file, if any.
func (d *Driver) forget(dir string) string {
	if err := errors.Join(d.Exec.ForgetMount(dir), removeSecret(d.secretsDir(), dir)); err != nil {
		return fmt.Sprintf(" (%v)", err)
	}
	return ""
}

func (d *Driver) unmount(ctx context.Context, dir string) Status {
	if err := checkDir(dir); err != nil {
		return failure("unmount: %v", err)
	}
	st, err := d.state(dir)
	switch {
	case err != nil:
		return failure("unmount: %v", err)
	case st == missing:
		return Status{Status: StatusSuccess, Message: dir + " does not exist" + d.forget(dir)}
	case st == notMounted:
		return Status{Status: StatusSuccess, Message: dir + " is not mounted" + d.forget(dir)}
	}
	where, _, err := d.run(ctx, "umount", dir)
	if err != nil {
		if st2, _ := d.state(dir); st2 == mounted || st2 == corrupted {
			// A dead FUSE mount may refuse a plain unmount; detach it.
			var lerr error
			where, _, lerr = d.run(ctx, "umount", "-l", dir)
			if lerr != nil {
				return failure("unmount %s: %v; lazy unmount: %v", dir, err, lerr)
			}
		}
	}
	if st, serr := d.state(dir); serr != nil || st == mounted || st == corrupted {
		return failure("unmount %s: still mounted after umount %s%s", dir, where, suffix("", serr))
	}
	msg := "unmounted " + dir + " " + where
	if st == corrupted {
		msg += " (it was a dead mount: transport endpoint not connected)"
	}
	return Status{Status: StatusSuccess, Message: msg + d.forget(dir)}
}

// run runs a utility through the plugin's executor, bounded by the
// driver's timeout, and returns where it ran ("in P's mount pod NS/NAME via
// cri-exec-sync" or "on the node (P: not registered)") for messages, and
// the command, which the executor places.
func (d *Driver) run(ctx context.Context, name string, args ...string) (where string, cmd utilexec.Cmd, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout())
	defer cancel()
	cmd = d.Exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	where = "on the node"
	if dec, ok := d.Exec.DecisionOf(cmd); ok {
		if dec.OnHost() {
			where = fmt.Sprintf("on the node (%s: %s)", d.Plugin, dec.Reason)
		} else {
			where = fmt.Sprintf("in %s's mount pod %s via %s", d.Plugin, dec.Registration, dec.Via)
		}
	}
	if err == nil {
		return where, cmd, nil
	}
	if ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
		return where, cmd, fmt.Errorf("%s timed out after %s %s", name, d.timeout(), where)
	}
	if errors.Is(err, utilexec.ErrExecutableNotFound) {
		return where, cmd, fmt.Errorf("%s not found %s", name, where)
	}
	return where, cmd, fmt.Errorf("%s failed %s: %v: %s", name, where, err, strings.TrimSpace(string(out)))
}

func suffix(prefix string, err error) string {
	if err == nil {
		return ""
	}
	if prefix == "" {
		prefix = ";"
	}
	return prefix + ": " + err.Error()
}
