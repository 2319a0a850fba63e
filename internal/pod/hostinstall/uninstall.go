package hostinstall

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/boundary/execsocket"
	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/rbd"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Defaults of [Uninstall], as the overlays place things.
const (
	DefaultHostRoot  = "/"
	DefaultMountinfo = "/proc/1/mountinfo"
	DefaultRunDir    = "/run/mountcontainers"
	DefaultLogDir    = "/var/log/mountcontainers"
	DefaultShimDir   = "/opt/mountcontainers/bin"
	DefaultKubelet   = "/var/lib/kubelet"
)

// DefaultPlugins are the plugins the overlays register; DefaultDrivers
// their Flexvolume drivers, DefaultCSIDrivers their CSI drivers.
var (
	DefaultPlugins    = []string{glusterfs.Plugin, "kubernetes.io/cephfs", rbd.Plugin}
	DefaultDrivers    = []string{"mountcontainers.io~glusterfs", "mountcontainers.io~cephfs"}
	DefaultCSIDrivers = []string{"glusterfs.mountcontainers.io", "cephfs.mountcontainers.io"}
)

// Uninstall says what the node's uninstall removes: everything the mount
// pods and the CSI node plugins leave on a node. Every path is a node
// path, resolved beneath HostRoot.
type Uninstall struct {
	// HostRoot is where the node's / is seen: DefaultHostRoot on the
	// node, the hostPath mount of / in a pod (deploy/uninstall: /host).
	HostRoot string
	// Mountinfo is the node's mount table (DefaultMountinfo).
	Mountinfo string
	// Plugins whose registrations and scopes are removed.
	Plugins []string
	// RegistrationDir is the mount pods' registration directory.
	RegistrationDir string
	// FlexvolumeDir is the kubelet's Flexvolume directory and
	// FlexvolumeDrivers the driver directories (<vendor>~<driver>) in it.
	FlexvolumeDir     string
	FlexvolumeDrivers []string
	// ShimDir is where kubelet-exec-shim was installed; "" for none.
	ShimDir string
	// RunDir holds the drivers' secrets and exec batches; LogDirs the FUSE
	// daemons' logs. They are removed whole.
	RunDir  string
	LogDirs []string
	// KubeletDir is the kubelet's root directory and CSIDrivers the names
	// of the CSI drivers whose sockets are under its plugins/.
	KubeletDir string
	CSIDrivers []string
	// Scopes manages the mounts' scopes; nil leaves them.
	Scopes scope.Manager
	// Wait is how long to wait for mount pods, CSI node plugins and
	// mounts to go before refusing.
	Wait time.Duration
}

// Live is what keeps the uninstall from running: a mount pod or CSI node
// plugin that still serves, a mount that is still there.
type Live struct{ What []string }

func (l *Live) Error() string {
	return fmt.Sprintf("the node is still in use, nothing was removed:\n  %s", strings.Join(l.What, "\n  "))
}

// Run removes everything u names, once nothing is in use: it waits up to
// u.Wait for the mount pods and CSI node plugins to be gone and for no
// mount to be left, then refuses with a [*Live] error listing what is.
// It logs each thing removed.
func (u Uninstall) Run(log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if err := u.Validate(); err != nil {
		return err
	}
	r, err := openNodeRoot(u.HostRoot)
	if err != nil {
		return err
	}
	defer r.Close()
	// Unused, and kept so: the registration directory's lock, which the
	// mount pods' registrars take to write, is held from a last check to
	// the end, so that a mount pod starting meanwhile (a rollback) cannot
	// register between the check and the removals.
	deadline := time.Now().Add(u.Wait)
	for said := false; ; said = true {
		live, err := u.inUse(r)
		if err != nil {
			return err
		}
		if len(live) == 0 {
			unlock, err := r.lock(path.Join(u.RegistrationDir, registration.LockName))
			if err != nil {
				return err
			}
			defer unlock()
			if live, err = u.inUse(r); err != nil {
				return err
			}
			if len(live) == 0 {
				break
			}
			unlock()
		}
		if time.Now().After(deadline) {
			return &Live{What: live}
		}
		if !said {
			log.Info("waiting for the node to be unused", "for", u.Wait, "inUse", live)
		}
		time.Sleep(time.Second)
	}
	// The scopes first: a scope with a process (in any cgroup below the
	// plugin's, which the check above may not see) stops the uninstall
	// before any file is removed.
	if u.Scopes != nil {
		for _, p := range u.Plugins {
			if err := scope.RemovePlugin(u.Scopes, p); err != nil {
				return fmt.Errorf("%w; no file was removed", err)
			}
			log.Info("no scopes parent left", "plugin", p, "backend", u.Scopes.Backend())
		}
	}
	// The node's mount points, read once nothing uses the node: what the
	// removals must not touch.
	mounts, err := mountinfo.ParseFile(u.Mountinfo)
	if err != nil {
		return fmt.Errorf("read the node's mounts: %w", err)
	}
	for _, m := range mounts {
		r.mountPoints = append(r.mountPoints, path.Clean(m.MountPoint))
	}
	var errs []error
	removed := func(what, p string, ok bool, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", what, err))
		} else if ok {
			log.Info("removed "+what, "path", p)
		}
	}
	// The Flexvolume drivers, their log files first (named in their
	// settings).
	for _, d := range u.FlexvolumeDrivers {
		dir := path.Join(u.FlexvolumeDir, d)
		exe, _, _ := boundary.SplitFlexvolumeDriver(d)
		if logFile, err := u.driverLogFile(r, path.Join(dir, exe+flexvolume.SettingsSuffix)); err != nil {
			errs = append(errs, err)
		} else if logFile != "" {
			if st, ok, err := r.lstat(logFile); err != nil {
				errs = append(errs, err)
			} else if ok && st.Mode&unix.S_IFMT != unix.S_IFREG {
				errs = append(errs, fmt.Errorf("the Flexvolume driver's log %s is a %s: left", logFile, registration.FileType(st.Mode)))
			} else if ok {
				ok, err := r.remove(logFile)
				removed("Flexvolume driver log", logFile, ok, err)
			}
		}
		ok, err := r.removeAll(dir)
		removed("Flexvolume driver", dir, ok, err)
		// The directories of its node's mounts that pods share
		// (flexvolume.SharedRoot) and their locks.
		shared := path.Join(u.KubeletDir, "plugins", d)
		ok, err = r.removeAll(shared)
		removed("Flexvolume driver's shared mounts directory", shared, ok, err)
	}
	if u.ShimDir != "" {
		errs = append(errs, u.removeShim(r, log))
	}
	errs = append(errs, u.removeRegistrations(r, log))
	for _, d := range u.CSIDrivers {
		for _, p := range []string{path.Join(u.KubeletDir, "plugins", d), path.Join(u.KubeletDir, "plugins_registry", d+"-reg.sock")} {
			ok, err := r.removeAll(p)
			removed("CSI driver socket", p, ok, err)
		}
	}
	// Shared by every plugin's mount pod: left while another plugin is
	// registered.
	if others, err := u.otherRegistrations(r); err != nil {
		errs = append(errs, err)
	} else if len(others) > 0 {
		log.Info("left the secrets, exec-batch and log directories: other plugins are registered", "registrations", others)
	} else {
		for _, p := range append([]string{u.RunDir}, u.LogDirs...) {
			ok, err := r.removeAll(p)
			removed("directory", p, ok, err)
		}
	}
	return errors.Join(errs...)
}

// Validate checks u's paths and names: clean absolute paths, valid plugin
// and driver names.
func (u Uninstall) Validate() error {
	var errs []error
	for _, p := range append([]string{u.RegistrationDir, u.FlexvolumeDir, u.RunDir, u.KubeletDir}, u.LogDirs...) {
		if _, err := rel(p); err != nil {
			errs = append(errs, err)
		}
	}
	if u.ShimDir != "" {
		if _, err := rel(u.ShimDir); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range u.Plugins {
		if err := boundary.ValidatePluginName(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range u.FlexvolumeDrivers {
		if _, _, err := boundary.SplitFlexvolumeDriver(d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range u.CSIDrivers {
		if d == "" || d != path.Base(d) || strings.HasPrefix(d, ".") {
			errs = append(errs, fmt.Errorf("CSI driver name %q is not a plain name", d))
		}
	}
	return errors.Join(errs...)
}

// inUse lists what still uses the node: registered mount pods whose exec
// socket answers, CSI node plugins whose socket answers, live scopes, and
// the mounts the drivers make.
func (u Uninstall) inUse(r *nodeRoot) ([]string, error) {
	var live []string
	regs, err := u.registrations(r)
	if err != nil {
		return nil, err
	}
	for _, e := range regs {
		if e.Registration.ExecSocket == "" {
			continue
		}
		sock := path.Join(u.RegistrationDir, e.Registration.ExecSocket)
		if ok, err := r.answers(sock, 2*time.Second); err != nil {
			live = append(live, fmt.Sprintf("mount pod %s of plugin %s: its exec socket %s: %v", e.Registration, e.Plugin, sock, err))
		} else if ok {
			live = append(live, fmt.Sprintf("mount pod %s of plugin %s is running (its exec socket %s answers): delete it first", e.Registration, e.Plugin, sock))
		}
	}
	for _, d := range u.CSIDrivers {
		sock := path.Join(u.KubeletDir, "plugins", d, "csi.sock")
		if ok, err := r.answers(sock, 2*time.Second); err != nil {
			live = append(live, fmt.Sprintf("the CSI node plugin of %s: %s: %v", d, sock, err))
		} else if ok {
			live = append(live, fmt.Sprintf("the CSI node plugin of %s is running (%s answers): delete it first", d, sock))
		}
	}
	if u.Scopes != nil {
		for _, p := range u.Plugins {
			scopes, err := u.Scopes.List(p)
			if err != nil {
				return nil, err
			}
			for _, s := range scopes {
				if len(s.PIDs) > 0 {
					live = append(live, fmt.Sprintf("scope %s of plugin %s has processes %v (a mount's FUSE daemon)", s.Cgroup, p, s.PIDs))
				}
			}
		}
	}
	if slices.Contains(u.Plugins, rbd.Plugin) {
		// A mapped rbd image needs rbd to be unmapped.
		devs, err := r.list("/sys/bus/rbd/devices")
		if err != nil {
			return nil, err
		}
		if len(devs) > 0 {
			live = append(live, fmt.Sprintf("rbd images are mapped (/sys/bus/rbd/devices: %s): unmap them (delete the pods that use them) first", strings.Join(devs, " ")))
		}
	}
	mounts, err := mountinfo.ParseFile(u.Mountinfo)
	if err != nil {
		return nil, fmt.Errorf("read the node's mounts: %w", err)
	}
	for _, m := range mounts {
		if u.ours(m.FsType, m.MountPoint) {
			live = append(live, fmt.Sprintf("mount %s (%s from %s): unmount it (delete the pods that use it) first", m.MountPoint, m.FsType, m.Source))
		}
	}
	return live, nil
}

// ours tells the mounts the drivers make: their FUSE file systems, and
// anything mounted for a pod through one of the Flexvolume drivers or
// staged by one of the CSI drivers.
func (u Uninstall) ours(fstype, mountPoint string) bool {
	switch fstype {
	case "fuse." + glusterfs.FSType, "fuse.ceph-fuse", cephfs.FuseType:
		return true
	}
	for _, d := range u.FlexvolumeDrivers {
		if strings.Contains(mountPoint, "/volumes/"+d+"/") ||
			strings.HasPrefix(mountPoint, path.Join(u.KubeletDir, "plugins", d)+"/") {
			return true
		}
	}
	for _, d := range u.CSIDrivers {
		if strings.HasPrefix(mountPoint, path.Join(u.KubeletDir, "plugins/kubernetes.io/csi", d)+"/") {
			return true
		}
	}
	// The in-tree plugins whose utilities the mount pods carry: their
	// pods' volumes and their global mounts (rbd's devices).
	for _, p := range u.Plugins {
		if strings.Contains(mountPoint, "/volumes/"+boundary.EscapePluginName(p)+"/") ||
			strings.HasPrefix(mountPoint, path.Join(u.KubeletDir, "plugins", p)+"/") {
			return true
		}
	}
	return false
}

// registrations lists the registrations of u.Plugins in the registration
// directory.
func (u Uninstall) registrations(r *nodeRoot) ([]registration.Entry, error) {
	var out []registration.Entry
	for _, p := range u.Plugins {
		name, err := registration.FileName(p)
		if err != nil {
			return nil, err
		}
		f := path.Join(u.RegistrationDir, name)
		data, ok, err := r.readFile(f, registration.MaxFileSize)
		if err != nil {
			return nil, fmt.Errorf("registration of %s: %w", p, err)
		}
		if !ok {
			continue
		}
		reg, err := registration.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("registration %s: %w", f, err)
		}
		out = append(out, registration.Entry{Path: f, Plugin: p, Registration: reg})
	}
	return out, nil
}

// removeRegistrations removes the plugins' registrations, the exec
// sockets and mount records beside them, the directory's lock, and the
// directory once nothing else is in it.
func (u Uninstall) removeRegistrations(r *nodeRoot, log *slog.Logger) error {
	var errs []error
	regs, err := u.registrations(r)
	if err != nil {
		errs = append(errs, err)
	}
	for _, e := range regs {
		if e.Registration.ExecSocket != "" {
			sock := path.Join(u.RegistrationDir, e.Registration.ExecSocket)
			if ok, err := r.remove(sock); err != nil {
				errs = append(errs, err)
			} else if ok {
				log.Info("removed exec socket", "plugin", e.Plugin, "path", sock)
			}
		}
	}
	for _, p := range u.Plugins {
		name, _ := registration.FileName(p)
		f := path.Join(u.RegistrationDir, name)
		if ok, err := r.remove(f); err != nil {
			errs = append(errs, fmt.Errorf("remove the registration of %s: %w", p, err))
		} else if ok {
			log.Info("removed registration", "plugin", p, "path", f)
		}
	}
	// Stale sockets of earlier mount pods of these plugins have no
	// registration left to name them: the exec sockets' directory goes
	// whole once no other plugin is registered.
	others, err := u.otherRegistrations(r)
	if err != nil {
		errs = append(errs, err)
	}
	if len(others) == 0 {
		p := path.Join(u.RegistrationDir, execsocket.SocketDir)
		if ok, err := r.removeAll(p); err != nil {
			errs = append(errs, err)
		} else if ok {
			log.Info("removed directory", "path", p)
		}
	} else if _, err := r.remove(path.Join(u.RegistrationDir, execsocket.SocketDir)); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, u.removeRecords(r, log))
	// The lock, and the directory, only when nothing else is left.
	left, err := r.list(u.RegistrationDir)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if len(left) == 1 && left[0] == registration.LockName {
		if _, err := r.remove(path.Join(u.RegistrationDir, registration.LockName)); err != nil {
			errs = append(errs, err)
		}
	}
	if ok, err := r.remove(u.RegistrationDir); err != nil {
		errs = append(errs, err)
	} else if ok {
		log.Info("removed directory", "path", u.RegistrationDir)
	} else if len(left) > 0 {
		log.Info("registration directory left: other plugins' files are in it", "path", u.RegistrationDir, "files", left)
	}
	return errors.Join(errs...)
}

// removeRecords removes the mount records of u.Plugins, and their
// directory once empty; another plugin's record, or one that cannot be
// read, stays.
func (u Uninstall) removeRecords(r *nodeRoot, log *slog.Logger) error {
	dir := path.Join(u.RegistrationDir, mountrecord.Dir)
	names, err := r.list(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		p := path.Join(dir, n)
		data, ok, err := r.readFile(p, mountrecord.MaxSize)
		if err != nil || !ok {
			if err != nil {
				log.Warn("left a mount record that cannot be read", "path", p, "err", err)
			}
			continue
		}
		rec, err := mountrecord.Decode(data)
		if err != nil || !slices.Contains(u.Plugins, rec.Plugin) {
			continue
		}
		if ok, err := r.remove(p); err != nil {
			errs = append(errs, err)
		} else if ok {
			log.Info("removed mount record", "plugin", rec.Plugin, "target", rec.Target)
		}
	}
	if ok, err := r.remove(dir); err != nil {
		errs = append(errs, err)
	} else if ok {
		log.Info("removed directory", "path", dir)
	}
	return errors.Join(errs...)
}

// otherRegistrations lists the registration files of plugins not in
// u.Plugins.
func (u Uninstall) otherRegistrations(r *nodeRoot) ([]string, error) {
	names, err := r.list(u.RegistrationDir)
	if err != nil {
		return nil, err
	}
	var others []string
	for _, n := range names {
		p, err := registration.PluginFromFileName(n)
		if err == nil && !slices.Contains(u.Plugins, p) {
			others = append(others, n)
		}
	}
	return others, nil
}

// removeShim removes kubelet-exec-shim, its helper, its mapping and the
// links the mapping names that are the shim's, then the directory and
// its parent when they are left empty.
func (u Uninstall) removeShim(r *nodeRoot, log *slog.Logger) error {
	mapping := path.Join(u.ShimDir, shim.MappingFile)
	data, ok, err := r.readFile(mapping, 1<<20)
	if err != nil {
		return fmt.Errorf("remove %s: %w", shim.BinaryName, err)
	}
	var names, others []string
	if ok {
		var m shim.Mapping
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("remove %s: %s: %w", shim.BinaryName, mapping, err)
		}
		for t := range m.Tools {
			if t == "" || t != path.Base(t) || strings.HasPrefix(t, ".") {
				return fmt.Errorf("remove %s: %s names the tool %q", shim.BinaryName, mapping, t)
			}
			p := path.Join(u.ShimDir, t)
			st, ok, err := r.lstat(p)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if target, err := r.readlink(p); err != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK || target != shim.BinaryName {
				log.Warn("left a tool that is not the shim's link", "path", p)
				continue
			}
			if !slices.Contains(u.Plugins, m.Tools[t]) {
				others = append(others, t)
				continue
			}
			names = append(names, t)
		}
		slices.Sort(names)
	}
	if len(others) > 0 {
		// Another plugin's tools still run through the shim.
		var errs []error
		for _, n := range names {
			p := path.Join(u.ShimDir, n)
			if ok, err := r.remove(p); err != nil {
				errs = append(errs, err)
			} else if ok {
				log.Info("removed "+shim.BinaryName+" link", "path", p)
			}
		}
		log.Info("left "+shim.BinaryName+": other plugins' tools link to it", "tools", others)
		return errors.Join(errs...)
	}
	var errs []error
	for _, n := range append(names, shim.BinaryName, shim.HelperName, shim.MappingFile) {
		p := path.Join(u.ShimDir, n)
		if ok, err := r.remove(p); err != nil {
			errs = append(errs, err)
		} else if ok {
			log.Info("removed "+shim.BinaryName+" file", "path", p)
		}
	}
	for _, d := range []string{u.ShimDir, path.Dir(u.ShimDir)} {
		if path.Base(d) != "mountcontainers" && d != u.ShimDir {
			break // the parent only when it is ours by name
		}
		if ok, err := r.remove(d); err != nil {
			errs = append(errs, err)
		} else if ok {
			log.Info("removed directory", "path", d)
		} else {
			break
		}
	}
	return errors.Join(errs...)
}

// driverLogFile returns the log file a Flexvolume driver's settings name,
// or "".
func (u Uninstall) driverLogFile(r *nodeRoot, settings string) (string, error) {
	data, ok, err := r.readFile(settings, 64<<10)
	if err != nil || !ok {
		return "", err
	}
	var s struct {
		LogFile string `json:"logFile"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return "", fmt.Errorf("%s: %w", settings, err)
	}
	if s.LogFile == "" {
		return "", nil
	}
	if _, err := rel(s.LogFile); err != nil {
		return "", fmt.Errorf("%s: log file: %w", settings, err)
	}
	return s.LogFile, nil
}

// list returns the names in the directory at node path p (none when it
// does not exist).
func (r *nodeRoot) list(p string) ([]string, error) {
	rp, err := rel(p)
	if err != nil {
		return nil, err
	}
	fd, err := openAt(r.fd, rp, unix.O_RDONLY|unix.O_DIRECTORY, resolveBeneath)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	d := os.NewFile(uintptr(fd), p)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}
