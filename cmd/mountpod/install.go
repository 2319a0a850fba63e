package main

import (
	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
)

// installFlags are serve's flags for the host-side binaries the mount pod
// places once it is registered.
func installFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "install-flexvolume-dir", EnvVars: []string{hostinstall.EnvFlexvolumeDir}, Usage: "Install the Flexvolume driver into this kubelet volume plugin directory (the kubelet's --volume-plugin-dir, by default /usr/libexec/kubernetes/kubelet-plugins/volume/exec; mounted at the same path as on the node), as <driver dir>/<driver>, once registered."},
		&cli.StringFlag{Name: "flexvolume-driver", EnvVars: []string{hostinstall.EnvFlexvolumeDriver}, Value: flexvolume.DefaultDriver, Usage: "Directory name of the Flexvolume driver, <vendor>~<driver>; volumes name it <vendor>/<driver>."},
		&cli.StringFlag{Name: "flexvolume-plugin", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_PLUGIN"}, Usage: "Registered plugin whose mount pod the driver uses (default kubernetes.io/glusterfs when registered, else the only plugin)."},
		&cli.StringFlag{Name: "flexvolume-filesystem", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_FILESYSTEM"}, Usage: "File system the driver mounts: glusterfs or cephfs (default cephfs for the plugin kubernetes.io/cephfs, else glusterfs)."},
		&cli.StringFlag{Name: "flexvolume-secrets-dir", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_SECRETS_DIR"}, Usage: "Node directory on a tmpfs, mounted at the same path in this pod, where the driver writes the secrets mounts need (a CephFS user's key from the volume's secretRef), one root-only file per mount, removed at unmount (default " + volume.DefaultSecretsDir + ")."},
		&cli.StringFlag{Name: "flexvolume-source", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_SOURCE"}, Value: hostinstall.DefaultFlexvolumeSource, Usage: "The driver binary to install."},
		&cli.StringFlag{Name: "flexvolume-timeout", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_TIMEOUT"}, Usage: "Longest a mount or unmount of the driver may take, such as 1m (default 1m)."},
		&cli.StringFlag{Name: "flexvolume-exec-mode", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_EXEC_MODE"}, Usage: "How the driver's mount and umount reach this pod: auto (its exec socket when that answers, else CRI ExecSync), cri or socket (default auto)."},
		&cli.StringFlag{Name: "flexvolume-log-file", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_LOG_FILE"}, Usage: "Node path the driver appends a JSON record to per call and per placement decision (default none)."},
		&cli.StringSliceFlag{Name: "flexvolume-allowed-servers", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS"}, Usage: "Servers volumes may name (GlusterFS servers, Ceph monitors), recorded for the driver: host names, addresses and CIDRs; repeat the flag or separate entries with commas. Empty allows any server whose addresses are not loopback, link-local, unspecified, multicast or broadcast; those are allowed only when listed explicitly (a listed name is trusted whatever it resolves to)."},
		&cli.BoolFlag{Name: "flexvolume-shared-mounts", EnvVars: []string{"MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS"}, Value: true, Usage: "Recorded for the driver: mount each volume once per namespace and node and bind it at the directory of every pod of the namespace that asks for the same mount (one FUSE daemon per volume instead of per pod; those pods share its daemon); false: a mount and daemon per pod. Volumes that need a secret are mounted per pod regardless."},
		&cli.StringFlag{Name: "install-shim-dir", EnvVars: []string{"MOUNTPOD_INSTALL_SHIM_DIR"}, Usage: "Install kubelet-exec-shim, its helper kubelet-exec-shim-cri and links named after the registered plugins' tools into this host directory (mounted at the same path as on the node) once registered."},
		&cli.StringFlag{Name: "shim-source", EnvVars: []string{"MOUNTPOD_SHIM_SOURCE"}, Value: hostinstall.DefaultShimSource, Usage: "The kubelet-exec-shim binary to install; kubelet-exec-shim-cri is taken from the same directory."},
		&cli.StringFlag{Name: "host-runtime-endpoint", EnvVars: []string{"MOUNTPOD_HOST_RUNTIME_ENDPOINT"}, Usage: "CRI endpoint as the node sees it, recorded for the installed driver and shim (default: they probe the usual sockets)."},
	}
}

// installConfigFrom builds the install configuration from the flags of c.
func installConfigFrom(c *cli.Context) hostinstall.Config {
	return hostinstall.Config{
		FlexvolumeDir:            c.String("install-flexvolume-dir"),
		FlexvolumeDriver:         c.String("flexvolume-driver"),
		FlexvolumePlugin:         c.String("flexvolume-plugin"),
		FlexvolumeSource:         c.String("flexvolume-source"),
		FlexvolumeFilesystem:     c.String("flexvolume-filesystem"),
		FlexvolumeSecretsDir:     c.String("flexvolume-secrets-dir"),
		FlexvolumeTimeout:        c.String("flexvolume-timeout"),
		FlexvolumeExecMode:       c.String("flexvolume-exec-mode"),
		FlexvolumeLogFile:        c.String("flexvolume-log-file"),
		FlexvolumeAllowedServers: c.StringSlice("flexvolume-allowed-servers"),
		FlexvolumeSharedMounts:   c.Bool("flexvolume-shared-mounts"),
		ShimDir:                  c.String("install-shim-dir"),
		ShimSource:               c.String("shim-source"),
		HostRuntimeEndpoint:      c.String("host-runtime-endpoint"),
	}
}
