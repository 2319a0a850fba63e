package exec

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

// Mounter is a mount.Interface whose Mount and Unmount run mount(8) and
// umount(8) through an executor (normally a plugin's [Exec], so that they
// run in the plugin's mount container when it is registered and running);
// everything else (List, IsLikelyNotMountPoint, IsMountPoint, GetMountRefs)
// is answered by mount-utils' own mounter in the caller's mount namespace.
//
// A bind mount is a bind followed by a remount with the requested options
// and the source's restrictive flags (ro, nodev, noexec, nosuid, noatime,
// relatime, nodiratime), as mount-utils does. systemd-run is never used: a
// mount container's FUSE daemons live in the container, not in a scope.
type Mounter struct {
	exec utilexec.Interface
	base mount.Interface
}

var _ mount.Interface = (*Mounter)(nil)

// NewMounter returns a mounter that runs mount and umount with e and
// delegates the rest to base; a nil base means mount.New("").
func NewMounter(e utilexec.Interface, base mount.Interface) *Mounter {
	if base == nil {
		base = mount.New("")
	}
	return &Mounter{exec: e, base: base}
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
	out, err := m.exec.Command("mount", args...).CombinedOutput()
	if err != nil {
		// The format of mount-utils, whose callers parse it.
		return fmt.Errorf("mount failed: %w\nMounting command: mount\nMounting arguments: %s\nOutput: %s",
			err, strings.TrimSpace(logStr), out)
	}
	return nil
}

// Unmount runs umount(8) on target.
func (m *Mounter) Unmount(target string) error {
	out, err := m.exec.Command("umount", target).CombinedOutput()
	if err != nil {
		return fmt.Errorf("unmount failed: %w\nUnmounting arguments: %s\nOutput: %s", err, target, out)
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
