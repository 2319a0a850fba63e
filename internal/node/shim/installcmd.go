package shim

import (
	"github.com/urfave/cli/v2"
)

func installCommand(cfg *Config) *cli.Command {
	var dir, plugin, source string
	return &cli.Command{
		Name:        "install",
		Usage:       "Place the shim and links named after each TOOL into DIR.",
		Description: "Place the shim and links named after each TOOL into DIR; invoked as TOOL, the shim runs TOOL for PLUGIN.",
		ArgsUsage:   "TOOL...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "Directory to install into (put it on the callers' PATH).", Required: true, Destination: &dir},
			&cli.StringFlag{Name: "plugin", Usage: "Volume plugin the tools belong to.", Required: true, Destination: &plugin},
			&cli.StringFlag{Name: "source", Usage: "Shim binary to copy (default: this one); " + HelperName + " is taken from the same directory.", Destination: &source},
		},
		Action: func(c *cli.Context) error {
			err := Install(InstallOptions{
				Dir: dir, Source: source, Plugin: plugin, Tools: c.Args().Slice(),
				RegistrationDir: cfg.RegistrationDir, RuntimeEndpoint: cfg.RuntimeEndpoint,
				HostMode: cfg.HostMode, HostRoot: cfg.HostRoot,
			})
			if err != nil {
				return cli.Exit(err.Error(), ExitShimFailed)
			}
			return nil
		},
	}
}

func uninstallCommand() *cli.Command {
	var dir string
	return &cli.Command{
		Name:        "uninstall",
		Usage:       "Remove the given tools' links from DIR, and the shim once none is left.",
		Description: "Remove the given tools' links from DIR (all of them when no TOOL is given), and the shim once none is left.",
		ArgsUsage:   "[TOOL...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "Directory the shim was installed into.", Required: true, Destination: &dir},
		},
		Action: func(c *cli.Context) error {
			if err := Uninstall(dir, c.Args().Slice()); err != nil {
				return cli.Exit(err.Error(), ExitShimFailed)
			}
			return nil
		},
	}
}
