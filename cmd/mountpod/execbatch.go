package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/execbatch"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// execBatchCommand runs a batch of commands that a volume host sent in one
// CRI ExecSync (package pkg/execbatch): `mountpod exec-batch REQUEST...`,
// their results as JSON on standard output.
func execBatchCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:            wire.Subcommand,
		Hidden:          true,
		Usage:           "Run a batch of commands a volume host sent in one CRI ExecSync.",
		Description:     "Run the commands of REQUEST... (JSON, package execbatch) side by side, each in a command slot of the container (MOUNTPOD_COMMAND_SLOTS), and print their results.",
		ArgsUsage:       "REQUEST...",
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			// Without its slots (a bad setting, which serve refuses
			// at start, or a directory that cannot be made, which serve
			// logs when it serves the exec socket) the batch runs
			// unbounded: failing the mounts would be worse.
			slots, _ := openCommandSlots()
			if slots != nil {
				defer slots.Close()
			}
			placer, release := earlyPlacer(nil)
			defer release()
			// Warnings only: standard error is the ExecSync's, which the
			// volume host gets back with the results.
			log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if err := execbatch.Run(c.Context, args, stdout, slots, placer, log); err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			return nil
		},
	}
}

// execBatchFlag chooses the batch program the registrations advertise;
// shared by serve and check, as the exec socket is.
func execBatchFlag() cli.Flag {
	return &cli.StringFlag{
		Name: "exec-batch", EnvVars: []string{"MOUNTPOD_EXEC_BATCH"}, Value: "auto",
		Usage: `Program in this container that runs a batch of commands a volume host sends in one CRI ExecSync, advertised in the registrations: "auto" for this binary ("` + wire.Subcommand + `"), "none" to advertise none (every command through CRI is then an exec of its own), or an absolute path.`,
	}
}

// execBatchFrom returns the registration's execBatch for the flags of c:
// empty when disabled.
func execBatchFrom(c *cli.Context) (string, error) {
	s := c.String("exec-batch")
	switch s {
	case "none", "":
		return "", nil
	case "auto":
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("exec batch: this binary's path: %w", err)
		}
		s = self
	}
	if err := registration.ValidateExecBatch(s); err != nil {
		return "", err
	}
	return s, nil
}
