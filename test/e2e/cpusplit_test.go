//go:build e2e && e2e_load

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cpuSnapshot is where the node's CPU time had gone at one moment: the
// machine's busy time, the bed's daemons (self and their reaped children:
// the kubelet's Flexvolume driver calls, containerd's shims' runc), and the
// cgroups of the pods and of the mounts' scopes. cpuSplit of two snapshots
// says who used the CPU of a wave.
type cpuSnapshot struct {
	busy   time.Duration
	procs  map[string]time.Duration // by group: "kubelet", "kubelet children", ...
	groups map[string]time.Duration // cgroups, by label
}

// clockTick is USER_HZ, the unit of /proc/*/stat's times: 100 on Linux.
const clockTick = 10 * time.Millisecond

// takeCPU reads the snapshot; cgroups maps a label to cgroup v1 cpuacct
// directories (globs, summed).
func takeCPU(cgroups map[string][]string) cpuSnapshot {
	s := cpuSnapshot{procs: map[string]time.Duration{}, groups: map[string]time.Duration{}}
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		f := strings.Fields(line)
		// user nice system idle iowait irq softirq steal: busy is all
		// but idle and iowait.
		for i, v := range f[1:min(len(f), 9)] {
			if i == 3 || i == 4 {
				continue
			}
			n, _ := strconv.ParseInt(v, 10, 64)
			s.busy += time.Duration(n) * clockTick
		}
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// comm is in parentheses and may hold spaces.
		open, closing := strings.IndexByte(string(data), '('), strings.LastIndexByte(string(data), ')')
		if open < 0 || closing < open {
			continue
		}
		comm := string(data[open+1 : closing])
		group := cpuGroupOf(comm)
		if group == "" {
			continue
		}
		f := strings.Fields(string(data[closing+1:]))
		if len(f) < 15 {
			continue
		}
		// After comm: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
		tick := func(i int) time.Duration {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			return time.Duration(n) * clockTick
		}
		s.procs[group] += tick(11) + tick(12)
		s.procs[group+" children"] += tick(13) + tick(14)
	}
	// This test's own looks (its polls and samples) share the CPUs.
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.procs["this test"] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for label, globs := range cgroups {
		var paths []string
		for _, glob := range globs {
			more, _ := filepath.Glob(filepath.Join(glob, "cpuacct.usage"))
			paths = append(paths, more...)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
			s.groups[label] += time.Duration(n)
		}
	}
	return s
}

// cpuGroupOf names the bed's daemons; "" for any other process.
func cpuGroupOf(comm string) string {
	switch comm {
	case "kubelet", "containerd", "kube-apiserver", "etcd", "kube-controller", "kube-scheduler", "csi-driver":
		return comm
	case "containerd-shim", "containerd-shim-runc-v2":
		return "containerd-shim"
	}
	return ""
}

// cpuSplit formats where the CPU went between a and b, largest first.
// Processes that exited between the snapshots are missing from b, so
// their part is counted only through their parent's children time.
func cpuSplit(a, b cpuSnapshot) string {
	type part struct {
		name string
		d    time.Duration
	}
	var parts []part
	for k, v := range b.procs {
		if d := v - a.procs[k]; d > 0 {
			parts = append(parts, part{k, d})
		}
	}
	for k, v := range b.groups {
		if d := v - a.groups[k]; d > 0 {
			parts = append(parts, part{"cgroup " + k, d})
		}
	}
	// Outside every pod and scope: the node's daemons, the runtime's
	// shims and runc (also those that exited meanwhile) and the kernel's
	// threads.
	outside := func(s cpuSnapshot) time.Duration {
		return s.groups[rootCgroup] - s.groups["kubepods (all pods)"] - s.groups["scopes (FUSE daemons)"]
	}
	if _, ok := b.groups[rootCgroup]; ok {
		parts = slices.DeleteFunc(parts, func(p part) bool { return p.name == "cgroup "+rootCgroup })
		if d := outside(b) - outside(a); d > 0 {
			parts = append(parts, part{"outside pods and scopes", d})
		}
	}
	slices.SortFunc(parts, func(x, y part) int { return int(y.d - x.d) })
	busy := b.busy - a.busy
	var out []string
	out = append(out, fmt.Sprintf("machine busy %s", busy.Round(100*time.Millisecond)))
	for _, p := range parts {
		out = append(out, fmt.Sprintf("%s %s (%.0f%%)", p.name, p.d.Round(100*time.Millisecond), 100*p.d.Seconds()/max(busy.Seconds(), 1e-9)))
	}
	return strings.Join(out, ", ")
}

// rootCgroup labels the root cgroup's CPU time: everything on the machine.
const rootCgroup = "root"

// podCgroups are the cpuacct directories of the pod with uid, whatever its
// QoS class.
func podCgroups(uid string) []string {
	return []string{"/sys/fs/cgroup/cpuacct/kubepods/pod" + uid, "/sys/fs/cgroup/cpuacct/kubepods/*/pod" + uid}
}

// loadCgroups are the cgroups a wave's CPU is split by: all pods, the
// mount pod, the GlusterFS server's pod and the mounts' scopes (parent).
func (g *glusterEnv) loadCgroups(t *testing.T, mountPodUID, parent string) map[string][]string {
	t.Helper()
	cg := map[string][]string{rootCgroup: {"/sys/fs/cgroup/cpuacct"}, "kubepods (all pods)": {"/sys/fs/cgroup/cpuacct/kubepods"}}
	if mountPodUID != "" {
		cg["mount pod"] = podCgroups(mountPodUID)
	}
	if parent != "" {
		cg["scopes (FUSE daemons)"] = []string{"/sys/fs/cgroup/cpuacct/" + parent}
	}
	server, err := g.bed.Client.CoreV1().Pods(g.ns).Get(context.Background(), "glusterfs-server", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the GlusterFS server pod: %v", err)
	}
	cg["GlusterFS server pod"] = podCgroups(string(server.UID))
	return cg
}

// procTimes returns the user and system CPU time of process pid itself.
func procTimes(pid int) (user, system time.Duration) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u) * clockTick, time.Duration(st) * clockTick
}
