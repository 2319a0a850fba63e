// Command mount-scope stands in for a FUSE mount helper in the mount-pod
// image (/sbin/mount.glusterfs, whose real helper the image moved to
// /sbin/mount.glusterfs.distrib): it places itself in the scope of the mount
// target, outside the mount pod's container, and then executes the real
// helper, so that the FUSE daemon it starts outlives the mount pod. As
// /sbin/mount.fuse.ceph it never runs the diverted script (which goes
// through a shell and hides ceph-fuse's failures): it translates the mount
// options and executes ceph-fuse itself (see scope.RunHelper). Its own
// failures exit 125 (no scope), 126 or 127 (the real helper cannot be run or
// is missing), with a message on stderr; otherwise the exit code is the
// helper's. A separate small binary: mount(8) runs it for every FUSE mount.
package main

import (
	"fmt"
	"os"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

func main() {
	if !scope.IsMountHelperName(os.Args[0]) {
		fmt.Fprint(os.Stderr, scope.HelperUsage(os.Args[0]))
		os.Exit(scope.ExitFailed)
	}
	err := scope.RunHelper(os.Getenv, os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
	os.Exit(scope.ExitCode(err))
}
