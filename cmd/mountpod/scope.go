package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// scopeCommand is `mountpod scope`, the wrapper the volume host puts in
// front of a mount made through the mount pod (see scope.Wrap). It never
// returns on success: the process becomes the command.
func scopeCommand() *cli.Command {
	return &cli.Command{
		Name:      "scope",
		Usage:     "Move this process into the cgroup (scope) of a mount target, outside this container, then exec the command, so that the daemons it starts (FUSE clients) outlive the mount pod. Exits with the command's code; 125 when the scope could not be made, 126 or 127 when the command cannot be run or is not found.",
		ArgsUsage: "-- COMMAND [ARG...]",
		Flags:     scopeFlags(),
		// Usage errors too are the wrapper's own failures: 125, never a
		// code the command could return.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit("scope: "+err.Error(), scope.ExitFailed)
		},
		Action: func(c *cli.Context) error {
			plugin, target := c.String("plugin"), c.String("target")
			if plugin == "" || target == "" {
				return cli.Exit("scope: --plugin and --target are required", scope.ExitFailed)
			}
			if c.NArg() == 0 {
				return cli.Exit("scope: no command given: mountpod scope --plugin P --target T -- COMMAND [ARG...]", scope.ExitFailed)
			}
			cfg, err := scopeConfigFrom(c)
			if err != nil {
				return cli.Exit("scope: "+err.Error(), scope.ExitFailed)
			}
			err = scope.Exec(cfg, plugin, target, c.Args().Slice())
			return cli.Exit("scope: "+err.Error(), scope.ExitCode(err))
		},
	}
}

// scopeFlags are the flags of `mountpod scope`. Everything but the plugin
// and the target is a setting of the mount pod, from its environment.
func scopeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "plugin", EnvVars: []string{"MOUNTPOD_SCOPE_PLUGIN"}, Usage: "Volume plugin of the mount, such as kubernetes.io/glusterfs: the scope goes under its parent cgroup."},
		&cli.StringFlag{Name: "target", EnvVars: []string{"MOUNTPOD_SCOPE_TARGET"}, Usage: "Mount target, an absolute path: it names the scope, so the same target always gets the same scope."},
		&cli.StringFlag{Name: "backend", EnvVars: []string{"MOUNTPOD_SCOPE_BACKEND"}, Value: string(scope.BackendAuto), Usage: `How scopes are made: "auto" (systemd when it answers on a systemd socket, else cgroupfs), "cgroupfs" or "systemd".`},
		&cli.StringFlag{Name: "cgroup-root", EnvVars: []string{"MOUNTPOD_SCOPE_CGROUP_ROOT"}, Value: scope.DefaultCgroupRoot, Usage: "Where the host's cgroup file system is mounted in this container, such as /host/sys/fs/cgroup (cgroupfs backend)."},
		&cli.StringFlag{Name: "parent", EnvVars: []string{"MOUNTPOD_SCOPE_PARENT"}, Value: scope.DefaultParent, Usage: "Cgroup, relative to the root of every hierarchy, under which each plugin gets its parent; for systemd, the prefix of the plugin's slice."},
		&cli.StringFlag{Name: "memory-limit", EnvVars: []string{"MOUNTPOD_SCOPE_MEMORY_LIMIT"}, Usage: "Memory limit of each plugin's parent cgroup (all its mounts together), such as 2Gi; empty for none."},
		&cli.StringFlag{Name: "pids-limit", EnvVars: []string{"MOUNTPOD_SCOPE_PIDS_LIMIT"}, Usage: "Most processes and threads each plugin's parent cgroup may hold (all its mounts together); empty or 0 for no limit."},
		&cli.StringFlag{Name: "oom-score-adj", EnvVars: []string{"MOUNTPOD_SCOPE_OOM_SCORE_ADJ"}, Usage: "Least oom_score_adj the command runs with, from -1000 to 1000: a lower one (a system-node-critical pod's -997) is raised to it, a higher one kept; empty or 0 for an ordinary process's."},
		&cli.StringSliceFlag{Name: "systemd-socket", EnvVars: []string{"MOUNTPOD_SCOPE_SYSTEMD_SOCKETS"}, Value: cli.NewStringSlice(scope.DefaultSystemdSockets...), Usage: `D-Bus sockets tried for systemd, in order; one named "private" is systemd's own, any other a system bus.`},
		&cli.StringFlag{Name: "cgroupns", EnvVars: []string{"MOUNTPOD_SCOPE_CGROUPNS"}, Value: string(scope.CgroupNSAuto), Usage: `Whether cgroupfs placement enters the host's cgroup namespace: "auto" (when this container's is private), "enter" or "off".`},
		&cli.StringFlag{Name: "host-cgroupns", EnvVars: []string{"MOUNTPOD_SCOPE_HOST_CGROUPNS"}, Value: scope.DefaultHostCgroupNS, Usage: "The host's cgroup namespace (needs hostPID for the default)."},
		&cli.DurationFlag{Name: "timeout", EnvVars: []string{"MOUNTPOD_SCOPE_TIMEOUT"}, Value: scope.DefaultTimeout, Usage: "Longest a call to systemd may take, its job included."},
	}
}

// scopeConfigFrom builds the scope configuration from the flags of c with
// the code that reads the MOUNTPOD_SCOPE_* environment of serve and of the
// mount helper, scope.ConfigFromEnv: each flag stands for the variable it
// reads (see scopeEnv), so a setting has the same meaning, checks and
// default whether it is given to `mountpod scope` or to the mount pod.
// MOUNTPOD_SCOPES is not asked: whoever runs `mountpod scope` wants a
// scope.
func scopeConfigFrom(c *cli.Context) (scope.Config, error) {
	env := scopeEnv(c)
	_, cfg, err := scope.ConfigFromEnv(func(name string) string { return env[name] })
	return cfg, err
}

// scopeEnv returns the value of each MOUNTPOD_SCOPE_* setting as c's flags
// give it (the flag, else the variable, else the flag's default), written
// as the variable is.
func scopeEnv(c *cli.Context) map[string]string {
	return map[string]string{
		"MOUNTPOD_SCOPE_BACKEND":         c.String("backend"),
		"MOUNTPOD_SCOPE_CGROUP_ROOT":     c.String("cgroup-root"),
		"MOUNTPOD_SCOPE_PARENT":          c.String("parent"),
		"MOUNTPOD_SCOPE_MEMORY_LIMIT":    c.String("memory-limit"),
		"MOUNTPOD_SCOPE_PIDS_LIMIT":      c.String("pids-limit"),
		"MOUNTPOD_SCOPE_OOM_SCORE_ADJ":   c.String("oom-score-adj"),
		"MOUNTPOD_SCOPE_SYSTEMD_SOCKETS": strings.Join(c.StringSlice("systemd-socket"), ","),
		"MOUNTPOD_SCOPE_CGROUPNS":        c.String("cgroupns"),
		"MOUNTPOD_SCOPE_HOST_CGROUPNS":   c.String("host-cgroupns"),
		"MOUNTPOD_SCOPE_TIMEOUT":         c.Duration("timeout").String(),
	}
}
