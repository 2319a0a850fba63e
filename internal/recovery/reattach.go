package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
)

// ReattachCommand is the hidden subcommand of mountpod that runs
// [ReattachMain] in a container's mount namespace.
const ReattachCommand = "reattach-mount"

// DeadMount is a FUSE mount whose daemon died: its device numbers (the same
// in every mount namespace that holds a bind of it) and the node's target.
// Devices holds the mount whose daemon died first and, after it, every new
// mount of the same recovery that died in its turn before every container
// had it: a container that got one of those holds it dead now.
type DeadMount struct {
	Devices []Device
	Target  string
}

// Device is a mount's device number.
type Device struct {
	Major, Minor int
}

func (d Device) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// maxDevices bounds DeadMount.Devices: the first and the latest are kept.
const maxDevices = 16

// with returns d with dev added (once), keeping the first device and the
// latest ones up to maxDevices.
func (d DeadMount) with(dev Device) DeadMount {
	if slices.Contains(d.Devices, dev) {
		return d
	}
	devs := append(slices.Clone(d.Devices), dev)
	if len(devs) > maxDevices {
		devs = append(devs[:1], devs[len(devs)-maxDevices+1:]...)
	}
	return DeadMount{Devices: devs, Target: d.Target}
}

// Attached is one container mount that was replaced.
type Attached struct {
	// PID is a process of the mount namespace MountNS.
	PID     int    `json:"pid"`
	MountNS string `json:"mountNS"`
	// MountPoint is where the mount is in that namespace, Root the
	// directory of the file system it shows (a subPath), ReadOnly its flag.
	MountPoint string `json:"mountPoint"`
	Root       string `json:"root"`
	ReadOnly   bool   `json:"readOnly"`
}

func (a Attached) String() string {
	s := fmt.Sprintf("pid %d: %s", a.PID, a.MountPoint)
	if a.Root != "/" {
		s += " (root " + a.Root + ")"
	}
	if a.ReadOnly {
		s += " (ro)"
	}
	return s
}

// holder is a mount namespace that holds binds of a dead mount.
type holder struct {
	pid    int
	ns     string
	mounts []mount.MountInfo
	// mntNS and pidNS are the namespaces of pid, opened as soon as it was
	// found: they stay valid if that process exits (a container's short-
	// lived child may be the one found). Close closes them.
	mntNS, pidNS *os.File
}

func (h holder) Close() {
	if h.mntNS != nil {
		h.mntNS.Close()
	}
	if h.pidNS != nil {
		h.pidNS.Close()
	}
}

// Holders returns the mount namespaces other than this process's that hold
// a mount of one of devs, one process each, with those mounts and the
// namespaces opened; the caller closes each holder.
func Holders(procRoot string, devs []Device) ([]holder, error) {
	own, err := os.Readlink(filepath.Join(procRoot, "self/ns/mnt"))
	if err != nil {
		return nil, fmt.Errorf("this process's mount namespace: %w", err)
	}
	des, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{own: true}
	var out []holder
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid <= 0 {
			continue
		}
		ns, err := os.Readlink(filepath.Join(procRoot, de.Name(), "ns/mnt"))
		if err != nil || seen[ns] {
			continue // gone, a kernel thread, or a namespace seen already
		}
		h, ok := holderOf(procRoot, de.Name(), pid, ns, devs)
		if !ok {
			continue // gone meanwhile: another process of ns may do
		}
		seen[ns] = true
		if len(h.mounts) > 0 {
			out = append(out, h)
		} else {
			h.Close()
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// holderOf opens the namespaces of pid (whose mount namespace is ns) and
// reads its mounts of devs; ok is false when pid is gone or its namespaces
// changed meanwhile.
func holderOf(procRoot, dir string, pid int, ns string, devs []Device) (holder, bool) {
	h := holder{pid: pid, ns: ns}
	var err error
	if h.mntNS, err = os.Open(filepath.Join(procRoot, dir, "ns/mnt")); err != nil {
		return h, false
	}
	if h.pidNS, err = os.Open(filepath.Join(procRoot, dir, "ns/pid")); err != nil {
		h.Close()
		return h, false
	}
	infos, err := mount.ParseMountInfo(filepath.Join(procRoot, dir, "mountinfo"))
	if now, lerr := os.Readlink(filepath.Join(procRoot, dir, "ns/mnt")); err != nil || lerr != nil || now != ns {
		h.Close()
		return h, false
	}
	for _, mi := range infos {
		if slices.Contains(devs, Device{mi.Major, mi.Minor}) {
			h.mounts = append(h.mounts, mi)
		}
	}
	return h, true
}

// Reattach gives every other mount namespace that holds a bind of dead the
// same bind of the new mount at newTarget: same place, same root (subPath),
// same read-only flag, private propagation. It returns the mounts it
// replaced; an error names each one that failed (the others are done).
func Reattach(ctx context.Context, procRoot string, dead DeadMount, newTarget string) ([]Attached, error) {
	holders, err := Holders(procRoot, dead.Devices)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, h := range holders {
			h.Close()
		}
	}()
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("open this program to run it in a container: %w", err)
	}
	defer self.Close()
	// Each attach is a child process of its own: they run side by side.
	type job struct {
		a Attached
		h holder
	}
	var todo []job
	for _, h := range holders {
		for _, mi := range h.mounts {
			todo = append(todo, job{Attached{PID: h.pid, MountNS: h.ns, MountPoint: mi.MountPoint, Root: mi.Root, ReadOnly: readOnly(mi.MountOptions)}, h})
		}
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, j := range todo {
		wg.Go(func() {
			if err := attach(ctx, self, j.h, j.a, newTarget); err != nil {
				errs[i] = fmt.Errorf("%s: %w", j.a, err)
			}
		})
	}
	wg.Wait()
	var done []Attached
	for i, j := range todo {
		if errs[i] == nil {
			done = append(done, j.a)
		}
	}
	return done, errors.Join(errs...)
}

func readOnly(opts []string) bool {
	for _, o := range opts {
		if o == "ro" {
			return true
		}
	}
	return false
}

// attach clones the new mount at a's root, sets its flags, and has a child
// in a's namespaces swap it in (see the package doc).
func attach(ctx context.Context, self *os.File, h holder, a Attached, newTarget string) error {
	src := filepath.Join(newTarget, a.Root)
	if !strings.HasPrefix(src, filepath.Clean(newTarget)) {
		return fmt.Errorf("root %q leaves the mount", a.Root)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	tree := os.NewFile(uintptr(fd), src)
	defer tree.Close()
	attr := unix.MountAttr{Propagation: unix.MS_PRIVATE}
	if a.ReadOnly {
		attr.Attr_set = unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("mount_setattr %s: %w", src, err)
	}
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	// The namespaces by the descriptors opened when they were found
	// (nsenter opens every namespace file before it enters any).
	cmd := exec.CommandContext(ctx, "nsenter", "--mount=/proc/self/fd/5", "--pid=/proc/self/fd/6", "--",
		"/proc/self/fd/3", ReattachCommand, "--fd", "4", "--path", a.MountPoint)
	cmd.ExtraFiles = []*os.File{self, tree, h.mntNS, h.pidNS} // fd 3, 4, 5 and 6
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("attach in the container: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ReattachMain runs in a container's mount namespace (started by nsenter,
// see the package doc): it detaches the dead mount at path and attaches the
// mount tree of fd there.
func ReattachMain(fd int, path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("path %q is not absolute", path)
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("detach the dead mount at %s: %w", path, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the new mount at %s: %w", path, err)
	}
	return nil
}
