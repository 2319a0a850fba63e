package crihelper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Statuses returns the state of every registration in cfg's directory, or
// of one plugin when plugin is not empty.
func Statuses(ctx context.Context, cfg *shim.Config, plugin string, stderr io.Writer) ([]shim.Status, error) {
	r, err := resolver(cfg, stderr)
	if err != nil {
		return nil, err
	}
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
	if st.Live {
		st.Mounts, err = liveMounts(ctx, r, plugin)
		if err != nil {
			st.MountsError = err.Error()
		}
	}
	return st
}

// mountsTimeout bounds the question to one mount pod: a survey stats every
// FUSE mount, each for at most 2 s, and a hung mount is reported as such.
const mountsTimeout = 20 * time.Second

// liveMounts asks plugin's registered container for the live FUSE mounts in
// the plugin's scopes (`mountpod status -o json`), through the path the
// resolver takes for any utility. A container that stopped meanwhile is an
// error, not a host run: the host's answer would not be the mount pod's.
func liveMounts(ctx context.Context, r *mcexec.Resolver, plugin string) ([]shim.Mount, error) {
	e, err := r.For(plugin)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, mountsTimeout)
	defer cancel()
	cmd := e.CommandContext(ctx, "mountpod", "status", "-o", "json", "--plugins", plugin)
	var stdout, stderr bytes.Buffer
	cmd.SetStdout(&stdout)
	cmd.SetStderr(&stderr)
	err = cmd.Run()
	if d, ok := e.DecisionOf(cmd); ok && d.OnHost() {
		return nil, fmt.Errorf("the registered container of %s stopped before its mounts could be listed", plugin)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("mountpod status in the registered container of %s: %s", plugin, msg)
	}
	var report struct {
		Mounts []struct {
			shim.Mount
			Plugin string `json:"plugin"`
		} `json:"mounts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		return nil, fmt.Errorf("mountpod status in the registered container of %s: %w", plugin, err)
	}
	mounts := []shim.Mount{}
	for _, m := range report.Mounts {
		if m.Plugin == plugin {
			mounts = append(mounts, m.Mount)
		}
	}
	return mounts, nil
}

func printTable(w io.Writer, sts []shim.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tPOD\tUID\tCONTAINER\tMOUNTS\tLIVE")
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", plugin, pod, dash(s.PodUID), dash(s.ContainerName), mountsColumn(s), live)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range sts {
		if s.MountsError != "" {
			if _, err := fmt.Fprintf(w, "%s: mounts unknown: %s\n", s.Plugin, s.MountsError); err != nil {
				return err
			}
		}
	}
	return nil
}

// mountsColumn says how many live mounts are in the plugin's scopes, and
// how many of them do not answer.
func mountsColumn(s shim.Status) string {
	switch {
	case !s.Live:
		return "-"
	case s.MountsError != "":
		return "?"
	}
	sick := 0
	for _, m := range s.Mounts {
		if !m.Healthy {
			sick++
		}
	}
	if sick > 0 {
		return fmt.Sprintf("%d (%d not answering)", len(s.Mounts), sick)
	}
	return fmt.Sprint(len(s.Mounts))
}

func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
