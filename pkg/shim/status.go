package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Status is one plugin's state, as `status` reports it.
type Status struct {
	Plugin        string `json:"plugin"`
	File          string `json:"file"`
	PodNamespace  string `json:"podNamespace,omitempty"`
	PodName       string `json:"podName,omitempty"`
	PodUID        string `json:"podUID,omitempty"`
	ContainerName string `json:"containerName,omitempty"`
	// Live is true when commands run in the registered container.
	Live bool `json:"live"`
	// ContainerID is the container commands run in, when Live.
	ContainerID string `json:"containerID,omitempty"`
	// Via is how commands reach the container, when Live: "exec-socket"
	// or "cri-exec-sync".
	Via string `json:"via,omitempty"`
	// ViaReason says why (why not the exec socket, when it is not used).
	ViaReason string `json:"viaReason,omitempty"`
	// ExecSocket is the exec socket the registration advertises.
	ExecSocket string `json:"execSocket,omitempty"`
	// Reason says why not live: no file, no running container, untrusted
	// file, invalid registration, runtime unreachable.
	Reason string `json:"reason"`
	// Error is the full error behind Reason, if any.
	Error string `json:"error,omitempty"`
}

// The reasons of a [Status].
const (
	StatusLive          = "registered container is running"
	StatusNoFile        = "no file"
	StatusNotRunning    = "no running container"
	StatusUntrusted     = "untrusted file"
	StatusInvalid       = "invalid registration"
	StatusUnreachable   = "runtime unreachable"
	StatusRuntimeBroken = "runtime error"
	// StatusSocketUnusable: --exec-mode socket, and the running container's
	// exec socket cannot be used.
	StatusSocketUnusable = "exec socket unusable"
)

func statusCommand(cfg *Config, stdio IO) *cli.Command {
	var plugin, output string
	return &cli.Command{
		Name:  "status",
		Usage: "Show every registration and whether its container is live.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "plugin", Usage: "Show only this plugin (also when it is not registered).", Destination: &plugin},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "Output format: table or json.", Value: "table", Destination: &output},
		},
		Action: func(c *cli.Context) error {
			if output != "table" && output != "json" {
				return cli.Exit(fmt.Sprintf("status: -o %q: want table or json", output), ExitShimFailed)
			}
			sts, err := Statuses(c.Context, cfg, plugin, stdio.Stderr)
			if err != nil {
				return cli.Exit(err.Error(), ExitShimFailed)
			}
			if output == "json" {
				enc := json.NewEncoder(stdio.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(sts)
			}
			return printTable(stdio.Stdout, sts)
		},
	}
}

// Statuses returns the state of every registration in cfg's directory, or
// of one plugin when plugin is not empty.
func Statuses(ctx context.Context, cfg *Config, plugin string, stderr io.Writer) ([]Status, error) {
	r := cfg.resolver(stderr)
	defer r.Close()
	var sts []Status
	if plugin != "" {
		path, err := registration.Path(cfg.RegistrationDir, plugin)
		if err != nil {
			return nil, err
		}
		sts = append(sts, status(ctx, r, plugin, path, nil))
		return sts, nil
	}
	entries, err := registration.List(cfg.RegistrationDir)
	if err != nil {
		return nil, err
	}
	sts = []Status{}
	for _, e := range entries {
		if e.Plugin == "" { // a file name that is no plugin name
			sts = append(sts, Status{File: e.Path, Reason: StatusInvalid, Error: e.Err.Error()})
			continue
		}
		sts = append(sts, status(ctx, r, e.Plugin, e.Path, e.Err))
	}
	return sts, nil
}

func status(ctx context.Context, r *mcexec.Resolver, plugin, path string, listErr error) Status {
	st := Status{Plugin: plugin, File: path}
	var d mcexec.Decision
	err := listErr
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		d, err = r.Resolve(ctx, plugin)
	}
	if d.Registration != nil {
		st.PodNamespace, st.PodName = d.Registration.PodNamespace, d.Registration.PodName
		st.PodUID, st.ContainerName = d.Registration.PodUID, d.Registration.ContainerName
		st.ExecSocket = d.Registration.ExecSocket
	}
	st.Via, st.ViaReason = string(d.Via), d.ViaReason
	switch {
	case errors.Is(err, registration.ErrUntrusted):
		st.Reason = StatusUntrusted
	case errors.Is(err, mcexec.ErrRuntimeUnavailable):
		st.Reason = StatusUnreachable
	case errors.Is(err, mcexec.ErrSocketUnavailable):
		st.Reason = StatusSocketUnusable
	case errors.Is(err, mcexec.ErrMismatch):
		st.Reason = StatusInvalid
	case err != nil && d.Registration == nil:
		st.Reason = StatusInvalid
	case err != nil:
		st.Reason = StatusRuntimeBroken
	case d.Reason == mcexec.ReasonNotRegistered:
		st.Reason = StatusNoFile
	case d.Reason == mcexec.ReasonNotRunning:
		st.Reason = StatusNotRunning
	case !d.OnHost():
		st.Live, st.ContainerID, st.Reason = true, d.ContainerID, StatusLive
	default:
		st.Reason = string(d.Reason)
	}
	if err != nil {
		st.Error = err.Error()
	}
	return st
}

func printTable(w io.Writer, sts []Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tPOD\tUID\tCONTAINER\tLIVE")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, s := range sts {
		pod := "-"
		if s.PodName != "" {
			pod = s.PodNamespace + "/" + s.PodName
		}
		live := "no: " + s.Reason
		if s.Live {
			live = "yes: container " + shortID(s.ContainerID)
			switch s.Via {
			case string(mcexec.ViaSocket):
				live += " via exec socket"
			case string(mcexec.ViaExecSync):
				live += " via CRI ExecSync (" + s.ViaReason + ")"
			}
		}
		plugin := s.Plugin
		if plugin == "" {
			plugin = s.File
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", plugin, pod, dash(s.PodUID), dash(s.ContainerName), live)
	}
	return tw.Flush()
}

func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
