package main

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// uninstallCommand removes from the node what the mount pods and the CSI
// node plugins left on it (deploy/uninstall runs it on every node).
func uninstallCommand() *cli.Command {
	return &cli.Command{
		Name:  "uninstall",
		Usage: "Remove everything the mount pods and CSI node plugins left on this node, once nothing uses it.",
		Description: "Run on the node, or in a privileged pod with the host's PID namespace and the node's / mounted (deploy/uninstall), after the mount pods and CSI drivers are deleted. " +
			"It removes the Flexvolume drivers and their log files, kubelet-exec-shim and its links, the plugins' registrations, exec sockets and mount records, the CSI drivers' sockets, the secrets and exec-batch directory, the FUSE daemons' logs, and the scopes' cgroups or systemd slices. " +
			"Every path is resolved beneath --host-root without following a symbolic link; a link found is removed itself, a mount point found stops the removal. " +
			"While a mount pod or CSI node plugin still answers, a scope has processes or a mount of the drivers is left, it waits up to --wait, then removes nothing, prints what is in use and exits 1.",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "plugins", EnvVars: []string{boundary.EnvPlugins}, Value: cli.NewStringSlice(hostinstall.DefaultPlugins...), Usage: "Volume plugins whose registrations and scopes are removed; repeat the flag or separate names with commas."},
			&cli.StringFlag{Name: "registration-dir", EnvVars: oldnames.Vars(envRegistrationDir, envRenames), Value: registration.DefaultDir, Usage: "Directory of the registration files."},
			&cli.StringFlag{Name: "kubelet-dir", EnvVars: []string{"MOUNTPOD_KUBELET_DIR"}, Usage: "The kubelet's directory: the CSI drivers' sockets are under its plugins/ (default: the parent of the registration directory)."},
			&cli.StringFlag{Name: "install-flexvolume-dir", EnvVars: []string{hostinstall.EnvFlexvolumeDir}, Value: flexvolume.DefaultPluginDir, Usage: "The kubelet's Flexvolume directory the drivers were installed into."},
			&cli.StringSliceFlag{Name: "flexvolume-drivers", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_DRIVERS"}, Value: cli.NewStringSlice(hostinstall.DefaultDrivers...), Usage: "Flexvolume driver directories (<vendor>~<driver>) removed from it."},
			&cli.StringFlag{Name: "install-shim-dir", EnvVars: []string{"MOUNTPOD_INSTALL_SHIM_DIR"}, Value: hostinstall.DefaultShimDir, Usage: "Directory kubelet-exec-shim was installed into; empty: none. The directory, and its parent when named mountcontainers, go when left empty."},
			&cli.StringSliceFlag{Name: "csi-drivers", EnvVars: []string{"MOUNTPOD_CSI_DRIVERS"}, Value: cli.NewStringSlice(hostinstall.DefaultCSIDrivers...), Usage: "CSI drivers whose sockets are removed from the kubelet's directory."},
			&cli.StringFlag{Name: "run-dir", EnvVars: []string{"MOUNTPOD_RUN_DIR"}, Value: hostinstall.DefaultRunDir, Usage: "Directory of the drivers' secrets and exec batches, removed whole."},
			&cli.StringSliceFlag{Name: "daemon-log-dirs", EnvVars: []string{"MOUNTPOD_DAEMON_LOG_DIRS"}, Value: cli.NewStringSlice(hostinstall.DefaultLogDir), Usage: "Directories of the FUSE daemons' logs, removed whole; repeat the flag or separate them with commas."},
			&cli.StringFlag{Name: "host-root", EnvVars: []string{"MOUNTPOD_HOST_ROOT"}, Value: hostinstall.DefaultHostRoot, Usage: "Where the node's root directory is seen: / on the node itself, the mount of its / in a pod (deploy/uninstall mounts it at /host)."},
			&cli.StringFlag{Name: "host-mountinfo", EnvVars: []string{"MOUNTPOD_HOST_MOUNTINFO"}, Value: hostinstall.DefaultMountinfo, Usage: "The node's mount table."},
			&cli.DurationFlag{Name: "wait", EnvVars: []string{"MOUNTPOD_WAIT"}, Value: 2 * time.Minute, Usage: "How long to wait for the mount pods, CSI node plugins and mounts to go."},
		}, logging.Flags("MOUNTPOD_")...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("uninstall takes no arguments", exitUsage)
			}
			log, err := logging.FromFlags(c, c.App.ErrWriter, exitUsage)
			if err != nil {
				return err
			}
			kubelet := c.String("kubelet-dir")
			if kubelet == "" {
				kubelet = filepath.Dir(filepath.Clean(c.String("registration-dir")))
			}
			u := hostinstall.Uninstall{
				HostRoot:          c.String("host-root"),
				Mountinfo:         c.String("host-mountinfo"),
				Plugins:           c.StringSlice("plugins"),
				RegistrationDir:   c.String("registration-dir"),
				FlexvolumeDir:     c.String("install-flexvolume-dir"),
				FlexvolumeDrivers: c.StringSlice("flexvolume-drivers"),
				ShimDir:           c.String("install-shim-dir"),
				RunDir:            c.String("run-dir"),
				LogDirs:           c.StringSlice("daemon-log-dirs"),
				KubeletDir:        kubelet,
				CSIDrivers:        c.StringSlice("csi-drivers"),
				Wait:              c.Duration("wait"),
			}
			if err := u.Validate(); err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			enabled, cfg, err := scope.ConfigFromEnv(os.Getenv)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			if enabled {
				m, err := scope.New(cfg)
				if err != nil {
					return cli.Exit("scopes: "+err.Error()+" (MOUNTPOD_SCOPES=false leaves them)", exitFailure)
				}
				defer m.Close()
				u.Scopes = m
			}
			if err := u.Run(log); err != nil {
				var live *hostinstall.Live
				if errors.As(err, &live) {
					return cli.Exit(err.Error(), exitFailure)
				}
				return cli.Exit("uninstall: "+err.Error(), exitFailure)
			}
			log.Info("the node is clean")
			return nil
		},
	}
}
