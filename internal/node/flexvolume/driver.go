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

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// DefaultTimeout bounds each mount or umount the driver runs. The kubelet
// puts no bound on a Flexvolume call.
const DefaultTimeout = volume.DefaultTimeout

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

// Driver serves the Flexvolume calls of one driver.
type Driver struct {
	// FS is the file system the driver mounts; default [glusterfs.FS].
	FS fs.Filesystem
	// Plugin is the volume plugin whose mount pod runs the utilities.
	Plugin string
	// Exec runs mount, and keeps the mount records: the plugin's executor
	// of a resolver. An unmount is umount2(2) on the node
	// ([volume.Mounter.Unmount]).
	Exec mcexec.Executor
	// Mounts answers mount-point queries on the node; default
	// mount-utils' check (a zero mount.Mounter: see volumes).
	Mounts volume.MountChecker
	// Umount2 is umount2(2); default unix.Unmount. Tests replace it.
	Umount2 func(target string, flags int) error
	// Timeout bounds each mount or unmount; default [DefaultTimeout].
	Timeout time.Duration
	// Servers decides which servers a volume may name; the zero value is
	// the policy of an empty allow-list ([Settings].AllowedServers).
	Servers fs.ServerPolicy
	// Resolver looks up server names on the node; default
	// net.DefaultResolver.
	Resolver fs.Resolver
	// SecretsDir receives the secrets of mounts that need one
	// ([fs.Mount].Secret); it must be on a tmpfs. Default
	// [volume.DefaultSecretsDir].
	SecretsDir string
	// SecretsInMemory says why a directory is not on a file system in
	// memory; default [volume.InMemory].
	SecretsInMemory func(dir string) error
	// Log receives one record per call (the call, its target directory and
	// its reply); nil discards it. See [Settings].LogFile.
	Log *slog.Logger
	// SharedMounts makes one mount of each volume per node, bound at
	// every pod's directory ([volume.Shared]), for the volumes that need
	// no secret; see [Settings].SharedMounts.
	SharedMounts bool
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

func (d *Driver) filesystem() fs.Filesystem {
	if d.FS == nil {
		return glusterfs.FS{}
	}
	return d.FS
}

// volumes is the mounter of the driver's plugin.
func (d *Driver) volumes() *volume.Mounter {
	mounts := d.Mounts
	if mounts == nil {
		// mount-utils' mount-point check, which the Flexvolume driver's
		// end-to-end tests prove; the CSI driver's bounded probe (statx,
		// a statfs with a deadline) is not proven through this driver.
		// Its zero Mounter, not mount.New: New runs umount(8) on a
		// temporary directory to learn how umount reports a path that
		// is not mounted, which only Mounter's own unmounts and
		// CanSafelySkipMountPointCheck read; this driver unmounts with
		// umount2(2) and asks only IsLikelyNotMountPoint (statx). That
		// fork and exec came with every mount and unmount call
		// (BENCHMARKS.md, "A node under load").
		mounts = &mount.Mounter{}
	}
	return &volume.Mounter{
		Plugin: d.Plugin, Exec: d.Exec, Mounts: mounts, Umount2: d.Umount2, Timeout: d.Timeout,
		SecretsDir: d.SecretsDir, SecretsInMemory: d.SecretsInMemory, Log: d.Log,
	}
}

func (d *Driver) mount(ctx context.Context, dir, rawOpts string) Status {
	if err := volume.CheckDir(dir); err != nil {
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
	// Shared within the pod's namespace; a mount with a secret, or whose
	// pod the kubelet did not name, is the pod's own.
	if root, ok := SharedRoot(dir); ok && d.SharedMounts && m.Secret == nil && m.Pod != nil {
		msg, err := volume.Shared{V: d.volumes(), Root: root}.Mount(ctx, m, dir)
		if err != nil {
			return failure("%v", err)
		}
		return Status{Status: StatusSuccess, Message: msg}
	}
	msg, err := d.volumes().Mount(ctx, m, dir)
	if err != nil {
		return failure("%v", err)
	}
	return Status{Status: StatusSuccess, Message: msg}
}

func (d *Driver) unmount(ctx context.Context, dir string) Status {
	// A bind of the node's shared mount of a volume is unmounted as such
	// whatever SharedMounts says now: it may have been made before.
	if root, ok := SharedRoot(dir); ok {
		msg, shared, err := volume.Shared{V: d.volumes(), Root: root}.Unmount(ctx, dir)
		switch {
		case err != nil:
			return failure("%v", err)
		case shared:
			return Status{Status: StatusSuccess, Message: msg}
		}
	}
	msg, err := d.volumes().Unmount(ctx, dir)
	if err != nil {
		return failure("%v", err)
	}
	return Status{Status: StatusSuccess, Message: msg}
}

// SharedRoot returns the directory of the node's shared mounts of the
// driver whose pod volume directory dir is, <kubelet>/pods/<pod
// UID>/volumes/<vendor>~<driver>/<volume> as the kubelet names it:
// <kubelet>/plugins/<vendor>~<driver>/shared, beneath the kubelet's
// directory, which the mount pod sees. ok is false for a directory not so
// named: its volume is mounted for itself.
func SharedRoot(dir string) (root string, ok bool) {
	kubelet, rest, found := strings.Cut(dir, "/pods/")
	if !found || kubelet == "" {
		return "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != "volumes" || !strings.Contains(parts[2], "~") {
		return "", false
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", false
		}
	}
	return filepath.Join(kubelet, "plugins", parts[2], "shared"), true
}
