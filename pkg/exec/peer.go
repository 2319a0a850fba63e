package exec

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxCgroupFile bounds what is read of /proc/<pid>/cgroup.
const maxCgroupFile = 64 << 10

// checkPeer returns why the process serving an exec socket, pid as
// SO_PEERCRED gave it, is not in the container containerID, or "" when it
// is or when that cannot be told. It is told by the process's cgroups
// (/proc/<pid>/cgroup under the resolver's ProcRoot): the runtimes name a
// container's cgroup after its ID (cgroupfs .../pod<UID>/<ID>, systemd
// .../cri-containerd-<ID>.scope, crio-<ID>.scope, docker-<ID>.scope), so
// one of its paths must contain the ID. It cannot be told when the process
// is not visible in the caller's PID namespace (pid 0, no such /proc
// entry, or one that cannot be read) or when every cgroup path is "/" (the
// caller sees the process from inside its cgroup namespace): then the
// Identity answer alone decides, as before this check existed.
func (r *Resolver) checkPeer(pid int, containerID string) string {
	if pid <= 0 || containerID == "" {
		return ""
	}
	path := filepath.Join(r.procRoot, strconv.Itoa(pid), "cgroup")
	f, err := os.Open(path)
	if err != nil {
		r.log.Debug("exec socket: cannot read the serving process's cgroups; identity answer only", "pid", pid, "err", err)
		return ""
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCgroupFile))
	if err != nil {
		r.log.Debug("exec socket: cannot read the serving process's cgroups; identity answer only", "pid", pid, "err", err)
		return ""
	}
	var shown string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[2] == "/" || parts[2] == "" {
			continue
		}
		if strings.Contains(parts[2], containerID) {
			return ""
		}
		if shown == "" {
			shown = parts[2]
		}
	}
	if shown == "" {
		return ""
	}
	return fmt.Sprintf("the process serving it (pid %d) is not in container %s: its cgroup is %s", pid, containerID, shown)
}
