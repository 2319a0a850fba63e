package shim

import (
	"fmt"

	"github.com/urfave/cli/v2"
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
	// Mounts are the live FUSE mounts in the plugin's scopes, those
	// adopted from earlier mount pods included, as the registered
	// container's `mountpod status` reports them; asked only when Live.
	Mounts []Mount `json:"mounts,omitempty"`
	// MountsError says why Mounts could not be asked for, when Live.
	MountsError string `json:"mountsError,omitempty"`
}

// Mount is a live FUSE mount a mount pod serves, as `mountpod status -o
// json` reports it (the fields of the mount pod's report that the shim
// shows; a mount pod of another version may report more).
type Mount struct {
	Target string `json:"target"`
	Source string `json:"source"`
	FSType string `json:"fstype"`
	// Scope is the mount's scope under the plugin's parent; Scoped: every
	// daemon of the mount runs in it, so the mount outlives the mount pod.
	Scope  string `json:"scope,omitempty"`
	Scoped bool   `json:"scoped"`
	// Daemons are the PIDs of the mount's FUSE daemons (host PIDs: mount
	// pods run with hostPID).
	Daemons []int `json:"daemons"`
	// Healthy: the mount answers; Error says what it answered otherwise.
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
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

func statusCommand(cfg *Config, stdio IO, b Backend) *cli.Command {
	var plugin, output string
	return &cli.Command{
		Name:  "status",
		Usage: "Show every registration and whether its container is live.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "plugin", Usage: "Show only this plugin (also when it is not registered).", Destination: &plugin},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: `Output format: "text" (a table) or "json", as every binary of this project names them; "table", the old name of text, warns.`, Value: "text", Destination: &output},
		},
		Action: func(c *cli.Context) error {
			switch output {
			case "text", "json":
			case "table":
				// The launcher hands status over to the helper, with
				// these arguments: the helper warns.
				if _, handsOver := b.(*launcher); !handsOver {
					fmt.Fprintln(stdio.Stderr, BinaryName+": status -o table is deprecated: use -o text")
				}
				output = "text"
			default:
				return cli.Exit(fmt.Sprintf("status: -o %q: want text or json", output), ExitShimFailed)
			}
			return b.Status(c.Context, cfg, plugin, output, stdio)
		},
	}
}
