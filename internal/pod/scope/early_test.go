package scope

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMountCommandTarget(t *testing.T) {
	const target = "/var/lib/kubelet/pods/p/volumes/kubernetes.io~glusterfs/v"
	for _, c := range []struct {
		argv []string
		want bool
		say  string
	}{
		{[]string{"mount", "-t", "glusterfs", "-o", "ro", "srv:/vol", target}, true, "the Flexvolume driver's GlusterFS mount"},
		{[]string{"/bin/mount", "-t", "glusterfs", "srv:/vol", target}, true, "mount by its path, no options"},
		{[]string{"mount", "-t", "fuse.ceph", "-o", "ceph.id=a", "none", target}, true, "ceph-fuse"},
		{[]string{"mount", "-o", "ro", "-t", "fuse", "x", target}, true, "options first"},
		{[]string{"mount", "-t", "ext4", "/dev/rbd0", target}, false, "not a FUSE client"},
		{[]string{"mount", "-t", "nfs", "srv:/e", target}, false, "not a FUSE client"},
		{[]string{"mount", "srv:/vol", target}, false, "no type"},
		{[]string{"mount", "-t", "glusterfs", "-n", "srv:/vol", target}, false, "an option other than -t and -o"},
		{[]string{"mount", "-t", "glusterfs", "--bind", "srv:/vol", target}, false, "a long option"},
		{[]string{"mount", "-t", "glusterfs", "srv:/vol"}, false, "no target"},
		{[]string{"mount", "-t", "glusterfs", "a", "b", target}, false, "three operands"},
		{[]string{"mount", "-t", "glusterfs", "srv:/vol", "relative/dir"}, false, "a relative target"},
		{[]string{"mount", "-t", "glusterfs", "srv:/vol", target + "/../w"}, false, "a target not clean"},
		{[]string{"mount", "-t", "glusterfs", "srv:/vol", target + "/"}, false, "a trailing slash: not clean"},
		{[]string{"umount", target}, false, "umount"},
		{[]string{"mount.glusterfs", "srv:/vol", target}, false, "the helper itself"},
		{[]string{"mount", "-t"}, false, "-t without its value"},
		{nil, false, "no argv"},
	} {
		got, ok := MountCommandTarget(c.argv)
		if ok != c.want || (ok && got != target) {
			t.Errorf("%s: MountCommandTarget(%q) = %q, %v; want %v", c.say, c.argv, got, ok, c.want)
		}
	}
}

// TestEarlyPlacerOnlyCgroupfs: early placement is on only for the cgroupfs
// backend as chosen without asking systemd.
func TestEarlyPlacerOnlyCgroupfs(t *testing.T) {
	root := fakeHybrid(t)
	absent := filepath.Join(t.TempDir(), "none")
	dir, err := os.MkdirTemp("", "sd") // short: a socket's path has a bound
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	present := filepath.Join(dir, "private")
	l, err := net.Listen("unix", present)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	base := Config{CgroupRoot: root, CgroupNS: CgroupNSOff}
	with := func(b Backend, sockets ...string) Config {
		c := base
		c.Backend, c.SystemdSockets = b, sockets
		return c
	}
	for _, c := range []struct {
		hc   HelperConfig
		want bool
		say  string
	}{
		{HelperConfig{Enabled: true, Plugin: glusterfs, Config: with(BackendCgroupfs, present)}, true, "cgroupfs"},
		{HelperConfig{Enabled: true, Plugin: glusterfs, Config: with(BackendAuto, absent)}, true, "auto, no systemd socket"},
		{HelperConfig{Enabled: true, Plugin: glusterfs, Config: with(BackendAuto, absent, present)}, false, "auto, a systemd socket present"},
		{HelperConfig{Enabled: true, Plugin: glusterfs, Config: with(BackendSystemd, absent)}, false, "systemd"},
		{HelperConfig{Enabled: false, Plugin: glusterfs, Config: with(BackendCgroupfs)}, false, "scopes off"},
		{HelperConfig{Enabled: true, Config: with(BackendCgroupfs)}, false, "no plugin"},
		{HelperConfig{Enabled: true, Plugin: glusterfs, Config: Config{Backend: BackendCgroupfs, CgroupRoot: t.TempDir()}}, false, "no cgroup hierarchy"},
	} {
		place, release := EarlyPlacer(c.hc, nil)
		if (place != nil) != c.want {
			t.Errorf("%s: placing early %v, want %v", c.say, place != nil, c.want)
		}
		release()
	}
}

// TestEarlyPlacementLockWaitIsBounded: an early placement waits for the
// plugin's lock at most its bound, then fails (the command is reaped only
// after it returns); once the lock is free it places.
func TestEarlyPlacementLockWaitIsBounded(t *testing.T) {
	c := newFake(t, Config{CgroupRoot: fakeHybrid(t)})
	c.lockWait = 100 * time.Millisecond
	const target = "/var/lib/kubelet/pods/p/volumes/kubernetes.io~glusterfs/v"
	if _, err := c.Place(glusterfs, target, 4242); err != nil { // makes the parents
		t.Fatal(err)
	}
	prel, _ := c.pluginRel(glusterfs)
	holder, err := os.Open(filepath.Join(c.layout.Hierarchies[0].Path, prel))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := unix.Flock(int(holder.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Place(glusterfs, target, 4343); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, errLockBusy) {
			t.Errorf("Place with the lock held elsewhere: %v; want errLockBusy", err)
		}
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("Place waited for a held lock past its bound")
	}
	unix.Flock(int(holder.Fd()), unix.LOCK_UN)
	if _, err := c.Place(glusterfs, target, 4343); err != nil {
		t.Errorf("Place with the lock free: %v", err)
	}
}
