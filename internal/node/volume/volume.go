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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// DefaultTimeout bounds each mount or umount a [Mounter] runs.
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
	// Exec runs mount and umount, and keeps the mount records: the
	// plugin's executor of a resolver.
	Exec mcexec.Executor
	// Mounts answers mount-point queries on the node; default mount.New("").
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

// State returns what the node sees at dir.
func (v *Mounter) State(dir string) (State, error) {
	notMnt, err := v.mounts().IsLikelyNotMountPoint(dir)
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
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("mount: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("mount: create target directory: %w", err)
	}
	switch st, err := v.State(dir); {
	case err != nil:
		return "", fmt.Errorf("mount: %w", err)
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
	if st, err := v.State(dir); err != nil || st != Mounted {
		// The mount was made where the node cannot see it: typically a
		// mount pod whose kubelet directory is not Bidirectional.
		_, _, uerr := v.run(ctx, "umount", dir)
		return "", fmt.Errorf("mount %s at %s: mount(8) succeeded %s but the node does not see a mount there (is the mount pod's kubelet directory mounted with mountPropagation: Bidirectional?)%s%s",
			what, dir, where, suffix("; undoing it failed", uerr), v.dropSecret(m, dir))
	}
	return fmt.Sprintf("mounted %s at %s %s", what, dir, where) + v.record(ctx, cmd, m, dir), nil
}

// Unmount removes the mount at dir, a dead one too, and its record and
// secret file; nothing mounted there, or no dir, is done already. It
// returns the message of the outcome.
func (v *Mounter) Unmount(ctx context.Context, dir string) (string, error) {
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("unmount: %w", err)
	}
	st, err := v.State(dir)
	switch {
	case err != nil:
		return "", fmt.Errorf("unmount: %w", err)
	case st == Missing:
		return dir + " does not exist" + v.forget(dir), nil
	case st == NotMounted:
		return dir + " is not mounted" + v.forget(dir), nil
	}
	where, _, err := v.run(ctx, "umount", dir)
	if err != nil {
		if st2, _ := v.State(dir); st2 == Mounted || st2 == Corrupted {
			// A dead FUSE mount may refuse a plain unmount; detach it.
			var lerr error
			where, _, lerr = v.run(ctx, "umount", "-l", dir)
			if lerr != nil {
				return "", fmt.Errorf("unmount %s: %v; lazy unmount: %w", dir, err, lerr)
			}
		}
	}
	if st, serr := v.State(dir); serr != nil || st == Mounted || st == Corrupted {
		return "", fmt.Errorf("unmount %s: still mounted after umount %s%s", dir, where, suffix("", serr))
	}
	msg := "unmounted " + dir + " " + where
	if st == Corrupted {
		msg += " (it was a dead mount: transport endpoint not connected)"
	}
	return msg + v.forget(dir), nil
}

// CheckDir accepts a clean absolute path.
func CheckDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.ContainsRune(dir, 0) {
		return fmt.Errorf("target directory %q is not a clean absolute path", dir)
	}
	return nil
}

func (v *Mounter) mounts() MountChecker {
	if v.Mounts == nil {
		return mount.New("")
	}
	return v.Mounts
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
	where = "on the node"
	if dec, ok := v.Exec.DecisionOf(cmd); ok {
		if dec.OnHost() {
			where = fmt.Sprintf("on the node (%s: %s)", v.Plugin, dec.Reason)
		} else {
			where = fmt.Sprintf("in %s's mount pod %s via %s", v.Plugin, dec.Registration, dec.Via)
		}
	}
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

func suffix(prefix string, err error) string {
	if err == nil {
		return ""
	}
	if prefix == "" {
		prefix = ";"
	}
	return prefix + ": " + err.Error()
}
