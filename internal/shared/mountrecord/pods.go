package mountrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// PodsSuffix names, beside a node's mount that the pods of a volume share
// (the GlusterFS driver's shared mounts, whose record names no pod), the
// directory that lists those pods: <mount point>.pods, one file per pod
// whose volume directory binds the mount, named by the pod's UID and
// holding its [Pod] as JSON. The driver writes a pod's file with its bind
// and removes it with the bind; the recovery posts its Events on them.
const PodsSuffix = ".pods"

// maxPodFile bounds a file of the pods' directory.
const maxPodFile = 4 << 10

// ReadPods returns the pods listed beside the node's mount at target
// ([PodsSuffix]), sorted by UID; none when there is no such directory.
// The directory must be root's and written by nobody else, reached
// without following a symbolic link at its last component; a file that is
// not a regular file of root's of at most 4 KiB holding one valid pod
// named by its UID is skipped and named in the error, the others are
// returned.
func ReadPods(target string) ([]Pod, error) {
	dir := target + PodsSuffix
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the pods of %s: open %s: %w", target, dir, err)
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("the pods of %s: stat %s: %w", target, dir, err)
	}
	if st.Uid != 0 || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("the pods of %s: %s is owned by uid %d with mode %#o: want root's, written by nobody else", target, dir, st.Uid, st.Mode&0o7777)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("the pods of %s: list %s: %w", target, dir, err)
	}
	sort.Strings(names)
	var pods []Pod
	var errs []error
	for _, name := range names {
		if !validUID(name) {
			continue // a file being written (dot-named), or not the driver's
		}
		p, err := readPod(fd, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", dir, name, err))
			continue
		}
		pods = append(pods, p)
	}
	return pods, errors.Join(errs...)
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
	if err := p.Validate(); err != nil {
		return Pod{}, err
	}
	if p.UID != name {
		return Pod{}, fmt.Errorf("pod %s of UID %s in the file of UID %s", p, p.UID, name)
	}
	return p, nil
}
