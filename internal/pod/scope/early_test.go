package scope

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestPlaceTakesTheLockOnlyAfterARemove: with the plugin's lock held
// elsewhere, a Place whose scope is there joins it without the lock; one
// whose scope a Remove took away meanwhile needs the lock, and with a
// bound on its wait (the early placement's) fails once the bound has
// passed; with the lock free it places.
func TestPlaceTakesTheLockOnlyAfterARemove(t *testing.T) {
	root := fakeHybrid(t)
	c := newFake(t, Config{CgroupRoot: root})
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
	place := func(what string, c *cgroupfs, pid int) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { _, err := c.Place(glusterfs, target, pid); done <- err }()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute): // a hang guard
			t.Fatalf("%s: Place waited for the held lock", what)
			return nil
		}
	}
	bounded := newFake(t, Config{CgroupRoot: root})
	bounded.lockWait = 100 * time.Millisecond
	if err := place("the scope there", bounded, 4343); err != nil {
		t.Errorf("Place into a scope that is there, the lock held elsewhere: %v", err)
	}
	for _, p := range []string{"cpu,cpuacct", "memory", "unified"} {
		if got := readTrim(t, filepath.Join(root, p, prel, Name(target), "cgroup.procs")); got != "4242\n4343" {
			t.Errorf("%s: cgroup.procs %q, want 4242 and 4343", p, got)
		}
	}

	// The memory hierarchy's scope taken away once the PID is in the
	// CPU's: the Place goes under the lock and writes every hierarchy.
	beforeLock = func(s Scope) {
		os.RemoveAll(filepath.Join(root, "memory", prel, Name(target)))
	}
	t.Cleanup(func() { beforeLock = func(Scope) {} })
	if err := place("removed meanwhile", bounded, 4444); !errors.Is(err, errLockBusy) {
		t.Errorf("Place after a Remove, the lock held elsewhere: %v; want errLockBusy", err)
	}
	unix.Flock(int(holder.Fd()), unix.LOCK_UN)
	if err := place("removed meanwhile, the lock free", bounded, 4545); err != nil {
		t.Errorf("Place after a Remove, the lock free: %v", err)
	}
	for _, p := range []string{"cpu,cpuacct", "memory", "unified", "pids"} {
		procs := strings.Fields(readTrim(t, filepath.Join(root, p, prel, Name(target), "cgroup.procs")))
		if !slices.Contains(procs, "4545") {
			t.Errorf("%s: cgroup.procs %q, want 4545 in it", p, procs)
		}
	}
}

// TestPlaceAfterARemoveAsItWrites: a cgroup removed as the PID is written
// (the kernel answers ENODEV) sends Place under the lock, as one gone
// before (ENOENT), and it places.
func TestPlaceAfterARemoveAsItWrites(t *testing.T) {
	c := newFake(t, Config{CgroupRoot: fakeHybrid(t)})
	const target = "/var/lib/kubelet/pods/p/volumes/kubernetes.io~glusterfs/v"
	writes := 0
	joinWrite = func(name, s string, appending bool) error {
		if writes++; writes == 1 {
			return &fs.PathError{Op: "write", Path: name, Err: unix.ENODEV}
		}
		return writeFile(name, s, appending)
	}
	t.Cleanup(func() { joinWrite = writeFile })
	s, err := c.Place(glusterfs, target, 4242)
	if err != nil {
		t.Fatalf("Place with ENODEV at its first write: %v", err)
	}
	if want := 1 + len(s.Paths); writes != want {
		t.Errorf("%d writes; want the failed one and one per hierarchy (%d)", writes, want)
	}
	for _, p := range s.Paths {
		if got := readTrim(t, filepath.Join(p, "cgroup.procs")); got != "4242" {
			t.Errorf("%s/cgroup.procs = %q, want 4242", p, got)
		}
	}
}
