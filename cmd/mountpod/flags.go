package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// settingsFlags are the flags shared by serve and check: both must see the
// same pod, plugins, directory and tools.
func settingsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "pod-namespace", EnvVars: oldnames.Vars("MOUNTPOD_POD_NAMESPACE", envRenames), Usage: "Namespace of this pod (downward API: metadata.namespace)."},
		&cli.StringFlag{Name: "pod-name", EnvVars: oldnames.Vars("MOUNTPOD_POD_NAME", envRenames), Usage: "Name of this pod (downward API: metadata.name)."},
		&cli.StringFlag{Name: "pod-uid", EnvVars: oldnames.Vars("MOUNTPOD_POD_UID", envRenames), Usage: "UID of this pod (downward API: metadata.uid)."},
		&cli.StringFlag{Name: "container-name", EnvVars: oldnames.Vars("MOUNTPOD_CONTAINER_NAME", envRenames), Usage: "Name of this container in the pod; the downward API cannot give it."},
		&cli.StringSliceFlag{Name: "plugins", EnvVars: []string{boundary.EnvPlugins}, Usage: "Volume plugin to register, such as kubernetes.io/rbd; repeat the flag or separate names with commas."},
		&cli.StringFlag{Name: "registration-dir", EnvVars: oldnames.Vars(envRegistrationDir, envRenames), Value: registration.DefaultDir, Usage: "Directory of the registration files."},
		&cli.StringSliceFlag{Name: "require-tools", EnvVars: []string{"MOUNTPOD_REQUIRE_TOOLS"}, Usage: "Executable that must be on PATH before registering; repeat the flag or separate names with commas (empty means none). A plugin's own tools (ceph-fuse, mount.fuse.ceph: kubernetes.io/cephfs; mount.glusterfs; rbd) are required only of a pod that serves it."},
		execSocketFlag(),
		execBatchFlag(),
	}
}

// configFrom builds the daemon configuration from the flags of c.
func configFrom(c *cli.Context) (registrar.Config, error) {
	cfg := registrar.Config{
		Pod: registration.Registration{
			PodNamespace:  c.String("pod-namespace"),
			PodName:       c.String("pod-name"),
			PodUID:        c.String("pod-uid"),
			ContainerName: c.String("container-name"),
		},
		Plugins:       c.StringSlice("plugins"),
		Dir:           c.String("registration-dir"),
		RequiredTools: c.StringSlice("require-tools"),
		SearchPath:    os.Getenv("PATH"),
	}
	var err error
	if cfg.Pod.ExecSocket, err = execSocketFrom(c, cfg.Dir, cfg.Pod.PodUID); err != nil {
		return cfg, err
	}
	cfg.Pod.ExecBatch, err = execBatchFrom(c)
	return cfg, err
}
