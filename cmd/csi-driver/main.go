// Command csi-driver is the CSI driver of one file system (GlusterFS or
// CephFS) that mounts through the plugin's mount pod: see package
// github.com/mountcontainers/mountcontainers/internal/node/csi. On every
// node it serves the Identity and Node services on a unix socket and
// registers with the kubelet through its plugins_registry directory; with
// --controller it also serves the Controller service (for the
// external-provisioner sidecar), on a node that runs the mount pod too.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/mountcontainers/mountcontainers/internal/node/csi"
	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/cliexit"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/known"
	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/internal/shared/version"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// envPrefix begins the name of each of the driver's variables
// (docs/naming.md).
const envPrefix = "CSI_DRIVER_"

// envRenames are its variables' old names, still read and warned of.
var envRenames = []oldnames.Rename{
	{Old: "NODE_NAME", New: envPrefix + "NODE_ID"},
	{Old: logging.EnvFormat, New: envPrefix + logging.SuffixFormat},
	{Old: logging.EnvLevel, New: envPrefix + logging.SuffixLevel},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	oldnames.Env(stderr, "csi-driver", envRenames)
	app := &cli.App{
		Name:           "csi-driver",
		Usage:          "Serve the CSI driver of one file system, mounting through the plugin's mount pod.",
		Description:    fmt.Sprintf("Exit codes: 0 stopped by SIGTERM or SIGINT after a clean shutdown; %d the driver failed while serving; %d bad flags or configuration.", exitFailure, exitUsage),
		Version:        version.Version,
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit("csi-driver: "+err.Error(), exitUsage)
		},
		Flags:  flags(),
		Action: func(c *cli.Context) error { return serve(c, stderr) },
	}
	return cliexit.Code(stderr, "csi-driver", app.RunContext(ctx, args), exitUsage)
}

func flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "filesystem", Value: "glusterfs", Usage: "File system the driver mounts: " + strings.Join(fs.SortedKeys(known.Filesystems), " or ") + "."},
		&cli.StringFlag{Name: "driver-name", Usage: "The driver's name (default FILESYSTEM.mountcontainers.io)."},
		&cli.StringFlag{Name: "plugin", Usage: "Volume plugin whose mount pod runs the utilities (default kubernetes.io/FILESYSTEM)."},
		&cli.StringFlag{Name: "node-id", EnvVars: oldnames.Vars(envPrefix+"NODE_ID", envRenames), Usage: "The node's name, as NodeGetInfo reports it (required)."},
		&cli.StringFlag{Name: "kubelet-dir", Value: "/var/lib/kubelet", Usage: "The kubelet's root directory."},
		&cli.StringFlag{Name: "endpoint", Usage: "Path of the CSI socket (default KUBELET_DIR/plugins/DRIVER_NAME/csi.sock)."},
		&cli.BoolFlag{Name: "register", Value: true, Usage: "Register with the kubelet through KUBELET_DIR/plugins_registry."},
		&cli.BoolFlag{Name: "controller", Usage: "Serve the Controller service too (CreateVolume, DeleteVolume)."},
		&cli.StringFlag{Name: "work-dir", Usage: "Where the controller mounts administrators' volumes for a moment (default KUBELET_DIR/plugins/DRIVER_NAME/controller); the mount pod must see it at the same path."},
		&cli.StringSliceFlag{Name: "allowed-servers", Usage: "Servers a volume may name: host names, addresses or CIDR ranges; empty allows every server that is not special (loopback, link-local, ...)."},
		&cli.StringFlag{Name: "registration-dir", Value: registration.DefaultDir, Usage: "Directory of the mount pods' registrations."},
		&cli.StringFlag{Name: "runtime-endpoint", Usage: "CRI runtime endpoint (default: CONTAINER_RUNTIME_ENDPOINT, then the usual sockets)."},
		&cli.StringFlag{Name: "exec-mode", Value: string(mcexec.ModeAuto), Usage: "How commands reach the mount pod: auto, socket or cri."},
		&cli.StringFlag{Name: "exec-batch-dir", Value: mcexec.DefaultBatchDir, Usage: `Directory, only root may write, on a tmpfs, where the calls of this driver (and of others on the node given the same directory) meet to send the commands that wait for the mount container at once in one CRI ExecSync; "none" sends each in an exec of its own. One that cannot be used is logged once, and each command goes alone.`},
		&cli.StringFlag{Name: "secrets-dir", Value: volume.DefaultSecretsDir, Usage: "Directory on a tmpfs, mounted at the same path in the mount pod, for the secrets mounts need."},
		&cli.IntFlag{Name: "socket-group", Usage: "Group ID that may connect to the CSI socket besides root (mode 0660), for a sidecar that runs as that group; 0: root only (0600)."},
		&cli.DurationFlag{Name: "timeout", Value: volume.DefaultTimeout, Usage: "Bound of each mount or umount, and of the statfs that tells whether a mount answers (a hung FUSE daemon makes the call Unavailable after it)."},
	}, logging.Flags(envPrefix)...)
}

func serve(c *cli.Context, stderr io.Writer) error {
	log, err := logging.FromFlags(c, stderr, exitUsage)
	if err != nil {
		return err
	}
	fsys, err := known.Named(c.String("filesystem"))
	if err != nil {
		return cli.Exit("--filesystem: "+err.Error(), exitUsage)
	}
	name := cmp.Or(c.String("driver-name"), fsys.Name()+".mountcontainers.io")
	plugin := cmp.Or(c.String("plugin"), "kubernetes.io/"+fsys.Name())
	nodeID := c.String("node-id")
	if nodeID == "" {
		return cli.Exit("--node-id (or "+envPrefix+"NODE_ID) is required", exitUsage)
	}
	mode, err := mcexec.ParseExecMode(c.String("exec-mode"))
	if err != nil {
		return cli.Exit("--exec-mode: "+err.Error(), exitUsage)
	}
	servers, err := fs.ParseAllowedServers(c.StringSlice("allowed-servers"))
	if err != nil {
		return cli.Exit("--allowed-servers: "+err.Error(), exitUsage)
	}
	kubelet := c.String("kubelet-dir")
	pluginDir := filepath.Join(kubelet, "plugins", name)
	endpoint := cmp.Or(c.String("endpoint"), filepath.Join(pluginDir, "csi.sock"))

	r := mcexec.NewResolver(mcexec.Options{
		Dir: c.String("registration-dir"), Endpoint: c.String("runtime-endpoint"), ExecMode: mode,
		Timeout: c.Duration("timeout"), Logger: log, BatchDir: batchDir(c.String("exec-batch-dir")),
	})
	defer r.Close()
	x, err := r.For(plugin)
	if err != nil {
		return cli.Exit("--plugin: "+err.Error(), exitUsage)
	}
	d := &csi.Driver{
		Name: name, Version: version.Version, FS: fsys, Exec: x, NodeID: nodeID, Servers: servers,
		Volumes: &volume.Mounter{
			Plugin: plugin, Exec: x, Timeout: c.Duration("timeout"), SecretsDir: c.String("secrets-dir"), Log: log,
		},
		Controller:  c.Bool("controller"),
		SocketGroup: c.Int("socket-group"),
		WorkDir:     cmp.Or(c.String("work-dir"), filepath.Join(pluginDir, "controller")),
		Log:         log,
	}
	log.Info("serving", "driver", name, "plugin", plugin, "endpoint", endpoint, "controller", d.Controller, "node", nodeID)
	g, ctx := errgroup.WithContext(c.Context)
	g.Go(func() error { return d.Serve(ctx, endpoint) })
	if c.Bool("register") {
		reg := &csi.Registrar{Name: name, Endpoint: endpoint, Log: log}
		g.Go(func() error {
			return reg.Serve(ctx, filepath.Join(kubelet, "plugins_registry", name+"-reg.sock"))
		})
	}
	if err := g.Wait(); err != nil {
		return cli.Exit("csi-driver: "+err.Error(), exitFailure)
	}
	return nil
}

// batchDir is --exec-batch-dir for mcexec.Options.BatchDir.
func batchDir(flag string) string {
	if flag == "none" {
		return ""
	}
	return flag
}
