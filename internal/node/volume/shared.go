package volume

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Shared makes one mount of each volume per node and binds it at the
// directory of every pod that mounts the volume, as the CSI node plugin
// stages a volume once and publishes it per pod: a hundred pods of one
// volume on a node cost one FUSE daemon, one mount(8) through the mount
// pod and a hundred binds, instead of a hundred of each. The node's mount
// of a volume (its shared mount) is at Root/<key>, where key names the
// pods' namespace and the mount(8) call (plugin, type, source and options,
// see [SharedKey]): pods share a mount only when they are in one namespace
// and the mount they asked for is the same one. It
// is recorded as any other, so the mount pod's recovery brings it back
// when its daemon dies and gives every bind of it, on the node and in the
// containers, the new mount (recovery.Reattach). The last unmount of a bind
// unmounts it.
//
// A mount with a secret ([fs.Mount].Secret) is never shared: a pod would
// reach the volume with another pod's credentials. Callers mount those
// per pod ([Mounter.Mount]).
//
// The calls of one volume are serialised by a lock file, Root/<key>.lock
// (flock), since each call of the Flexvolume driver is a process of its
// own; the wait for it is bounded by the Mounter's timeout.
//
// The pods of a volume in a namespace on a node share its daemon: its
// load, and its failure until the recovery brings it back. Pods of other
// namespaces (other tenants) never share it: a mount whose pod is unknown
// ([fs.Mount].Pod nil) is refused ([ErrNoNamespace]).
type Shared struct {
	// V makes and removes the shared mounts.
	V *Mounter
	// Root holds the shared mounts; it is made when missing, and must be a
	// directory root owns that nobody else may write, on the node and, at
	// the same path, in the mount pod (beneath the kubelet's directory,
	// which the mount pod shares both ways).
	Root string
}

// ErrSecretNotShared refuses to share a mount that needs a secret.
var ErrSecretNotShared = errors.New("a mount with a secret is not shared between pods")

// ErrNoNamespace refuses to share a mount whose pod is not known: the pods
// that share a mount are of one namespace.
var ErrNoNamespace = errors.New("a mount whose pod's namespace is unknown is not shared")

// SharedKey names the shared mount of m of plugin: the first 128 bits, in
// hex, of the SHA-256 of the plugin, the namespace of m's pod (none when
// m.Pod is nil), type, source and options (in order), each prefixed by
// its length. Nothing else of a pod is in it.
func SharedKey(plugin string, m fs.Mount) string {
	ns := ""
	if m.Pod != nil {
		ns = m.Pod.Namespace
	}
	h := sha256.New()
	for _, s := range append([]string{plugin, ns, m.FSType, m.Source}, m.Options...) {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Mount binds the node's shared mount of m at dir, making the shared
// mount first when the node has none. dir is a clean absolute path,
// created when missing; a mount there already is left as it is (the
// message says so). The bind is nosuid and nodev, and read-only when m's
// options say ro. A node's mount made for a bind that then fails goes
// again.
func (s Shared) Mount(ctx context.Context, m fs.Mount, dir string) (string, error) {
	if m.Secret != nil {
		return "", fmt.Errorf("mount %s at %s: %w", m.Describe(), dir, ErrSecretNotShared)
	}
	if m.Pod == nil || m.Pod.Namespace == "" {
		return "", fmt.Errorf("mount %s at %s: %w", m.Describe(), dir, ErrNoNamespace)
	}
	// The namespace is the kubelet's (a volume's options cannot name a
	// pod); the pod named must also be the one whose directory dir is.
	if uid, ok := mountrecord.TargetPodUID(dir); !ok || uid != m.Pod.UID {
		return "", fmt.Errorf("mount %s at %s: pod %s (UID %s) is not the pod of that directory: not shared", m.Describe(), dir, m.Pod, m.Pod.UID)
	}
	pod := *m.Pod
	if err := CheckDir(dir); err != nil {
		return "", fmt.Errorf("mount: %w", err)
	}
	root, err := s.openRoot()
	if err != nil {
		return "", fmt.Errorf("mount %s at %s: %w", m.Describe(), dir, err)
	}
	defer root.Close()
	key := SharedKey(s.V.Plugin, m)
	unlock, err := s.lock(ctx, root, key)
	if err != nil {
		return "", fmt.Errorf("mount %s at %s: %w", m.Describe(), dir, err)
	}
	defer unlock()
	// The target first, so that nothing is mounted for a target that
	// cannot take it. Its state before creating it: creating dir stats
	// it, which the daemon of a mount there would answer, or hang.
	st, err := s.V.StateContext(ctx, dir)
	if err == nil && st == Missing {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return "", fmt.Errorf("mount: create target directory: %w", err)
		}
		st, err = s.V.StateContext(ctx, dir)
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("mount: %w", err)
	case st == Mounted:
		// A retry of a call that bound it: listed for the recovery's
		// Events when it is a bind of the volume's node's mount.
		if _, node, err := s.bindAt(dir); err == nil && mountinfo.Unescape(node.MountPoint) == filepath.Join(s.Root, key) {
			_ = notePod(root, key, pod, filepath.Base(dir))
		}
		return dir + " is already mounted", nil
	case st == Corrupted:
		return "", fmt.Errorf("mount: %s is a broken mount (transport endpoint is not connected): unmount it first", dir)
	}
	if err := unix.Mkdirat(int(root.Fd()), key, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return "", fmt.Errorf("mount %s at %s: create %s: %w", m.Describe(), dir, filepath.Join(s.Root, key), err)
	}
	node := filepath.Join(s.Root, key)
	nst, err := s.V.StateContext(ctx, node)
	switch {
	case err != nil:
		return "", fmt.Errorf("mount %s at %s: %w", m.Describe(), dir, err)
	case nst == Corrupted:
		return "", fmt.Errorf("mount %s at %s: the node's mount of it at %s, which the node's pods of the volume share, is dead (its FUSE daemon ended): the mount pod's recovery mounts it again, and a retry then binds it", m.Describe(), dir, node)
	case nst == NotMounted && s.recorded(node):
		// Recorded but not mounted: the recovery is between its unmount
		// and its mount of it (a mount here now would be stacked under
		// its own), or drops the record at its next pass.
		return "", fmt.Errorf("mount %s at %s: the node's mount of it at %s is being brought back by the mount pod's recovery: a retry then binds it", m.Describe(), dir, node)
	}
	// The node's mount serves many pods: its record names none; the pods
	// are listed beside it (notePod), a list made anew with the mount.
	if nst == NotMounted {
		clearPods(root, key)
	}
	m.Pod = nil
	made, err := s.V.MountWith(ctx, m, node, MountOptions{})
	if err != nil {
		undo, uerr := s.release(ctx, root, node)
		return "", fmt.Errorf("%w (%s)", err, cmp.Or(undo, fmt.Sprint(uerr)))
	}
	if err := Bind(node, "/", dir, slices.Contains(m.Options, "ro")); err != nil {
		undo, uerr := s.release(ctx, root, node)
		return "", fmt.Errorf("mount %s at %s: bind the node's mount %s: %w (%s)", m.Describe(), dir, node, err, cmp.Or(undo, fmt.Sprint(uerr)))
	}
	msg := fmt.Sprintf("bound %s at %s: the node's mount of it at %s (%s)", m.Describe(), dir, node, made)
	if err := notePod(root, key, pod, filepath.Base(dir)); err != nil {
		// The bind serves the pod; only the recovery's Events on it
		// are lost.
		msg += fmt.Sprintf("; the recovery's Events will not name pod %s: %v", pod, err)
	}
	return msg, nil
}

// notePod lists pod's bind of key's node's mount as its volume vol,
// for the recovery's Events (mountrecord.PodsSuffix): the file
// Root/<key>.pods/<UID>~<vol>, written under a dot name and renamed into
// place, beneath root following no symbolic link.
func notePod(root *os.File, key string, pod mountrecord.Pod, vol string) error {
	pods := key + mountrecord.PodsSuffix
	if err := unix.Mkdirat(int(root.Fd()), pods, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	dfd, err := openBeneath(root, pods, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	data, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	name := mountrecord.PodFileName(pod, vol)
	tmp := "." + name
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, data)
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
	}
	return err
}

// listedBinds returns the pods' volume directories listed beside the
// node's mount at nodePath (notePod): <kubelet>/pods/<UID>/volumes/<vendor~driver>/<volume>,
// the kubelet's directory and the driver's name those of Root,
// <kubelet>/plugins/<vendor~driver>/shared.
func (s Shared) listedBinds(nodePath string) map[string]bool {
	pods, _ := mountrecord.ReadPods(nodePath)
	driver := filepath.Dir(s.Root)
	kubelet := filepath.Dir(filepath.Dir(driver))
	out := map[string]bool{}
	for _, p := range pods {
		out[filepath.Join(kubelet, "pods", p.UID, "volumes", filepath.Base(driver), p.Volume)] = true
	}
	return out
}

// forgetPod removes the bind of the pod of UID uid as its volume vol
// from beside key's node's mount.
func forgetPod(root *os.File, key, uid, vol string) {
	dfd, err := openBeneath(root, key+mountrecord.PodsSuffix, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return
	}
	defer unix.Close(dfd)
	_ = unix.Unlinkat(dfd, mountrecord.PodFileName(mountrecord.Pod{UID: uid}, vol), 0)
}

// clearPods removes the list of pods beside key's node's mount: made when
// the node's mount is made, it lists nobody of an earlier one.
func clearPods(root *os.File, key string) {
	dfd, err := openBeneath(root, key+mountrecord.PodsSuffix, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return
	}
	d := os.NewFile(uintptr(dfd), key+mountrecord.PodsSuffix)
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		_ = unix.Unlinkat(dfd, n, 0)
	}
	d.Close()
	_ = unix.Unlinkat(int(root.Fd()), key+mountrecord.PodsSuffix, unix.AT_REMOVEDIR)
}

// openBeneath opens name beneath root, following no symbolic link and
// crossing no mount.
func openBeneath(root *os.File, name string, flags int) (int, error) {
	return unix.Openat2(int(root.Fd()), name, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
}

// recorded tells whether the mount at target has a mount record.
func (s Shared) recorded(target string) bool {
	dir := s.V.Exec.RecordsDir()
	if dir == "" {
		return false
	}
	_, err := os.Lstat(filepath.Join(dir, mountrecord.FileName(target)))
	return err == nil
}

// Unmount removes the bind at dir of a shared mount (a dead one too), and
// the shared mount after its last bind on the node, with its record. ok is
// false when dir is no bind of a shared mount: the caller unmounts it as
// any other ([Mounter.Unmount]). The bind is removed with the volume's
// lock held: a call that cannot have it in time fails before removing
// anything, and its retry does it all. Node's mounts of other volumes
// left with no bind (their last bind removed while the recovery was
// replacing them, when this call could not tell them) go too, those whose
// lock is free.
func (s Shared) Unmount(ctx context.Context, dir string) (msg string, ok bool, err error) {
	if err := CheckDir(dir); err != nil {
		return "", false, nil
	}
	bind, node, err := s.bindAt(dir)
	if err != nil || node.ID == 0 {
		return "", false, nil
	}
	nodePath := mountinfo.Unescape(node.MountPoint)
	root, err := s.openRoot()
	if err != nil {
		return "", true, fmt.Errorf("unmount %s, a bind of the node's mount %s: %w", dir, nodePath, err)
	}
	defer root.Close()
	unlock, err := s.lock(ctx, root, filepath.Base(nodePath))
	if err != nil {
		return "", true, fmt.Errorf("unmount %s, a bind of the node's mount %s: %w", dir, nodePath, err)
	}
	msg, err = s.V.Unmount(ctx, dir)
	if err != nil {
		unlock()
		return "", true, err
	}
	if uid, ok := mountrecord.TargetPodUID(dir); ok {
		forgetPod(root, filepath.Base(nodePath), uid, filepath.Base(dir))
	}
	out, err := s.release(ctx, root, nodePath, node, bind)
	unlock()
	if err != nil {
		return "", true, fmt.Errorf("%s; the node's mount %s: %w", msg, nodePath, err)
	}
	return msg + "; " + out + s.sweep(ctx, root, nodePath), true, nil
}

// sweep releases the node's mounts beneath root other than except whose
// lock is free now, and says what it unmounted.
func (s Shared) sweep(ctx context.Context, root *os.File, except string) string {
	mis, err := s.mountTable()
	if err != nil {
		return ""
	}
	var out []string
	for _, p := range s.nodeMounts(mis) {
		if p == except {
			continue
		}
		unlock, ok := s.tryLock(root, filepath.Base(p))
		if !ok {
			continue
		}
		if msg, err := s.release(ctx, root, p); err == nil && strings.HasPrefix(msg, "its last bind") {
			out = append(out, "unmounted "+p+", which had no bind left")
		}
		unlock()
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}

// nodeMounts returns the mount points of the node's mounts beneath Root
// in the table mis, each once.
func (s Shared) nodeMounts(mis []mount.MountInfo) []string {
	var out []string
	for _, mi := range mis {
		p := mountinfo.Unescape(mi.MountPoint)
		if filepath.Dir(p) == s.Root && isKey(filepath.Base(p)) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// release unmounts the node's mount at nodePath, forgets its record and
// removes its directory and lock file, unless the node still has a bind of
// it; the caller holds the lock of its volume. The mount is found again at
// nodePath: the recovery may have replaced it since the caller looked. A
// bind is a mount of the node's mount's device, or of one of also (the
// mount the caller found there, the bind it removed), or a pod's bind
// listed beside it (notePod) that is of a device no node's mount has now
// and of the same file system, source and root (the recovery may still
// have to give it the new mount): in doubt, the node's mount stays.
// Another mount of the same source (a CSI staging, a pod's own mount,
// another kubelet's) is no bind of it.
func (s Shared) release(ctx context.Context, root *os.File, nodePath string, also ...mount.MountInfo) (string, error) {
	mis, err := s.mountTable()
	if err != nil {
		return "", err
	}
	var node mount.MountInfo
	live := map[[2]int]bool{}
	for _, mi := range mis {
		p := mountinfo.Unescape(mi.MountPoint)
		if p == nodePath {
			node = mi // the last one is the topmost
		}
		if filepath.Dir(p) == s.Root && isKey(filepath.Base(p)) {
			live[[2]int{mi.Major, mi.Minor}] = true
		}
	}
	key := filepath.Base(nodePath)
	if node.ID == 0 {
		// Unmounted by the recovery, which mounts it again (its record
		// is there), or binds of it remain: its directory and list stay.
		if s.recorded(nodePath) || slices.ContainsFunc(mis, func(mi mount.MountInfo) bool {
			return slices.ContainsFunc(also, func(o mount.MountInfo) bool {
				return o.ID != 0 && o.ID != mi.ID && filepath.Dir(mountinfo.Unescape(o.MountPoint)) == s.Root && sameDevice(mi, o)
			})
		}) {
			return "the node's mount " + nodePath + " is being brought back by the recovery: it stays", nil
		}
		s.removeKey(root, key)
		return "the node's mount " + nodePath + " is gone already", nil
	}
	listed := s.listedBinds(nodePath)
	others := 0
	for _, mi := range mis {
		p := mountinfo.Unescape(mi.MountPoint)
		if filepath.Dir(p) == s.Root && isKey(filepath.Base(p)) {
			continue // a node's mount, not a bind
		}
		dev := [2]int{mi.Major, mi.Minor}
		switch {
		case sameDevice(mi, node), slices.ContainsFunc(also, func(o mount.MountInfo) bool { return o.ID != 0 && o.ID != mi.ID && sameDevice(mi, o) }):
			others++
		case listed[p] && !live[dev] && mi.FsType == node.FsType && mi.Source == node.Source && mi.Root == node.Root:
			others++
		}
	}
	if others > 0 {
		return fmt.Sprintf("the node's mount %s stays (%d other binds of it)", nodePath, others), nil
	}
	out, err := s.V.Unmount(ctx, nodePath)
	if err != nil {
		return "", err
	}
	s.removeKey(root, key)
	return "its last bind: " + out, nil
}

// removeKey removes key's directory, if empty and no mount point, and its
// lock file; the caller holds the lock. A call waiting for the lock finds
// the file gone once it has it, and locks the new one (see [Shared.lock]).
func (s Shared) removeKey(root *os.File, key string) {
	if err := unix.Unlinkat(int(root.Fd()), key, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return // still a mount point, or not empty: the lock stays with it
	}
	clearPods(root, key)
	_ = unix.Unlinkat(int(root.Fd()), key+".lock", 0)
}

// bindAt returns the mount at dir (the topmost) and, when it is a bind of
// the root of a shared mount, that shared mount (else a zero one). A bind
// is one of a shared mount when both show the same device, file-system
// type, source and root, and the shared mount is directly beneath Root
// under a key's name; a FUSE mount must be root's (user_id=0) too, as
// any node user may make one naming any source.
func (s Shared) bindAt(dir string) (bind, node mount.MountInfo, err error) {
	id, err := mountID(dir)
	if err != nil {
		return bind, node, err
	}
	mis, err := s.mountTable()
	if err != nil {
		return bind, node, err
	}
	for _, mi := range mis {
		if uint64(mi.ID) == id {
			bind = mi
		}
	}
	if bind.ID == 0 || bind.Root != "/" || mountinfo.Unescape(bind.MountPoint) != dir {
		return bind, node, nil
	}
	if strings.HasPrefix(bind.FsType, "fuse") && !slices.Contains(bind.SuperOptions, "user_id=0") {
		return bind, node, nil
	}
	// By its device; else, while the recovery replaces a dead node's
	// mount (the bind still shows the dead one's device), the one node's
	// mount of the same type and source, when no other can be the one:
	// node's mounts of one source in two namespaces are two, and one the
	// recovery has unmounted and not mounted yet is none in the table.
	var bySource []mount.MountInfo
	mounted := map[string]bool{}
	for _, mi := range mis {
		p := mountinfo.Unescape(mi.MountPoint)
		if mi.ID == bind.ID || filepath.Dir(p) != s.Root || !isKey(filepath.Base(p)) {
			continue
		}
		if sameDevice(mi, bind) {
			return bind, mi, nil
		}
		mounted[filepath.Base(p)] = true
		if mi.FsType == bind.FsType && mi.Source == bind.Source && mi.Root == bind.Root {
			bySource = append(bySource, mi)
		}
	}
	if len(bySource) == 1 && !s.unmountedKeys(mounted) {
		node = bySource[0]
	}
	return bind, node, nil
}

// unmountedKeys tells whether Root holds a node's mount directory that is
// not among mounted (or cannot tell).
func (s Shared) unmountedKeys(mounted map[string]bool) bool {
	entries, err := os.ReadDir(s.Root)
	if err != nil {
		return true
	}
	for _, e := range entries {
		if isKey(e.Name()) && !mounted[e.Name()] {
			return true
		}
	}
	return false
}

// sameDevice tells whether a and b are mounts of the same file system at
// the same root: device, type, source and root alike.
func sameDevice(a, b mount.MountInfo) bool {
	return a.Major == b.Major && a.Minor == b.Minor && a.FsType == b.FsType && a.Source == b.Source && a.Root == b.Root
}

func isKey(name string) bool {
	if len(name) != 32 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}

func (s Shared) mountTable() ([]mount.MountInfo, error) {
	read := s.V.MountTable
	if read == nil {
		read = func() ([]mount.MountInfo, error) { return mountinfo.ParseFile("/proc/self/mountinfo") }
	}
	mis, err := read()
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	return mis, nil
}

// openRoot makes Root when missing (its parents too) and opens it,
// following no symbolic link at its last component, and checks that root
// owns it and that nobody else may write it: the lock files and the
// shared mounts' directories are made beneath the descriptor.
func (s Shared) openRoot() (*os.File, error) {
	if !filepath.IsAbs(s.Root) || filepath.Clean(s.Root) != s.Root {
		return nil, fmt.Errorf("the shared mounts' directory %q is not a clean absolute path", s.Root)
	}
	if err := os.MkdirAll(s.Root, 0o700); err != nil {
		return nil, fmt.Errorf("create the shared mounts' directory: %w", err)
	}
	fd, err := unix.Open(s.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the shared mounts' directory %s: %w", s.Root, err)
	}
	f := os.NewFile(uintptr(fd), s.Root)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", s.Root, err)
	}
	if st.Uid != 0 || st.Mode&0o022 != 0 {
		f.Close()
		return nil, fmt.Errorf("the shared mounts' directory %s is owned by uid %d with mode %#o: want root's, written by nobody else", s.Root, st.Uid, st.Mode&0o7777)
	}
	return f, nil
}

// lockPoll is how often a call looks whether the lock of its volume is
// free.
const lockPoll = 20 * time.Millisecond

// lock takes the lock of key's volume, the file Root/<key>.lock (made when
// missing, opened beneath root by openat2 following no symbolic link),
// within ctx and the Mounter's timeout. The file is removed with the
// node's mount ([Shared.removeKey]), so a lock taken on a file that is no
// longer the one of that name is let go and taken again.
func (s Shared) lock(ctx context.Context, root *os.File, key string) (func(), error) {
	ctx, cancel := context.WithTimeout(ctx, s.V.TimeoutOrDefault())
	defer cancel()
	name := filepath.Join(s.Root, key+".lock")
	for {
		fd, err := openLock(root, key)
		if err != nil {
			return nil, fmt.Errorf("the lock %s: %w", name, err)
		}
		for {
			err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
			if err == nil || !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
				break
			}
			select {
			case <-ctx.Done():
				unix.Close(fd)
				return nil, fmt.Errorf("another call on the volume holds %s: not free within %s", name, s.V.TimeoutOrDefault())
			case <-time.After(lockPoll):
			}
		}
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if stillNamed(root, key, fd) {
			return func() { unix.Close(fd) }, nil
		}
		unix.Close(fd)
	}
}

// tryLock takes the lock of key's volume if it is free now.
func (s Shared) tryLock(root *os.File, key string) (func(), bool) {
	fd, err := openLock(root, key)
	if err != nil {
		return nil, false
	}
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil || !stillNamed(root, key, fd) {
		unix.Close(fd)
		return nil, false
	}
	return func() { unix.Close(fd) }, true
}

// openLock opens key's lock file beneath root, making it when missing: a
// regular file of root's.
func openLock(root *os.File, key string) (int, error) {
	fd, err := unix.Openat2(int(root.Fd()), key+".lock", &unix.OpenHow{
		Flags:   unix.O_RDWR | unix.O_CREAT | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Mode:    0o600,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 {
		unix.Close(fd)
		return -1, errors.New("not a regular file of root's")
	}
	return fd, nil
}

// stillNamed tells whether fd is still the file root/<key>.lock.
func stillNamed(root *os.File, key string, fd int) bool {
	var have, named unix.Stat_t
	if unix.Fstat(fd, &have) != nil || unix.Fstatat(int(root.Fd()), key+".lock", &named, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return have.Dev == named.Dev && have.Ino == named.Ino
}

// Bind clones the mount at node, showing sub (resolved beneath it by
// descriptors, see [mountfd.CloneBeneath]), sets it nosuid and nodev, and
// read-only when ro, and moves it onto target, opened without following a
// symbolic link.
func Bind(node, sub, target string, ro bool) error {
	tree, err := mountfd.CloneBeneath(node, sub)
	if err != nil {
		return err
	}
	defer tree.Close()
	// No set-user-ID program or device node of the volume's writers
	// takes effect through the bind (nor in the containers, whose binds
	// of the target inherit its flags).
	attr := unix.MountAttr{Propagation: unix.MS_PRIVATE, Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if ro {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(int(tree.Fd()), "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	fd, err := unix.Open(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open target %s: %w", target, err)
	}
	defer unix.Close(fd)
	if err := unix.MoveMount(int(tree.Fd()), "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount onto %s: %w", target, err)
	}
	return nil
}
