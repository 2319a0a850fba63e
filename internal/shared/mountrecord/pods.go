package mountrecord

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// PodsSuffix names, beside a node's mount that the pods of a volume share
// (the GlusterFS driver's shared mounts, whose record names no pod), the
// directory that lists the pods' binds of it: <mount point>.pods, one
// file per bind, named <pod UID>~<volume name> and holding the [Pod] as
// JSON. The driver writes a bind's file with the bind and removes it with
// the bind; the recovery posts its Events on those pods.
const PodsSuffix = ".pods"

// Limits of a pods' directory: the size of a file, the files read.
const (
	maxPodFile = 4 << 10
	maxPods    = 4096
)

// PodVolume is a pod listed beside a shared mount, and the name of its
// volume that binds the mount.
type PodVolume struct {
	Pod
	Volume string
}

// PodFileName names the file of pod's bind of a shared mount as its
// volume vol.
func PodFileName(pod Pod, vol string) string { return pod.UID + "~" + vol }

// IsSharedTarget tells whether target is where a Flexvolume driver makes
// a node's mount that pods share: <kubelet>/plugins/<vendor>~<driver>/shared/<key>,
// the key 32 hexadecimal digits.
func IsSharedTarget(target string) bool {
	key := path.Base(target)
	shared := path.Dir(target)
	driver := path.Dir(shared)
	if len(key) != 32 || path.Base(shared) != "shared" || !strings.Contains(path.Base(driver), "~") || path.Base(path.Dir(driver)) != "plugins" {
		return false
	}
	_, err := hex.DecodeString(key)
	return err == nil
}

// ReadPods returns the pods' binds listed beside the node's mount at
// target ([PodsSuffix]), sorted by file name; none when target is not a
// shared mount's ([IsSharedTarget]) or has no such directory. The
// directory is opened beneath target's parent, which must be root's and
// written by nobody else, following no symbolic link and crossing no
// mount, and must be root's and written by nobody else itself; at most
// 4096 files are read. A file that is not a regular file of root's of at
// most 4 KiB holding one valid pod, named after its UID and a volume, is
// skipped and named in the error; the others are returned.
func ReadPods(target string) ([]PodVolume, error) {
	if !IsSharedTarget(target) {
		return nil, nil
	}
	parent := path.Dir(target)
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the pods of %s: open %s: %w", target, parent, err)
	}
	defer unix.Close(pfd)
	if err := rootsOnly(pfd, parent); err != nil {
		return nil, fmt.Errorf("the pods of %s: %w", target, err)
	}
	dir := target + PodsSuffix
	fd, err := unix.Openat2(pfd, path.Base(dir), &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the pods of %s: open %s: %w", target, dir, err)
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	if err := rootsOnly(fd, dir); err != nil {
		return nil, fmt.Errorf("the pods of %s: %w", target, err)
	}
	names, err := d.Readdirnames(maxPods)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("the pods of %s: list %s: %w", target, dir, err)
	}
	sort.Strings(names)
	var pods []PodVolume
	var errs []error
	for _, name := range names {
		uid, vol, ok := strings.Cut(name, "~")
		if !ok || !validUID(uid) {
			continue // a file being written (dot-named), or not the driver's
		}
		p, err := readPod(fd, name)
		switch {
		case err != nil:
		case p.UID != uid:
			err = fmt.Errorf("pod %s of UID %s in the file of UID %s", p, p.UID, uid)
		case vol == "" || strings.ContainsAny(vol, "/\x00"):
			err = fmt.Errorf("volume name %q", vol)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", dir, name, err))
			continue
		}
		pods = append(pods, PodVolume{p, vol})
	}
	return pods, errors.Join(errs...)
}

// rootsOnly checks that the directory fd (named name) is root's and
// written by nobody else.
func rootsOnly(fd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", name, err)
	}
	if st.Uid != 0 || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is owned by uid %d with mode %#o: want root's, written by nobody else", name, st.Uid, st.Mode&0o7777)
	}
	return nil
}

// readPod reads the pod file name in the directory dirfd.
func readPod(dirfd int, name string) (Pod, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return Pod{}, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Pod{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 || st.Size > maxPodFile {
		return Pod{}, fmt.Errorf("not a regular file of root's of at most %d bytes", maxPodFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPodFile+1))
	if err != nil {
		return Pod{}, err
	}
	var p Pod
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Pod{}, fmt.Errorf("decode: %w", err)
	}
	return p, p.Validate()
}
