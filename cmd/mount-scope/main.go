// Command mount-scope stands in for a FUSE mount helper in the mount-pod
// image (such as /sbin/mount.fuse3, whose real helper the image moved to
// /sbin/mount.fuse3.distrib): it places itself in the scope of the mount
// target, outside the mount pod's container, and then executes the real
// helper, so that the FUSE daemon it starts outlives the mount pod. As
// /sbin/mount.fuse.ceph and /sbin/mount.glusterfs it never runs the
// diverted scripts (they build their client's command line in a shell, and
// mount.glusterfs forks about twenty programs per mount): it translates
// the mount options and runs ceph-fuse or glusterfs itself (see
// scope.RunHelper). Its own failures exit 125 (no scope), 126 or 127 (the
// real helper cannot be run or is missing), 1, 2 or 32 for a refused
// mount.glusterfs (the script's statuses), with a message on stderr;
// otherwise the exit code is the helper's. A separate small binary:
// mount(8) runs it for every FUSE mount.
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
	if err == nil {
		return // a mount made by a helper that waits for its program
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[0], err)
	os.Exit(scope.ExitCode(err))
}
