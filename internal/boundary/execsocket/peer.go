package execsocket

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrCannotTell is wrapped by the errors of [Cgroups] and [PodContainer]
// when a process's cgroups cannot be told from where the caller stands: the
// process is not visible in the caller's PID namespace (SO_PEERCRED gave
// PID 0, there is no /proc entry, or it cannot be read), or every cgroup
// path is "/" (the caller sees the process from inside its cgroup
// namespace).
var ErrCannotTell = errors.New("cannot tell the process's cgroups")

// maxCgroupFile bounds what is read of /proc/<pid>/cgroup.
const maxCgroupFile = 64 << 10

// Cgroups returns the cgroup paths of process pid other than "/", one per
// line of procRoot/<pid>/cgroup (hierarchy-ID:controllers:path). procRoot
// must be the procfs of the caller's own PID namespace, or PIDs name other
// processes.
func Cgroups(procRoot string, pid int) ([]string, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("%w: pid %d is not visible here", ErrCannotTell, pid)
	}
	path := filepath.Join(procRoot, strconv.Itoa(pid), "cgroup")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCannotTell, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCgroupFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCannotTell, path, err)
	}
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && parts[2] != "/" && parts[2] != "" {
			paths = append(paths, parts[2])
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: every cgroup of pid %d is the root of the caller's cgroup namespace", ErrCannotTell, pid)
	}
	return paths, nil
}

// PodContainer returns the ID of the container of pod podUID that process
// pid is in, as its cgroups tell it: a CRI runtime runs a container in a
// cgroup named after the container's ID right below the pod's cgroup, and
// the kubelet names the pod's cgroup after the pod's UID. Both cgroup
// drivers are understood:
//
//	cgroupfs: .../kubepods/besteffort/pod<UID>/<ID>
//	systemd:  .../kubepods-besteffort-pod<UID, - as _>.slice/cri-containerd-<ID>.scope
//
// (also crio-<ID>.scope and docker-<ID>.scope), and a cgroup below the
// container's. An ID is 64 lower-case hexadecimal digits. The error wraps
// [ErrCannotTell] when the cgroups cannot be told, and otherwise names the
// cgroup the process is in.
func PodContainer(procRoot string, pid int, podUID string) (string, error) {
	paths, err := Cgroups(procRoot, pid)
	if err != nil {
		return "", err
	}
	found := ""
	for _, p := range paths {
		id, ok := podContainerOf(p, podUID)
		if !ok {
			continue
		}
		if found != "" && id != found {
			return "", fmt.Errorf("pid %d is in two containers of pod %s: %s and %s", pid, podUID, found, id)
		}
		found = id
	}
	if found == "" {
		return "", fmt.Errorf("pid %d is not in a container of pod %s: its cgroup is %s", pid, podUID, paths[0])
	}
	return found, nil
}

// podContainerOf returns the container ID in cgroup path p below the
// cgroup of pod podUID.
func podContainerOf(p, podUID string) (string, bool) {
	if podUID == "" {
		return "", false
	}
	cgroupfs := "pod" + podUID
	systemd := "-pod" + strings.ReplaceAll(podUID, "-", "_") + ".slice"
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, c := range parts[:len(parts)-1] {
		if c != cgroupfs && !strings.HasSuffix(c, systemd) {
			continue
		}
		id := strings.TrimSuffix(parts[i+1], ".scope")
		if j := strings.LastIndexByte(id, '-'); j >= 0 {
			if parts[i+1] == id { // a prefix is only ever that of a scope
				return "", false
			}
			id = id[j+1:]
		}
		return id, isContainerID(id)
	}
	return "", false
}

// isContainerID reports whether s is 64 lower-case hexadecimal digits.
func isContainerID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
