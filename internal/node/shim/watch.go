package shim

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

func watchCommand(cfg *Config, stdio IO) *cli.Command {
	return &cli.Command{
		Name:  "watch",
		Usage: "Print one line per registration change until interrupted.",
		Action: func(c *cli.Context) error {
			log := slog.New(slog.NewTextHandler(stdio.Stderr, nil))
			events, err := registration.Watch(c.Context, cfg.RegistrationDir, registration.WatchOptions{Logger: log})
			if err != nil {
				return cli.Exit(err.Error(), ExitShimFailed)
			}
			for ev := range events {
				fmt.Fprintf(stdio.Stdout, "%s %s %s\n", time.Now().UTC().Format(time.RFC3339), ev.Plugin, describe(cfg.RegistrationDir, ev.Plugin))
			}
			return nil // interrupted
		},
	}
}

// describe says what the registration of plugin is now.
func describe(dir, plugin string) string {
	r, ok, err := registration.Read(dir, plugin)
	switch {
	case err != nil:
		return "invalid: " + err.Error()
	case !ok:
		return "removed"
	}
	return "registered " + r.String()
}
