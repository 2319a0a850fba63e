package recovery

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// The kernel writes a space, tab, newline or backslash in mountinfo's
// paths as an octal escape (\040, \011, \012, \134). The recovery compares
// the mount points with the records' targets and opens them, and the roots,
// in containers: it must use them decoded.

// spaced is a target with a space in its name.
const spaced = "/var/lib/kubelet/pods/a/volumes/kubernetes.io~glusterfs/my data"

// TestHoldersDecodePaths: a container's binds of the dead mount at mount
// points and roots with a space or tab come with their paths decoded.
func TestHoldersDecodePaths(t *testing.T) {
	p := newFakeProc(t)
	p.process("20", "2", "900 800 0:50 / / rw - overlay overlay rw\n"+
		`901 900 0:77 / /my\040data rw - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0`+"\n"+
		`902 900 0:77 /sub\040dir /conf\011x ro - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0`+"\n")
	hs, err := Holders(p.dir, []Identity{gluster(77)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, h := range hs {
			h.Close()
		}
	}()
	if len(hs) != 1 || len(hs[0].mounts) != 2 {
		t.Fatalf("holders %+v; want pid 20 with two mounts", hs)
	}
	m := hs[0].mounts
	if m[0].MountPoint != "/my data" || m[0].Root != "/" || m[1].MountPoint != "/conf\tx" || m[1].Root != "/sub dir" {
		t.Errorf("mounts %q at %q and %q at %q; want %q at %q and %q at %q",
			m[0].Root, m[0].MountPoint, m[1].Root, m[1].MountPoint, "/", "/my data", "/sub dir", "/conf\tx")
	}
}

// TestTargetWithSpaceIsMounted: a record's target with a space is found
// mounted where the mount table shows it escaped; its record is not
// dropped as if it were unmounted.
func TestTargetWithSpaceIsMounted(t *testing.T) {
	b := newBed(t)
	rec := glusterRecord()
	rec.Target = spaced
	b.record(rec)
	line := "30 25 0:40 / / rw - overlay overlay rw\n" +
		fmt.Sprintf("812 30 0:77 / %s rw,relatime shared:1 - fuse.glusterfs srv:/vol rw,user_id=0\n", strings.ReplaceAll(spaced, " ", `\040`))
	if err := os.WriteFile(b.mountinfo, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := b.pass(); res.Action != "healthy" || res.Target != spaced {
		t.Errorf("%+v; want %q healthy", res, spaced)
	}
	if !exists(filepath.Join(b.r.Dir, mountrecord.Dir, mountrecord.FileName(spaced))) {
		t.Error("the record of the mounted target was dropped")
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestRecoverMountPointWithSpace: a real dead FUSE mount at a target with
// a space, held by a container at the same path, comes back on the node
// and in the container (mount(8) and umount(8) stand in as a tmpfs and a
// lazy detach; the attach is the real one).
func TestRecoverMountPointWithSpace(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("no util-linux nsenter")
	}
	base := mountfdtest.Base(t)
	tgt := filepath.Join(base, "pods", "a", "volumes", "kubernetes.io~glusterfs", "my data")
	mkdir(t, tgt)
	mountDeadFUSE(t, tgt)
	pid := startContainer(t, "true") // holds a copy of every mount, the dead one included

	dir := filepath.Join(t.TempDir(), "plugin-containers")
	if err := registration.Write(dir, plugin, registration.Registration{PodNamespace: "kube-system", PodName: "glusterfs-mountpod-x", PodUID: podUID, ContainerName: "mount"}); err != nil {
		t.Fatal(err)
	}
	if err := mountrecord.Write(filepath.Join(dir, mountrecord.Dir), mountrecord.Record{Plugin: plugin, Source: "srv:/vol", Target: tgt, FSType: "glusterfs"}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	r := &Recoverer{Dir: dir, Plugins: []string{plugin}, PodUID: podUID}
	r.Command = func(_ context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, strings.Join(append([]string{name}, args...), " "))
		at := args[len(args)-1]
		switch name {
		case "umount":
			return nil, unix.Unmount(at, unix.MNT_DETACH)
		case "mount":
			if err := unix.Mount("tmpfs", at, "tmpfs", 0, "size=1m"); err != nil {
				return nil, err
			}
			return nil, os.WriteFile(filepath.Join(at, "new"), []byte("volume"), 0o644)
		}
		return nil, fmt.Errorf("unexpected command %s", name)
	}
	res := r.Pass(context.Background())
	if len(res) != 1 || res[0].Action != "recovered" || res[0].Err != nil {
		t.Fatalf("pass: %+v (commands %q); want %s recovered", res, calls, tgt)
	}
	if a := res[0].Attached; len(a) != 1 || a[0].PID != pid || a[0].MountPoint != tgt {
		t.Errorf("attached %+v; want pid %d's %q", a, pid, tgt)
	}
	if got, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "root", tgt, "new")); err != nil || string(got) != "volume" {
		t.Errorf("the container's %q shows %q, %v; want the new mount's file", tgt, got, err)
	}
}
