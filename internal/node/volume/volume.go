// Package volume makes and removes a file system's mount at a directory of
// the node through the plugin's mount pod, for the node's volume hosts that
// this project ships: the Flexvolume driver (mount, unmount) and the CSI
// node plugin (NodeStageVolume, NodeUnstageVolume). Each file system
// ([fs.Filesystem]) says which mount(8) call a volume's options make; this
// package does the rest for all of them, once: the state of the target,
// the bound on each call, where mount(8) runs (the plugin's executor of a
// resolver: in its mount pod when it is registered and live), the check
// that the node sees the mount, the mount record (so that the mount pod can
// make the mount again if its daemon dies), the secret file and the
// unmount.
//
// Its errors are the messages the front ends report: they name the target,
// the volume and where the utility ran, and never quote a secret.
package volume

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// DefaultTimeout bounds each mount or unmount a [Mounter] makes.
const DefaultTimeout = time.Minute

// MountChecker answers whether a path is a mount point, on the node (a
// mount.Interface satisfies it).
type MountChecker interface {
	IsLikelyNotMountPoint(file string) (bool, error)
}

// Mounter mounts volumes of one plugin through its executor.
type Mounter struct {
	// Plugin is the volume plugin whose mount pod runs the utilities.
	Plugin string
	// Exec runs mount (and umount to undo a mount the node does not see),
	// and keeps the mount records: the plugin's executor of a resolver.
	Exec mcexec.Executor
	// Mounts answers mount-point queries on the node; nil: the bounded
	// probe of [Mounter.StateContext].
	Mounts MountChecker
	// Timeout bounds each mount or umount; default [DefaultTimeout].
	Timeout time.Duration
	// SecretsDir receives the secrets of mounts that need one
	// ([fs.Mount].Secret); it must be on a tmpfs. Default [DefaultSecretsDir].
	SecretsDir string
	// SecretsInMemory says why a directory is not on a file system in
	// memory (nil when it is); default [InMemory]. A secret is written only
	// where it says nil.
	SecretsInMemory func(dir string) error
	// Log receives a warning when a mount is recorded without the pod its
	// options name; nil discards it.
	Log *slog.Logger
	// StatfsFunc is statfs(2) for [Mounter.ProbeStatfs]; default
	// unix.Statfs. Tests replace it with one that hangs as a FUSE daemon
	// can.
	StatfsFunc func(path string, st *unix.Statfs_t) error
	// MountTable reads the node's mount table for [Mounter.MountWith]'s
	// check of a mount that is there already; default
	// /proc/self/mountinfo.
	MountTable func() ([]mount.MountInfo, error)
	// Umount2 is umount2(2) for [Mounter.Unmount], which gets flags with
	// UMOUNT_NOFOLLOW added; default unix.Unmount. Tests replace it.
	Umount2 func(target string, flags int) error

	probeMu sync.Mutex
	probes  map[string]struct{} // the paths whose statfs has not returned
}

// State is what the node sees at a target directory.
type State int

// The states of a target directory.
const (
	NotMounted State = iota
	Mounted
	// Corrupted is a dead FUSE mount: "Transport endpoint is not
	// connected".
	Corrupted
	Missing
)

// State returns what the node sees at dir; see [Mounter.StateContext].
func (v *Mounter) State(dir string) (State, error) {
	return v.StateContext(context.Background(), dir)
}

// StateContext returns what the node sees at dir. Whether dir is a mount
// point is answered without asking the file system's daemon; whether the
// mount is dead by a statfs bounded by ctx and the timeout
// ([Mounter.ProbeStatfs]): a daemon that hangs is an error wrapping
// [ErrNotAnswering]. With Mounts set, Mounts answers instead (stat(2),
// which a hung daemon can hold).
func (v *Mounter) StateContext(ctx context.Context, dir string) (State, error) {
	if v.Mounts == nil {
		return v.probeState(ctx, dir)
	}
	notMnt, err := v.Mounts.IsLikelyNotMountPoint(dir)
	switch {
	case err == nil && notMnt:
		return NotMounted, nil
	case err == nil:
		return Mounted, nil
	case mount.IsCorruptedMnt(err):
		return Corrupted, nil
	case errors.Is(err, os.ErrNotExist):
		return Missing, nil
	default:
		return NotMounted, fmt.Errorf("check %s: %w", dir, err)
	}
}

// Mount makes m at dir, a clean absolute path, creating dir when missing;
// a mount there already is left as it is (the message says so). It returns
// the message of the outcome: what was mounted where, and where mount(8)
// ran.
func (v *Mounter) Mount(ctx context.Context, m fs.Mount, dir string) (string, error) {
	return v.MountWith(ctx, m, dir, MountOptions{})
}

// MountOptions change what [Mounter.MountWith] does.
type MountOptions struct {
	// Adopt is for a volume host that mounts only through the mount pod
	// (it checked that the pod is live): a mount at dir already whose
	// record is missing is checked against m, by its source and type in
	// the node's mount table, and recorded. Such a mount is typically one
	// whose mount(8) finished after the call timed out: the call failed,
	// nothing recorded the mount, and the retry finds it. Recording it
	// rather than unmounting it and mounting again keeps the binds of it
	// that may exist already. Another mount at dir is an error wrapping
	// [ErrOtherMount]. A mount with its record is left as it is, as Mount
	// leaves it: the kubelet calls NodeStage again after a restart, for
	// volumes in use, and m's source can differ from the mount's while
	// naming the same server (an unlisted name is replaced by the first
	// address its lookup returns, and DNS may rotate them).
	Adopt bool
	// Unrecorded makes no mount record: for short-lived mounts that the
	// caller unmounts itself, which the recovery must never make again.
	Unrecorded bool
}

// ErrOtherMount is the error of [Mounter.MountWith] with Adopt when dir is
// a mount of another file system or source than the one asked for.
var ErrOtherMount = errors.New("a mount of something else is there")

// MountWith is [Mounter.Mount] with options.
func (v *Mounter) MountWith(ctx context.Context, m fs.Mount, dir string, o MountOptions) (string, error) {
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("mount: %w", err)
	}
	// The state first: creating dir stats it, which a hung daemon of a
	// mount there would hold.
	st, err := v.StateContext(ctx, dir)
	if err == nil && st == Missing {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return "", fmt.Errorf("mount: create target directory: %w", err)
		}
		st, err = v.StateContext(ctx, dir)
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("mount: %w", err)
	case st == Mounted && o.Adopt && !o.Unrecorded:
		return v.adopt(m, dir)
	case st == Mounted:
		return dir + " is already mounted", nil
	case st == Corrupted:
		return "", fmt.Errorf("mount: %s is a broken mount (transport endpoint is not connected): unmount it first", dir)
	}
	what := m.Describe()
	if m.Secret != nil {
		p, err := writeSecret(v.secretsDir(), dir, m.Secret.Data, v.inMemory())
		if err != nil {
			return "", fmt.Errorf("mount %s at %s: %w", what, dir, err)
		}
		m = m.WithSecretFile(p)
	}
	where, cmd, err := v.run(ctx, "mount", m.Args(dir)...)
	if err != nil {
		return "", fmt.Errorf("mount %s at %s: %w%s", what, dir, err, v.dropSecret(m, dir))
	}
	if st, err := v.StateContext(ctx, dir); err != nil || st != Mounted {
		// The mount was made where the node cannot see it: typically a
		// mount pod whose kubelet directory is not Bidirectional.
		_, _, uerr := v.run(ctx, "umount", dir)
		return "", fmt.Errorf("mount %s at %s: mount(8) succeeded %s but the node does not see a mount there (is the mount pod's kubelet directory mounted with mountPropagation: Bidirectional?)%s%s%s",
			what, dir, where, suffix("", err), suffix("; undoing it failed", uerr), v.dropSecret(m, dir))
	}
	msg := fmt.Sprintf("mounted %s at %s %s", what, dir, where)
	if o.Unrecorded {
		return msg, nil
	}
	return msg + v.record(ctx, cmd, m, dir), nil
}

// adopt checks that the mount at dir is m's and records it when its record
// is missing (see [MountOptions].Adopt).
func (v *Mounter) adopt(m fs.Mount, dir string) (string, error) {
	if !mountrecord.Recoverable(m.FSType) {
		return dir + " is already mounted", nil
	}
	p := filepath.Join(v.Exec.RecordsDir(), mountrecord.FileName(dir))
	switch _, err := os.Lstat(p); {
	case err == nil:
		return dir + " is already mounted", nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("mount: the record of %s: %w", dir, err)
	}
	mi, err := v.mountAt(dir)
	if err != nil {
		return "", fmt.Errorf("mount: %w", err)
	}
	src, typ := mountinfo.Unescape(mi.Source), mountinfo.Unescape(mi.FsType)
	if !sameMount(src, typ, mi.SuperOptions, m) {
		return "", fmt.Errorf("mount %s at %s: %w: %s of type %s", m.Describe(), dir, ErrOtherMount, src, typ)
	}
	// As Exec.RecordMount records a mount made through the mount pod,
	// which MountOptions.Adopt's caller made sure mounts them all.
	r := mountrecord.Record{Plugin: v.Plugin, Source: m.Source, Target: dir, FSType: m.FSType, Options: m.Options, Pod: m.Pod}
	if m.Secret != nil {
		// The failed call removed the secret file; the recovery mounts
		// with it, so it is written again.
		sp, err := writeSecret(v.secretsDir(), dir, m.Secret.Data, v.inMemory())
		if err != nil {
			return "", fmt.Errorf("mount: %s is mounted but not recorded: %w", dir, err)
		}
		r.Options = m.WithSecretFile(sp).Options
	}
	if r.CheckPod() != nil {
		r.Pod = nil
	}
	if err := mountrecord.Write(v.Exec.RecordsDir(), r); err != nil {
		return "", fmt.Errorf("mount: %s is mounted but not recorded: %w", dir, err)
	}
	return dir + " is already mounted; its mount record was missing and is written", nil
}

// mountAt returns the entry of the node's mount table of the mount whose
// root dir is (the topmost one), found by its mount ID.
func (v *Mounter) mountAt(dir string) (mount.MountInfo, error) {
	id, err := mountID(dir)
	if err != nil {
		return mount.MountInfo{}, err
	}
	read := v.MountTable
	if read == nil {
		read = func() ([]mount.MountInfo, error) { return mountinfo.ParseFile("/proc/self/mountinfo") }
	}
	mis, err := read()
	if err != nil {
		return mount.MountInfo{}, fmt.Errorf("read the mount table: %w", err)
	}
	for _, mi := range mis {
		if uint64(mi.ID) == id {
			return mi, nil
		}
	}
	return mount.MountInfo{}, fmt.Errorf("the mount %d at %s is not in the mount table", id, dir)
}

// sameMount reports whether a mount the kernel shows with source, type
// kernelType and super options super is one that mount(8) makes of m. A
// source of "none" (ceph-fuse names its mounts itself, "ceph-fuse") names
// nothing to compare: the type alone decides. A FUSE mount must be root's
// (user_id=0): any node user may make one with fusermount, naming any
// source and subtype.
func sameMount(source, kernelType string, super []string, m fs.Mount) bool {
	if strings.HasPrefix(kernelType, "fuse") && !slices.Contains(super, "user_id=0") {
		return false
	}
	return sameType(kernelType, m.FSType) && (m.Source == "none" || source == m.Source)
}

// sameType reports whether a mount the kernel shows as kernel is one that
// mount(8) -t want makes: the type itself, or a FUSE mount of want's
// helper (mount.glusterfs's show as fuse.glusterfs, mount.fuse.ceph's as
// fuse.ceph-fuse), exactly.
func sameType(kernel, want string) bool {
	switch {
	case kernel == want, kernel == "fuse."+want:
		return true
	case strings.HasPrefix(want, "fuse."):
		return kernel == want+"-fuse"
	}
	return false
}

// Unmount removes the mount at dir, a dead one too, and its record and
// secret file; nothing mounted there, or no dir, is done already. It
// returns the message of the outcome.
//
// The unmount is umount2(2) on the node, never a command of the mount pod:
// removing a mount needs no tool of the file system (neither GlusterFS nor
// ceph-fuse has an unmount helper; a FUSE daemon ends when its mount goes),
// the node sees every mount this package makes (MountWith checks it), and
// an unmount of the node's copy is one of the mount pod's too (the kubelet
// directory is shared both ways). So an unmount waits for no exec: through
// CRI ExecSync, whose runtime may start the execs of a container one at a
// time (BENCHMARKS.md), a pod's deletion no longer queues behind the
// mounts and unmounts of others; and it works the same when the mount pod
// is gone or hung.
func (v *Mounter) Unmount(ctx context.Context, dir string) (string, error) {
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("unmount: %w", err)
	}
	st, err := v.StateContext(ctx, dir)
	switch {
	case errors.Is(err, ErrNotAnswering):
		// umount needs no answer from the daemon; detached below if it
		// refuses.
		st = Mounted
	case err != nil:
		return "", fmt.Errorf("unmount: %w", err)
	case st == Missing:
		return dir + " does not exist" + v.forget(dir), nil
	case st == NotMounted:
		return dir + " is not mounted" + v.forget(dir), nil
	}
	const where = "on the node (umount2)"
	if err := v.umount2(ctx, dir, 0); err != nil {
		if st2, _ := v.StateContext(ctx, dir); st2 == Mounted || st2 == Corrupted {
			// A dead FUSE mount may refuse a plain unmount; detach it.
			if lerr := v.umount2(ctx, dir, unix.MNT_DETACH); lerr != nil {
				return "", fmt.Errorf("unmount %s %s: %v; lazy unmount: %w", dir, where, err, lerr)
			}
		}
	}
	if st, serr := v.StateContext(ctx, dir); serr != nil || st == Mounted || st == Corrupted {
		return "", fmt.Errorf("unmount %s: still mounted after umount2 %s%s", dir, where, suffix("", serr))
	}
	msg := "unmounted " + dir + " " + where
	if st == Corrupted {
		msg += " (it was a dead mount: transport endpoint not connected)"
	}
	return msg + v.forget(dir), nil
}

// umount2 unmounts dir on the node with flags (and UMOUNT_NOFOLLOW: a
// symbolic link at dir is not followed), bounded by ctx and the timeout.
// An unmount that does not return in time is left to the kernel; the error
// says so.
func (v *Mounter) umount2(ctx context.Context, dir string, flags int) error {
	fn := v.Umount2
	if fn == nil {
		fn = unix.Unmount
	}
	ctx, cancel := context.WithTimeout(ctx, v.TimeoutOrDefault())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(dir, flags|unix.UMOUNT_NOFOLLOW) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("umount2: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("umount2 did not return within %s: %w", v.TimeoutOrDefault(), ctx.Err())
	}
}

// CheckDir accepts a clean absolute path.
func CheckDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.ContainsRune(dir, 0) {
		return fmt.Errorf("target directory %q is not a clean absolute path", dir)
	}
	return nil
}

func (v *Mounter) probeState(ctx context.Context, dir string) (State, error) {
	mnt, err := IsMountPoint(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Missing, nil
	case err != nil:
		return NotMounted, fmt.Errorf("check %s: %w", dir, err)
	case !mnt:
		return NotMounted, nil
	}
	_, err = v.ProbeStatfs(ctx, dir)
	switch {
	case err == nil:
		return Mounted, nil
	case errors.Is(err, unix.ENOTCONN):
		return Corrupted, nil
	default:
		return Mounted, fmt.Errorf("check %s: %w", dir, err)
	}
}

func (v *Mounter) secretsDir() string {
	if v.SecretsDir == "" {
		return DefaultSecretsDir
	}
	return v.SecretsDir
}

func (v *Mounter) inMemory() func(string) error {
	if v.SecretsInMemory == nil {
		return InMemory
	}
	return v.SecretsInMemory
}

// TimeoutOrDefault is the bound of each mount or umount.
func (v *Mounter) TimeoutOrDefault() time.Duration {
	if v.Timeout <= 0 {
		return DefaultTimeout
	}
	return v.Timeout
}

// dropSecret removes the secret file of a mount that was not made, and
// returns what to add to the message when that fails.
func (v *Mounter) dropSecret(m fs.Mount, dir string) string {
	if m.Secret == nil {
		return ""
	}
	if err := removeSecret(v.secretsDir(), dir); err != nil {
		return fmt.Sprintf(" (%v)", err)
	}
	return ""
}

// record records m, made at dir by cmd, when it was made through the mount
// pod (see [mcexec.Exec.RecordMount]), so that the mount pod can make it
// again if its FUSE daemon dies; it returns what to add to the message
// when that fails (the mount stays). The pod the options name is kept only
// when it is the pod whose volume directory the target is: the options can
// name any pod, the target is the kubelet's.
func (v *Mounter) record(ctx context.Context, cmd utilexec.Cmd, m fs.Mount, dir string) string {
	podDropped, err := v.Exec.RecordMount(cmd, mcexec.MountRecord{Source: m.Source, Target: dir, FSType: m.FSType, Options: m.Options, Pod: m.Pod})
	if podDropped != nil && v.Log != nil {
		v.Log.WarnContext(ctx, "mount recorded without the pod its options name", "record", mountrecord.FileName(dir), "dir", dir, "err", podDropped)
	}
	if err != nil {
		return fmt.Sprintf(" (it will not come back by itself if its daemon dies: %v)", err)
	}
	return ""
}

// forget removes dir's mount record and secret file, if any.
func (v *Mounter) forget(dir string) string {
	if err := errors.Join(v.Exec.ForgetMount(dir), removeSecret(v.secretsDir(), dir)); err != nil {
		return fmt.Sprintf(" (%v)", err)
	}
	return ""
}

// run runs a utility through the plugin's executor, bounded by the
// timeout, and returns where it ran ("in P's mount pod NS/NAME via
// cri-exec-sync" or "on the node (P: not registered)") for messages, and
// the command, which the executor places.
func (v *Mounter) run(ctx context.Context, name string, args ...string) (where string, cmd utilexec.Cmd, err error) {
	ctx, cancel := context.WithTimeout(ctx, v.TimeoutOrDefault())
	defer cancel()
	cmd = v.Exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	where = v.where(cmd)
	if err == nil {
		return where, cmd, nil
	}
	if ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
		return where, cmd, fmt.Errorf("%s timed out after %s %s", name, v.TimeoutOrDefault(), where)
	}
	if errors.Is(err, utilexec.ErrExecutableNotFound) {
		return where, cmd, fmt.Errorf("%s not found %s", name, where)
	}
	return where, cmd, fmt.Errorf("%s failed %s: %v: %s", name, where, err, strings.TrimSpace(string(out)))
}

// where says where cmd ran, for messages.
func (v *Mounter) where(cmd utilexec.Cmd) string {
	dec, ok := v.Exec.DecisionOf(cmd)
	switch {
	case !ok:
		return "on the node"
	case dec.OnHost():
		return fmt.Sprintf("on the node (%s: %s)", v.Plugin, dec.Reason)
	}
	return fmt.Sprintf("in %s's mount pod %s via %s", v.Plugin, dec.Registration, dec.Via)
}

// maxStderr bounds what an error quotes of a command's standard error.
const maxStderr = 1024

// RunWithSecret runs a utility through the plugin's executor, bounded by
// the timeout, handing it secret through a file that only root can read in
// the secrets directory (named after id, as a mount's is after its
// target): args gets the file's path and returns the arguments. The file
// is removed when the command has ended. It returns the command's standard
// output and where it ran (as in messages: "in P's mount pod NS/NAME via
// cri-exec-sync"). An error says where the command ran, quotes the end of its
// standard error and wraps the executor's error (a non-zero exit is a
// utilexec.ExitError). The secret is never in an argv, an environment or
// a message.
func (v *Mounter) RunWithSecret(ctx context.Context, id string, secret []byte, name string, args func(secretFile string) []string) (out []byte, where string, err error) {
	file, err := writeSecret(v.secretsDir(), id, secret, v.inMemory())
	if err != nil {
		return nil, "", err
	}
	defer func() {
		if rerr := removeSecret(v.secretsDir(), id); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, v.TimeoutOrDefault())
	defer cancel()
	cmd := v.Exec.CommandContext(ctx, name, args(file)...)
	var stderr bytes.Buffer
	cmd.SetStderr(&stderr)
	out, err = cmd.Output()
	where = v.where(cmd)
	if err == nil {
		return out, where, nil
	}
	switch {
	case ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		return nil, where, fmt.Errorf("%s timed out after %s %s: %w", name, v.TimeoutOrDefault(), where, err)
	case errors.Is(err, utilexec.ErrExecutableNotFound):
		return nil, where, fmt.Errorf("%s not found %s: %w", name, where, err)
	}
	msg := strings.TrimSpace(stderr.String())
	if len(msg) > maxStderr {
		msg = "..." + msg[len(msg)-maxStderr:]
	}
	return nil, where, fmt.Errorf("%s failed %s: %w: %s", name, where, err, msg)
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
