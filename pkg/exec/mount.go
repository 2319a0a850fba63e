package exec

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Mounter is a mount.Interface whose Mount and Unmount run mount(8) and
// umount(8) through an executor (normally a plugin's [Exec], so that they
// run in the plugin's mount container when it is registered and running);
// everything else (List, IsLikelyNotMountPoint, IsMountPoint, GetMountRefs)
// is answered by mount-utils' own mounter in the caller's mount namespace.
//
// A bind mount is a bind followed by a remount with the requested options
// and the source's restrictive flags (ro, nodev, noexec, nosuid, noatime,
// relatime, nodiratime), as mount-utils does. systemd-run is never used:
// the mount pod puts a FUSE daemon in a scope of its own (docs/scopes.md).
//
// When the executor is an [Executor] (a plugin's [Exec]), each mount is
// recorded as [Exec.RecordMount] records it (a FUSE mount that ran in the
// plugin's container, so that the mount pod can make it again if its
// daemon dies); Unmount removes the record. A record that cannot be
// written or removed is reported to RecordError, not by the mount's or
// the unmount's error: a mount that worked is never undone for it.
type Mounter struct {
	exec    utilexec.Interface
	records Executor // exec, when it keeps mount records
	base    mount.Interface
	// RecordError, when set, is called with the error of a mount record
	// that could not be written or removed.
	RecordError func(error)
}

var _ mount.Interface = (*Mounter)(nil)

// NewMounter returns a mounter that runs mount and umount with e and
// delegates the rest to base; a nil base means mount.New(""). It keeps
// mount records when e is an [Executor].
func NewMounter(e utilexec.Interface, base mount.Interface) *Mounter {
	if base == nil {
		base = mount.New("")
	}
	records, _ := e.(Executor)
	return &Mounter{exec: e, records: records, base: base}
}

// Mount mounts source at target; see mount.Interface.
func (m *Mounter) Mount(source, target, fstype string, options []string) error {
	return m.MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype, options, nil, nil)
}

// MountSensitive is Mount with options that are never logged.
func (m *Mounter) MountSensitive(source, target, fstype string, options, sensitiveOptions []string) error {
	return m.MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype, options, sensitiveOptions, nil)
}

// MountSensitiveWithoutSystemd is MountSensitive; this mounter never uses
// systemd.
func (m *Mounter) MountSensitiveWithoutSystemd(source, target, fstype string, options, sensitiveOptions []string) error {
	return m.MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype, options, sensitiveOptions, nil)
}

// MountSensitiveWithoutSystemdWithMountFlags is MountSensitive with extra
// mount(8) flags such as "--no-canonicalize".
func (m *Mounter) MountSensitiveWithoutSystemdWithMountFlags(source, target, fstype string, options, sensitiveOptions, mountFlags []string) error {
	bind, bindOpts, bindRemountOpts, bindRemountSensitive := mount.MakeBindOptsSensitive(options, sensitiveOptions)
	if !bind {
		return m.doMount(source, target, fstype, options, sensitiveOptions, mountFlags)
	}
	if err := m.doMount(source, target, fstype, bindOpts, bindRemountSensitive, mountFlags); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(source, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", source, err)
	}
	return m.doMount(source, target, fstype, append(bindRemountOpts, restrictiveFlags(st.Flags)...), bindRemountSensitive, mountFlags)
}

func restrictiveFlags(flags int64) []string {
	var opts []string
	for _, f := range []struct {
		bit  int64
		name string
	}{
		{unix.MS_RDONLY, "ro"}, {unix.MS_NODEV, "nodev"}, {unix.MS_NOEXEC, "noexec"},
		{unix.MS_NOSUID, "nosuid"}, {unix.MS_NOATIME, "noatime"},
		{unix.MS_RELATIME, "relatime"}, {unix.MS_NODIRATIME, "nodiratime"},
	} {
		if flags&f.bit != 0 {
			opts = append(opts, f.name)
		}
	}
	return opts
}

func (m *Mounter) doMount(source, target, fstype string, options, sensitiveOptions, mountFlags []string) error {
	args, logStr := mount.MakeMountArgsSensitiveWithMountFlags(source, target, fstype, options, sensitiveOptions, mountFlags)
	cmd := m.exec.Command("mount", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// The format of mount-utils, whose callers parse it.
		return fmt.Errorf("mount failed: %w\nMounting command: mount\nMounting arguments: %s\nOutput: %s",
			err, strings.TrimSpace(logStr), out)
	}
	if m.records != nil {
		_, err := m.records.RecordMount(cmd, MountRecord{Source: source, Target: target, FSType: fstype, Options: options, Sensitive: len(sensitiveOptions) > 0})
		m.recordErr(err)
	}
	return nil
}

// MountRecord is a mount made through a plugin's executor, as
// [Exec.RecordMount] is told of it.
type MountRecord struct {
	// Source, Target, FSType and Options are mount(8)'s; Options has one
	// option per element.
	Source, Target, FSType string
	Options                []string
	// Sensitive says mount(8) was also given options that hold a secret
	// (mount.Interface's MountSensitive), which is never recorded.
	Sensitive bool
	// Pod is the workload pod the mount was made for, when the caller
	// knows it (the kubelet tells a Flexvolume driver); nil otherwise.
	Pod *MountPod
}

// MountPod names the workload pod of a [MountRecord].
type MountPod = mountrecord.Pod

// RecordsDir returns the directory of the mount records of mounts made
// through the plugin's mount pod: ".mounts" in the registration directory
// (see [Mounter]).
func (e *Exec) RecordsDir() string { return filepath.Join(e.r.dir, mountrecord.Dir) }

// RecordMount records m, the mount that cmd (a command of e) made, in
// [Exec.RecordsDir], so that the plugin's mount pod can make it again if
// its daemon dies. Only a mount whose command ran in the plugin's
// container, of a type whose mounts die with a process (FUSE; see
// package mountrecord), is recorded: a mount on the host has no mount pod
// to make it again, and a kernel mount needs none. A mount with sensitive
// options is recorded without any, as one the mount pod must not make
// again by itself. The pod m names is kept only when m's target is in that
// pod's volume directory, which the kubelet alone chooses; podDropped says
// why it was left out, and the mount is recorded all the same. err is why
// the record could not be written.
func (e *Exec) RecordMount(cmd utilexec.Cmd, m MountRecord) (podDropped, err error) {
	if d, ok := e.DecisionOf(cmd); !ok || d.OnHost() || !mountrecord.Recoverable(m.FSType) {
		return nil, nil
	}
	r := mountrecord.Record{Plugin: e.plugin, Source: m.Source, Target: filepath.Clean(m.Target), FSType: m.FSType, Options: m.Options, Pod: m.Pod}
	if m.Sensitive {
		r.Options, r.NotRecoverable = nil, "its options hold a secret, which is never recorded"
	}
	if podDropped = r.CheckPod(); podDropped != nil {
		r.Pod = nil
	}
	return podDropped, mountrecord.Write(e.RecordsDir(), r)
}

// ForgetMount removes the record of the mount at target, if any.
func (e *Exec) ForgetMount(target string) error { return mountrecord.Remove(e.RecordsDir(), target) }

func (m *Mounter) recordErr(err error) {
	if err != nil && m.RecordError != nil {
		m.RecordError(err)
	}
}

// Unmount runs umount(8) on target, and removes its mount record.
func (m *Mounter) Unmount(target string) error {
	out, err := m.exec.Command("umount", target).CombinedOutput()
	if err != nil {
		return fmt.Errorf("unmount failed: %w\nUnmounting arguments: %s\nOutput: %s", err, target, out)
	}
	if m.records != nil {
		m.recordErr(m.records.ForgetMount(target))
	}
	return nil
}

// List lists the mounts seen by the caller.
func (m *Mounter) List() ([]mount.MountPoint, error) { return m.base.List() }

// IsLikelyNotMountPoint is answered by the caller's mounter.
func (m *Mounter) IsLikelyNotMountPoint(file string) (bool, error) {
	return m.base.IsLikelyNotMountPoint(file)
}

// CanSafelySkipMountPointCheck is false: umount runs where the executor
// decides, whose "not mounted" behaviour was not probed.
func (m *Mounter) CanSafelySkipMountPointCheck() bool { return false }

// IsMountPoint is answered by the caller's mounter.
func (m *Mounter) IsMountPoint(file string) (bool, error) { return m.base.IsMountPoint(file) }

// GetMountRefs is answered by the caller's mounter.
func (m *Mounter) GetMountRefs(pathname string) ([]string, error) {
	return m.base.GetMountRefs(pathname)
}
