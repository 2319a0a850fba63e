package crihelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shim"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Statuses returns the state of every registration in cfg's directory, or
// of one plugin when plugin is not empty.
func Statuses(ctx context.Context, cfg *shim.Config, plugin string, stderr io.Writer) ([]shim.Status, error) {
	r := resolver(cfg, stderr)
	defer r.Close()
	var sts []shim.Status
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
	sts = []shim.Status{}
	for _, e := range entries {
		if e.Plugin == "" { // a file name that is no plugin name
			sts = append(sts, shim.Status{File: e.Path, Reason: shim.StatusInvalid, Error: e.Err.Error()})
			continue
		}
		sts = append(sts, status(ctx, r, e.Plugin, e.Path, e.Err))
	}
	return sts, nil
}

func status(ctx context.Context, r *mcexec.Resolver, plugin, path string, listErr error) shim.Status {
	st := shim.Status{Plugin: plugin, File: path}
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
		st.Reason = shim.StatusUntrusted
	case errors.Is(err, mcexec.ErrRuntimeUnavailable):
		st.Reason = shim.StatusUnreachable
	case errors.Is(err, mcexec.ErrSocketUnavailable):
		st.Reason = shim.StatusSocketUnusable
	case errors.Is(err, mcexec.ErrMismatch):
		st.Reason = shim.StatusInvalid
	case err != nil && d.Registration == nil:
		st.Reason = shim.StatusInvalid
	case err != nil:
		st.Reason = shim.StatusRuntimeBroken
	case d.Reason == mcexec.ReasonNotRegistered:
		st.Reason = shim.StatusNoFile
	case d.Reason == mcexec.ReasonNotRunning:
		st.Reason = shim.StatusNotRunning
	case !d.OnHost():
		st.Live, st.ContainerID, st.Reason = true, d.ContainerID, shim.StatusLive
	default:
		st.Reason = string(d.Reason)
	}
	if err != nil {
		st.Error = err.Error()
	}
	return st
}

func printTable(w io.Writer, sts []shim.Status) error {
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
