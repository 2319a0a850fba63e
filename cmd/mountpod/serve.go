package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/pkg/mountpod"
)

func serveCommand(logTo io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "Check the required tools, register this container for every plugin and keep the registrations until SIGTERM or SIGINT, then remove those that still name this pod.",
		Flags: settingsFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("serve takes no arguments", exitUsage)
			}
			cfg := configFrom(c)
			cfg.Logger = newLogger(logTo)
			d, err := mountpod.New(cfg)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			if err := d.Run(c.Context); err != nil {
				cfg.Logger.Error("mountpod failed", "err", err)
				return cli.Exit("", exitFailure)
			}
			return nil
		},
	}
}
