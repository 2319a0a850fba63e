package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
)

// ReattachCommand is the hidden subcommand of mountpod that runs
// [ReattachMain] in a container's mount namespace.
const ReattachCommand = "reattach-mount"

// DeadMount is a FUSE mount whose daemon died, by what every mount namespace
// that holds a bind of it sees of it, and the node's target. Mounts holds
// the mount whose daemon died first and, after it, every new mount of the
// same recovery that died in its turn before every container had it: a
// container that got one of those holds it dead now. Mounts may be empty:
// the node's mount is still to be made again, but no other mount namespace
// holds a dead one any more.
type DeadMount struct {
	Mounts []Identity
	Target string
}

// Identity tells a mount from the others as /proc/PID/mountinfo shows it,
// the same in every mount namespace that holds a bind of it: its device
// number, file-system type and source. The device number alone does not:
// once the last mount of a file system is gone, the kernel hands its
// anonymous number to the next mount that needs one (another pod's tmpfs,
// an overlay, a new FUSE mount).
//
// Type and source do not tell whose mount it is: any user of the node can
// make a FUSE mount with the setuid fusermount, and choose both (the type
// is fuse.SUBTYPE, the source its fsname), and once the kernel hands the
// dead mount's number to it, only its owner tells it from the dead one.
// So a FUSE mount has an identity only when root made it: its superblock's
// options (mountinfo's last field) carry user_id=0, which fusermount sets
// to the real UID of whoever runs it, and the mount pod's daemons, started
// by root, show. See [identityOf].
type Identity struct {
	Device Device
	// FSType and Source are mountinfo's fields as the kernel writes them
	// (escaped, without white space).
	FSType, Source string
}

func (id Identity) String() string { return id.Device.String() + " " + id.FSType + " " + id.Source }

// identityOf returns the identity of the mount mi, and false for a FUSE
// mount that root did not make (see [Identity]): such a mount is never
// taken for a dead one, however its number, type and source match.
//
// The user_id a FUSE mount shows is in the user namespace of whoever made
// it: root of a user namespace of its own (unshare -Urm) shows 0 too. Such
// a mount is only ever in mount namespaces that its user namespace owns
// (their mounts do not propagate back to the node's), and [Holders] never
// takes those.
func identityOf(mi mount.MountInfo) (Identity, bool) {
	id := Identity{Device: deviceOf(mi), FSType: mi.FsType, Source: mi.Source}
	return id, !livemount.IsFUSE(mi.FsType) || madeByRoot(mi.SuperOptions)
}

// madeByRoot reports whether a FUSE superblock's options name user_id 0,
// once (the kernel writes it once).
func madeByRoot(superOptions []string) bool {
	var uids []string
	for _, o := range superOptions {
		if uid, ok := strings.CutPrefix(o, "user_id="); ok {
			uids = append(uids, uid)
		}
	}
	return len(uids) == 1 && uids[0] == "0"
}

// deviceOf returns the device number of the mount mi.
func deviceOf(mi mount.MountInfo) Device { return Device{mi.Major, mi.Minor} }

// Device is a mount's device number.
type Device struct {
	Major, Minor int
}

func (d Device) String() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// maxDevices bounds DeadMount.Mounts: the first and the latest are kept.
const maxDevices = 16

// with returns d with id added (once), keeping the first mount and the
// latest ones up to maxDevices.
func (d DeadMount) with(id Identity) DeadMount {
	if slices.Contains(d.Mounts, id) {
		return d
	}
	ids := append(slices.Clone(d.Mounts), id)
	if len(ids) > maxDevices {
		ids = append(ids[:1], ids[len(ids)-maxDevices+1:]...)
	}
	return DeadMount{Mounts: ids, Target: d.Target}
}

// without returns d without its mounts of device number dev. A number that
// a live mount has (the node's new one) is no longer a dead mount's: the
// dead one is gone, whatever its type and source.
func (d DeadMount) without(dev Device) DeadMount {
	ids := slices.DeleteFunc(slices.Clone(d.Mounts), func(id Identity) bool { return id.Device == dev })
	return DeadMount{Mounts: ids, Target: d.Target}
}

// keep returns d with only its mounts that held reports true for.
func (d DeadMount) keep(held map[Identity]bool) DeadMount {
	ids := slices.DeleteFunc(slices.Clone(d.Mounts), func(id Identity) bool { return !held[id] })
	return DeadMount{Mounts: ids, Target: d.Target}
}

// Attached is one container mount that was replaced.
type Attached struct {
	// PID is a process of the mount namespace MountNS.
	PID     int    `json:"pid"`
	MountNS string `json:"mountNS"`
	// MountPoint is where the mount is in that namespace, Root the
	// directory of the file system it shows (a subPath), both decoded
	// from mountinfo's escapes; ReadOnly is its flag.
	MountPoint string `json:"mountPoint"`
	Root       string `json:"root"`
	ReadOnly   bool   `json:"readOnly"`
	// Attrs are the mount's other flags the new mount gets too
	// (MOUNT_ATTR_NOSUID, _NODEV, _NOEXEC): a bind made nosuid and nodev
	// (the node's pod directories of a shared mount, a CSI publish) stays
	// so, and so do the containers' binds of it.
	Attrs uint64 `json:"attrs,omitempty"`
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
// a mount of one of ids (its device number, file-system type and source all
// the same, and for a FUSE mount, made by root: see [Identity]), one
// process each, with those mounts and the namespaces opened; the caller
// closes each holder. The mounts' MountPoint and Root are decoded (see
// [mountinfo.ParseFile]): they are paths to open.
func Holders(procRoot string, ids []Identity) ([]holder, error) {
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
		h, ok := holderOf(procRoot, de.Name(), pid, ns, ids)
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
// reads its mounts of ids; ok is false when pid is gone or its namespaces
// changed meanwhile.
func holderOf(procRoot, dir string, pid int, ns string, ids []Identity) (holder, bool) {
	h := holder{pid: pid, ns: ns}
	var err error
	if h.mntNS, err = os.Open(filepath.Join(procRoot, dir, "ns/mnt")); err != nil {
		return h, false
	}
	if !sameUserNS(procRoot, h.mntNS) {
		h.Close()
		return h, true // not a holder: see sameUserNS
	}
	if h.pidNS, err = os.Open(filepath.Join(procRoot, dir, "ns/pid")); err != nil {
		h.Close()
		return h, false
	}
	infos, err := mountinfo.ParseFile(filepath.Join(procRoot, dir, "mountinfo"))
	if now, lerr := os.Readlink(filepath.Join(procRoot, dir, "ns/mnt")); err != nil || lerr != nil || now != ns {
		h.Close()
		return h, false
	}
	for _, mi := range infos {
		if id, ok := identityOf(mi); ok && slices.Contains(ids, id) {
			h.mounts = append(h.mounts, mi)
		}
	}
	return h, true
}

// sameUserNS tells whether mntNS, a mount namespace, is owned by this
// process's user namespace (the node's: the mount pod has none of its
// own). Only such a namespace is a holder. The attach runs as full root in
// the holder's mount namespace and executes a path resolved there; a
// namespace that a user namespace owns is one that anybody may have made
// (unshare -Urm copies every mount, the dead one included, and may then
// mount its own /proc): entering it would run what its maker chose, as
// root. A container of the node's runtime is owned by the node's user
// namespace and cannot mount. It is a variable for the tests that fake
// /proc with plain files.
var sameUserNS = func(procRoot string, mntNS *os.File) bool {
	fd, err := unix.IoctlRetInt(int(mntNS.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var theirs, ours unix.Stat_t
	if unix.Fstat(fd, &theirs) != nil || unix.Stat(filepath.Join(procRoot, "self/ns/user"), &ours) != nil {
		return false
	}
	return theirs.Dev == ours.Dev && theirs.Ino == ours.Ino
}

// Reattach gives every other mount namespace that holds a bind of dead the
// same bind of the new mount at newTarget: same place, same root (subPath),
// same read-only flag, private propagation. It returns the mounts it
// replaced; an error names each one that failed (the others are done).
func Reattach(ctx context.Context, procRoot string, dead DeadMount, newTarget string) ([]Attached, error) {
	holders, err := Holders(procRoot, dead.Mounts)
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
		// mountID is the dead mount's ID in the container's mountinfo.
		mountID int
	}
	var todo []job
	for _, h := range holders {
		for _, mi := range h.mounts {
			todo = append(todo, job{Attached{PID: h.pid, MountNS: h.ns, MountPoint: mi.MountPoint, Root: mi.Root, ReadOnly: readOnly(mi.MountOptions), Attrs: keptAttrs(mi.MountOptions)}, h, mi.ID})
		}
	}
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, j := range todo {
		wg.Go(func() {
			if err := attach(ctx, self, j.h, j.a, j.mountID, newTarget); err != nil {
				errs[i] = fmt.Errorf("%s: %w", j.a, err)
			}
		})
	}
	wg.Wait()
	var done []Attached
	for i, j := range todo {
		switch {
		case errs[i] == nil:
			done = append(done, j.a)
		case errors.Is(errs[i], ErrUnreachable):
			errs[i] = nil // nothing there to replace: see ErrUnreachable
		}
	}
	return done, errors.Join(errs...)
}

// keptAttrs are the MOUNT_ATTR_ flags of a mount with the per-mount
// options opts that its replacement keeps: nosuid, nodev, noexec.
func keptAttrs(opts []string) uint64 {
	var attrs uint64
	for _, o := range opts {
		switch o {
		case "nosuid":
			attrs |= unix.MOUNT_ATTR_NOSUID
		case "nodev":
			attrs |= unix.MOUNT_ATTR_NODEV
		case "noexec":
			attrs |= unix.MOUNT_ATTR_NOEXEC
		}
	}
	return attrs
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
// in a's namespaces swap it in for the dead mount mountID (see the package
// doc).
func attach(ctx context.Context, self *os.File, h holder, a Attached, mountID int, newTarget string) error {
	tree, err := mountfd.CloneBeneath(newTarget, a.Root)
	if err != nil {
		return err
	}
	defer tree.Close()
	attr := unix.MountAttr{Propagation: unix.MS_PRIVATE, Attr_set: a.Attrs}
	if a.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(int(tree.Fd()), "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("mount_setattr %s: %w", tree.Name(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	// The namespaces by the descriptors opened when they were found
	// (nsenter opens every namespace file before it enters any).
	cmd := exec.CommandContext(ctx, "nsenter", "--mount=/proc/self/fd/5", "--pid=/proc/self/fd/6", "--",
		"/proc/self/fd/3", ReattachCommand, "--fd", "4", "--path", a.MountPoint, "--mount-id", strconv.Itoa(mountID))
	cmd.ExtraFiles = []*os.File{self, tree, h.mntNS, h.pidNS} // fd 3, 4, 5 and 6
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == ExitUnreachable {
		return fmt.Errorf("%w (%s)", ErrUnreachable, strings.TrimSpace(string(out)))
	}
	if err != nil {
		return fmt.Errorf("attach in the container: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ErrUnreachable is what ReattachMain returns when the dead mount's
// directory is not there in the holder's mount namespace: a mount
// namespace that copied the node's mounts and then hid the path (a systemd
// service with PrivateTmp= has its own /tmp and /var/tmp; its copies of the
// mounts under them stay, unreachable). Nothing there reaches the dead
// mount by its path, so there is nothing to replace: the recovery leaves
// that namespace as it is and does not count it as failed. The mountpod
// subcommand exits with ExitUnreachable for it.
var ErrUnreachable = errors.New("unreachable: the mount point's directory is not there in that mount namespace")

// ExitUnreachable is the exit status of the reattach subcommand for
// [ErrUnreachable].
const ExitUnreachable = 3

// errMountChanged refuses an attach whose path no longer leads to the dead
// mount the container's mountinfo showed there.
var errMountChanged = errors.New("refused: the path no longer leads to the dead mount found there")

// ReattachMain runs in a container's mount namespace (started by nsenter,
// see the package doc): it detaches the dead mount at path, mountID in the
// container's mountinfo, and attaches the mount tree of fd there.
//
// The container controls every name along path and can change them at any
// time, for instance swap a directory for a symbolic link to /proc, whose
// read-only binds must stay. So path is resolved once, following no
// symbolic link, and used through descriptors from then on: its parent
// directory is opened; the mount at path is opened from it and refused
// unless it is the root of mount mountID ([errMountChanged]); that mount is
// detached by its name in the parent opened first ([detach]); and fd is
// attached with move_mount between descriptors on what the name then
// shows in that parent, again following no symbolic link.
func ReattachMain(fd int, path string, mountID uint64) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return fmt.Errorf("path %q is not a clean absolute path below /", path)
	}
	parent, name := filepath.Dir(path), filepath.Base(path)
	dir, err := openNoSymlinks(unix.AT_FDCWD, parent, parent, unix.O_DIRECTORY)
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	dead, err := openMount(dir, name, mountID)
	if err != nil {
		return err
	}
	defer dead.Close()
	// The new mount goes beneath the dead one first, then the dead one is
	// detached: path is never without a mount of the volume. Detached
	// first, it would show the container's own directory under the mount
	// point for a moment, and a write there (the workload retrying its
	// failed write) would succeed into the container's root file system,
	// then be hidden by the new mount: lost.
	err = unix.MoveMount(fd, "", int(dead.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH|moveMountBeneath)
	if err == nil {
		if err := detach(dir, name); err != nil {
			return fmt.Errorf("detach the dead mount at %s, above the new one: %w", path, err)
		}
		afterDetach(path)
		return nil
	}
	if !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("attach the new mount beneath the dead one at %s: %w", path, err)
	}
	// A kernel before 6.5 has no MOVE_MOUNT_BENEATH (EINVAL): detach,
	// then attach, with that moment between.
	if err := detach(dir, name); err != nil {
		return fmt.Errorf("detach the dead mount at %s: %w", path, err)
	}
	afterDetach(path)
	target, err := openNoSymlinks(int(dir.Fd()), name, path, 0)
	if err != nil {
		return fmt.Errorf("attach the new mount: %w", err)
	}
	defer target.Close()
	if err := unix.MoveMount(fd, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attach the new mount at %s: %w", path, err)
	}
	return nil
}

// afterDetach is called by ReattachMain right after it detached the dead
// mount at path; tests look at path then.
var afterDetach = func(path string) {}

// moveMountBeneath is MOVE_MOUNT_BENEATH (Linux 6.5, linux/mount.h), which
// golang.org/x/sys/unix does not define: move_mount places the mount
// beneath the target mount, at the same mount point.
const moveMountBeneath = 0x200

// openNoSymlinks opens (O_PATH, and flags) name from dirfd, following no
// symbolic link; path names it in errors.
func openNoSymlinks(dirfd int, name, path string, flags uint64) (*os.File, error) {
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("refused: %s is or goes through a symbolic link: %w", path, err)
	case err != nil:
		return nil, fmt.Errorf("open %s, following no symbolic link: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openMount opens (O_PATH) the mount at name in dir, and refuses it unless
// it is the root of mount mountID.
func openMount(dir *os.File, name string, mountID uint64) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	f, err := openNoSymlinks(int(dir.Fd()), name, path, 0)
	if err != nil {
		return nil, err
	}
	st, err := mountfd.Stat(f)
	switch {
	case err != nil:
	case st.Mnt_id != mountID:
		err = fmt.Errorf("%w: %s is on mount %d, not %d", errMountChanged, path, st.Mnt_id, mountID)
	case !mountfd.IsRoot(st):
		err = fmt.Errorf("%w: %s is not the root of mount %d", errMountChanged, path, mountID)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// detach detaches (MNT_DETACH) the mount at name in dir, which [openMount]
// just checked: umount2(name, UMOUNT_NOFOLLOW) on a thread whose working
// directory is dir. Nothing the container can change is looked up again:
// dir is the directory opened following no symbolic link, name is one
// component that must not be a symbolic link, and a mount point cannot be
// renamed or removed in the mount namespace where it is one (EBUSY). Only a
// mount stacked on the checked one since could be what name shows, and
// mounting needs CAP_SYS_ADMIN, which makes a container root on the node
// anyway. The handle's /proc/self/fd/N would be looked up through the
// container's own /proc, and a working directory on the handle needs the
// dead file system to answer, which a dead FUSE mount does not.
func detach(dir *os.File, name string) error {
	return onThreadIn(dir, func() error {
		return unix.Unmount(name, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	})
}

// onThreadIn runs f on a thread of its own whose working directory is dir.
// The thread ends with f (it is never handed back to the Go scheduler), so
// the process's working directory does not change.
func onThreadIn(dir *os.File, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare the working directory: %w", err)
			return
		}
		if err := unix.Fchdir(int(dir.Fd())); err != nil {
			errc <- fmt.Errorf("enter %s: %w", dir.Name(), err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
