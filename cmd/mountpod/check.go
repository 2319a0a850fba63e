package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
)

func checkCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:        "check",
		Usage:       "Exit 0 when this pod is registered for its plugins and has its tools (readiness).",
		Description: "Exit 0 if every configured plugin is registered to this pod and every required tool is present; otherwise print why not and exit 1. Meant for the readiness probe.",
		Flags:       settingsFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit("check takes no arguments", exitUsage)
			}
			cfg, err := configFrom(c)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			if problems := registrar.Check(cfg); len(problems) > 0 {
				fmt.Fprintln(stdout, "not ready:")
				for _, p := range problems {
					fmt.Fprintln(stdout, "  "+strings.ReplaceAll(p, "\n", "\n    "))
				}
				return cli.Exit("", exitFailure)
			}
			fmt.Fprintf(stdout, "ready: %s registered to %s/%s (uid %s, container %s)\n",
				strings.Join(cfg.Plugins, ", "), cfg.Pod.PodNamespace, cfg.Pod.PodName, cfg.Pod.PodUID, cfg.Pod.ContainerName)
			return nil
		},
	}
}
