package exec

import (
	"fmt"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/boundary/execsocket"
)

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
	if containerID == "" {
		return ""
	}
	paths, err := execsocket.Cgroups(r.procRoot, pid)
	if err != nil {
		if pid > 0 {
			r.log.Debug("exec socket: cannot read the serving process's cgroups; identity answer only", "pid", pid, "err", err)
		}
		return ""
	}
	for _, p := range paths {
		if strings.Contains(p, containerID) {
			return ""
		}
	}
	return fmt.Sprintf("the process serving it (pid %d) is not in container %s: its cgroup is %s", pid, containerID, paths[0])
}
