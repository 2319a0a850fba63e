// Command kubelet-exec-shim-cri is the half of kubelet-exec-shim that talks
// to the container runtime. It is installed next to the shim, which replaces
// itself with it whenever a plugin has a registration; run directly, it is
// the whole shim. See package shim/crihelper.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/node/shim/crihelper"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := crihelper.Main(ctx, os.Args, shim.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
