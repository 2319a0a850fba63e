// Command kubelet-exec-shim runs a volume plugin's utilities in the plugin's
// registered mount pod, or on the host when there is none, with the
// utility's exit code. See package shim for the commands and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := shim.Main(ctx, os.Args, shim.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
