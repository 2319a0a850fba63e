package scope

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defaults of [Config].
const (
	DefaultCgroupRoot   = "/sys/fs/cgroup"
	DefaultParent       = "mountcontainers"
	DefaultHostCgroupNS = "/proc/1/ns/cgroup"
	DefaultTimeout      = 10 * time.Second
)

// DefaultSystemdSockets are the sockets [New] tries for systemd, in order:
// systemd's own peer-to-peer socket, then the system bus (as
// github.com/coreos/go-systemd/v22/dbus does).
var DefaultSystemdSockets = []string{"/run/systemd/private", "/run/dbus/system_bus_socket"}

// Backend chooses how scopes are made.
type Backend string

const (
	// BackendAuto uses systemd when one of Config.SystemdSockets exists and
	// systemd answers on it, else cgroupfs; a socket that takes the
	// connection but does not answer within Config.Timeout is an error.
	BackendAuto Backend = "auto"
	// BackendCgroupfs writes the cgroup file system directly.
	BackendCgroupfs Backend = "cgroupfs"
	// BackendSystemd asks systemd for a transient scope unit over D-Bus.
	BackendSystemd Backend = "systemd"
)

// CgroupNSMode says whether cgroupfs placement enters the host's cgroup
// namespace; see the package documentation.
type CgroupNSMode string

const (
	// CgroupNSAuto enters Config.HostCgroupNS when this process's cgroup
	// namespace is not the host's: the namespace files differ, or, when
	// the host's cannot be read, PID 1's cgroups lie outside this process's
	// namespace root (paths starting with "/..").
	CgroupNSAuto CgroupNSMode = "auto"
	// CgroupNSEnter always enters Config.HostCgroupNS.
	CgroupNSEnter CgroupNSMode = "enter"
	// CgroupNSOff never enters it.
	CgroupNSOff CgroupNSMode = "off"
)

// Config configures a [Manager]. The zero value means the defaults.
type Config struct {
	// Backend is auto (default), cgroupfs or systemd.
	Backend Backend
	// CgroupRoot is where the host's cgroup hierarchies are mounted:
	// a cgroup2 file system (unified), or a directory of cgroup v1
	// hierarchies, optionally with a cgroup2 one named "unified" (hybrid).
	// In a mount pod that is the host's /sys/fs/cgroup mounted from the
	// host, e.g. at /host/sys/fs/cgroup. Default /sys/fs/cgroup.
	CgroupRoot string
	// Parent is the cgroup, relative to the root of every hierarchy, under
	// which each plugin gets its own parent (Parent/<PluginDir(plugin)>);
	// for systemd the slice prefix (see [SliceName]). Default
	// "mountcontainers".
	Parent string
	// MemoryLimit, when positive, is the memory limit in bytes of each
	// plugin's parent: memory.limit_in_bytes (v1), memory.max (v2) or
	// MemoryMax= of the plugin's slice (systemd).
	MemoryLimit int64
	// PidsLimit, when positive, is the most processes and threads each
	// plugin's parent may hold: pids.max (v1 and v2) or TasksMax= of the
	// plugin's slice (systemd).
	PidsLimit int64
	// OOMScoreAdj is the least oom_score_adj a process placed by
	// [RunHelper] runs with: a lower one (such as the -997 a
	// system-node-critical mount pod gives its processes) is raised to it
	// before the command runs, a higher one is kept, since lowering needs
	// CAP_SYS_RESOURCE. From -1000 to 1000; default 0, the score of an
	// ordinary process.
	OOMScoreAdj int
	// SystemdSockets are the D-Bus sockets tried for systemd, in order. A
	// socket whose base name is "private" is systemd's peer-to-peer socket;
	// any other is a message bus. Default [DefaultSystemdSockets].
	SystemdSockets []string
	// CgroupNS says whether cgroupfs placement enters HostCgroupNS:
	// auto (default), enter or off.
	CgroupNS CgroupNSMode
	// HostCgroupNS is the host's cgroup namespace. Default
	// /proc/1/ns/cgroup (the host's init, with hostPID).
	HostCgroupNS string
	// ProcRoot is the proc file system, for this thread's cgroup
	// namespace and PID 1's cgroups. Default /proc.
	ProcRoot string
	// Timeout bounds every call to systemd, job included. Default 10s.
	Timeout time.Duration
}

// withDefaults returns cfg with the zero fields set to their defaults, or
// an error for a field that is invalid.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Backend == "" {
		cfg.Backend = BackendAuto
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	if cfg.Parent == "" {
		cfg.Parent = DefaultParent
	}
	if cfg.SystemdSockets == nil {
		cfg.SystemdSockets = DefaultSystemdSockets
	}
	if cfg.CgroupNS == "" {
		cfg.CgroupNS = CgroupNSAuto
	}
	if cfg.HostCgroupNS == "" {
		cfg.HostCgroupNS = DefaultHostCgroupNS
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch cfg.Backend {
	case BackendAuto, BackendCgroupfs, BackendSystemd:
	default:
		return cfg, fmt.Errorf("invalid scope backend %q: want auto, cgroupfs or systemd", cfg.Backend)
	}
	switch cfg.CgroupNS {
	case CgroupNSAuto, CgroupNSEnter, CgroupNSOff:
	default:
		return cfg, fmt.Errorf("invalid cgroup namespace mode %q: want auto, enter or off", cfg.CgroupNS)
	}
	if cfg.MemoryLimit < 0 {
		return cfg, fmt.Errorf("invalid memory limit %d: must not be negative", cfg.MemoryLimit)
	}
	if cfg.PidsLimit < 0 {
		return cfg, fmt.Errorf("invalid pids limit %d: must not be negative", cfg.PidsLimit)
	}
	if cfg.OOMScoreAdj < minOOMScoreAdj || cfg.OOMScoreAdj > maxOOMScoreAdj {
		return cfg, fmt.Errorf("invalid oom_score_adj %d: want %d to %d", cfg.OOMScoreAdj, minOOMScoreAdj, maxOOMScoreAdj)
	}
	return cfg, validateParent(cfg.Parent)
}

// ParseMemoryLimit parses a memory limit written as a whole number of
// bytes, with or without one of the suffixes Kubernetes quantities use for
// them (Ki, Mi, Gi, Ti, Pi, Ei; k, M, G, T, P, E): "512Mi", "1G",
// "1073741824"; empty means none (0). Fractions and exponents ("0.5Gi",
// "1e9"), which Kubernetes also accepts, are refused with an error that says
// how to write the value. This subset of resource.ParseQuantity (a test holds
// the two to each other) keeps Kubernetes' packages out of the mount helper,
// which runs for every FUSE mount.
func ParseMemoryLimit(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	digits := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	mult, ok := memorySuffix(s[len(digits):])
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, fmt.Errorf("invalid memory limit %q: want a whole number of bytes, optionally with a suffix such as Mi or G (512Mi, 1G, 536870912)", s)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid memory limit %q: too large", s)
	}
	return n * mult, nil
}

// memorySuffix returns the multiplier of one of [ParseMemoryLimit]'s
// suffixes: 1000 to the power of its place in "kMGTPE", or 1024 in
// "Ki Mi Gi Ti Pi Ei"; 1 for none.
func memorySuffix(suffix string) (int64, bool) {
	base, i := int64(1000), strings.Index("kMGTPE", suffix)
	if len(suffix) == 2 && suffix[1] == 'i' && suffix[0] != 'k' {
		base, i = 1024, strings.Index("KMGTPE", suffix[:1])
	} else if len(suffix) > 1 {
		return 0, false
	}
	if i < 0 {
		return 0, false
	}
	mult := int64(1)
	if suffix != "" {
		for range i + 1 {
			mult *= base
		}
	}
	return mult, true
}
