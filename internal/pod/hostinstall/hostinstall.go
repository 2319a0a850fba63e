// Package hostinstall places the host-side binaries a mount pod carries
// once it is registered: the Flexvolume driver into the kubelet's volume
// plugin directory (package flexvolume) and kubelet-exec-shim with links
// named after the plugins' tools into a host directory (package shim).
// Both directories are hostPath volumes mounted at the same path as on the
// node; `mountpod serve` calls it, the mount-pod daemon itself knows
// nothing of it.
package hostinstall

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/rbd"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/node/shim"
)

// Default sources of the installed binaries, as the image places them.
const (
	DefaultFlexvolumeSource = "/usr/local/bin/flexvolume-driver"
	DefaultShimSource       = "/usr/local/bin/" + shim.BinaryName
)

// ShimTools are the utilities, per plugin, under whose names the shim is
// installed with [Config].ShimDir, as each file system's package names
// them. Plugins not listed get no links.
var ShimTools = map[string][]string{
	glusterfs.Plugin: glusterfs.Tools,
	rbd.Plugin:       rbd.Tools,
}

// The environment variables of `mountpod serve` that choose the Flexvolume
// driver it installs (its flags --install-flexvolume and
// --flexvolume-driver); the rollout reads them from a DaemonSet's template.
const (
	EnvFlexvolumeDir    = boundary.EnvFlexvolumeDir
	EnvFlexvolumeDriver = boundary.EnvFlexvolumeDriver
)

// Config says which host-side binaries the mount pod places once it is
// registered.
type Config struct {
	// FlexvolumeDir is the kubelet's Flexvolume directory; empty installs
	// no driver.
	FlexvolumeDir string
	// FlexvolumeDriver is the driver directory name <vendor>~<driver>;
	// default flexvolume.DefaultDriver.
	FlexvolumeDriver string
	// FlexvolumePlugin is the plugin the driver follows; default
	// kubernetes.io/glusterfs when this pod registers it, else the only
	// plugin it registers. It must be one this pod registers.
	FlexvolumePlugin string
	// FlexvolumeSource is the driver binary; default DefaultFlexvolumeSource.
	FlexvolumeSource string
	// FlexvolumeFilesystem is the file system the driver mounts
	// (internal/shared/fs/known.Filesystems); default flexvolume.FilesystemOf the plugin.
	FlexvolumeFilesystem string
	// FlexvolumeSecretsDir is the node directory, on a tmpfs and mounted at
	// the same path in the pod, where the driver writes the secrets mounts
	// need; default volume.DefaultSecretsDir.
	FlexvolumeSecretsDir string
	// FlexvolumeTimeout bounds each mount or umount of the driver, as a Go
	// duration; empty means flexvolume.DefaultTimeout.
	FlexvolumeTimeout string
	// FlexvolumeExecMode is how the driver's mount and umount reach this
	// pod: "auto" (empty), "cri" or "socket"; see package exec.
	FlexvolumeExecMode string
	// FlexvolumeLogFile is a node path the driver appends its calls and
	// placement decisions to; empty logs nothing.
	FlexvolumeLogFile string
	// FlexvolumeAllowedServers is the administrator's allow-list of the
	// servers (GlusterFS servers, Ceph monitors) volumes may name (host names, addresses, CIDRs);
	// empty allows any server whose addresses are not loopback,
	// link-local or unspecified. See fs.ServerPolicy (internal/shared/fs).
	FlexvolumeAllowedServers []string
	// FlexvolumeSharedMounts, recorded for the driver, mounts each volume
	// once per node and binds it per pod (flexvolume.Settings.SharedMounts).
	FlexvolumeSharedMounts bool

	// ShimDir receives kubelet-exec-shim and links named after the tools of
	// every registered plugin ([ShimTools]); empty installs no shim.
	ShimDir string
	// ShimSource is the shim binary; default DefaultShimSource.
	ShimSource string

	// HostRuntimeEndpoint is the CRI endpoint as the node sees it, recorded
	// for the driver and the shim; empty lets them probe the usual sockets.
	HostRuntimeEndpoint string
}

// Enabled reports whether anything is to be installed.
func (c Config) Enabled() bool { return c.FlexvolumeDir != "" || c.ShimDir != "" }

// Validate checks what can be checked before the pod registers: the
// driver's allow-list of servers, so that a bad entry stops the pod at
// start with a message naming it rather than after registering.
func (c Config) Validate() error {
	if c.FlexvolumeDir == "" {
		return nil
	}
	if _, err := flexvolume.ParseAllowedServers(c.FlexvolumeAllowedServers); err != nil {
		return fmt.Errorf("--flexvolume-allowed-servers (MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS): %w", err)
	}
	s := flexvolume.Settings{Filesystem: c.FlexvolumeFilesystem, SecretsDir: c.FlexvolumeSecretsDir}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("--flexvolume-filesystem, --flexvolume-secrets-dir: %w", err)
	}
	return nil
}

// FlexvolumeVolumeDriver returns the name volumes use for the Flexvolume
// driver c installs (flexVolume.driver, "<vendor>/<driver>", such as
// mountcontainers.io/glusterfs), or "" when c installs none.
func (c Config) FlexvolumeVolumeDriver() (string, error) {
	if c.FlexvolumeDir == "" {
		return "", nil
	}
	return boundary.FlexvolumeVolumeDriver(c.FlexvolumeDriver)
}

// flexvolumePlugin picks the driver's plugin among the registered ones.
func (c Config) flexvolumePlugin(plugins []string) (string, error) {
	switch {
	case c.FlexvolumePlugin != "":
		if !slices.Contains(plugins, c.FlexvolumePlugin) {
			return "", fmt.Errorf("flexvolume plugin %s is not one this pod registers (%v)", c.FlexvolumePlugin, plugins)
		}
		return c.FlexvolumePlugin, nil
	case slices.Contains(plugins, flexvolume.DefaultPlugin):
		return flexvolume.DefaultPlugin, nil
	case len(plugins) == 1:
		return plugins[0], nil
	default:
		return "", fmt.Errorf("this pod registers %v: choose the flexvolume driver's plugin", plugins)
	}
}

// Install places the binaries Config asks for, for a pod that
// registers plugins into registrationDir. Each file is written under a
// dot-name and renamed into place (flexvolume.Install, shim.Install), so the
// kubelet and running programs see either the old copy or the new one.
func (c Config) Install(plugins []string, registrationDir string, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	var errs []error
	if c.FlexvolumeDir != "" {
		if err := c.installFlexvolume(plugins, registrationDir, log); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ShimDir != "" {
		if err := c.installShim(plugins, registrationDir, log); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c Config) installFlexvolume(plugins []string, registrationDir string, log *slog.Logger) error {
	plugin, err := c.flexvolumePlugin(plugins)
	if err != nil {
		return fmt.Errorf("install flexvolume driver: %w", err)
	}
	src := c.FlexvolumeSource
	if src == "" {
		src = DefaultFlexvolumeSource
	}
	path, err := flexvolume.Install(flexvolume.InstallOptions{
		PluginDir: c.FlexvolumeDir,
		Driver:    c.FlexvolumeDriver,
		Source:    src,
		Settings: flexvolume.Settings{
			Filesystem:      c.FlexvolumeFilesystem,
			SecretsDir:      c.FlexvolumeSecretsDir,
			Plugin:          plugin,
			RegistrationDir: registrationDir,
			RuntimeEndpoint: c.HostRuntimeEndpoint,
			Timeout:         c.FlexvolumeTimeout,
			ExecMode:        c.FlexvolumeExecMode,
			LogFile:         c.FlexvolumeLogFile,
			AllowedServers:  c.FlexvolumeAllowedServers,
			SharedMounts:    c.FlexvolumeSharedMounts,
		},
	})
	if err != nil {
		return err
	}
	log.Info("installed flexvolume driver", "path", path, "plugin", plugin, "filesystem", cmp.Or(c.FlexvolumeFilesystem, flexvolume.FilesystemOf(plugin)), "allowedServers", c.FlexvolumeAllowedServers)
	return nil
}

func (c Config) installShim(plugins []string, registrationDir string, log *slog.Logger) error {
	src := c.ShimSource
	if src == "" {
		src = DefaultShimSource
	}
	sorted := slices.Clone(plugins)
	sort.Strings(sorted)
	installed := 0
	for _, p := range sorted {
		tools := ShimTools[p]
		if len(tools) == 0 {
			continue
		}
		err := shim.Install(shim.InstallOptions{
			Dir: c.ShimDir, Source: src, Plugin: p, Tools: tools,
			RegistrationDir: registrationDir, RuntimeEndpoint: c.HostRuntimeEndpoint,
		})
		if err != nil {
			return err
		}
		log.Info("installed "+shim.BinaryName, "dir", c.ShimDir, "plugin", p, "tools", tools)
		installed++
	}
	if installed == 0 {
		return fmt.Errorf("install %s: none of the plugins %v has tools to link (known: %v)", shim.BinaryName, plugins, knownShimPlugins())
	}
	return nil
}

func knownShimPlugins() []string {
	var ps []string
	for p := range ShimTools {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}
