// Command pause is the sandbox ("pause") process of the test bed's pods: it
// holds the pod's namespaces, reaps orphaned children and exits on SIGINT or
// SIGTERM. It is built statically (CGO_ENABLED=0) into a scratch image by
// test/bed/images.sh, because the test bed has no registry to pull one from.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
