package flexvolume

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Option keys of a CephFS volume's flexVolume.options.
const (
	// KeyMonitors is a comma-separated list of Ceph monitors, each a host
	// name or an IPv4 address with an optional port (default 6789, the
	// monitors' v1 port, which ceph-fuse speaks), allowed by the
	// administrator's list ([ServerPolicy]).
	KeyMonitors = "monitors"
	// KeyUser is the cephx user without "client." (default "admin").
	KeyUser = "user"
	// KeyFS is the name of the CephFS to mount, when the cluster has more
	// than one (default: the cluster's default file system).
	KeyFS = "fs"
	// KeyPath is the directory of the CephFS to mount (default "/").
	KeyPath = "path"
	// KeySecretKey is where the kubelet puts the value of the key "key" of
	// the volume's secretRef, base64-encoded: the user's cephx key. (The
	// kubelet reads only a Secret whose type is the driver's name, such as
	// mountcontainers.io/cephfs.)
	KeySecretKey = "kubernetes.io/secret/key"
)

// CephFSType is the file system type name of CephFS volumes.
const CephFSType = "cephfs"

// The mount(8) type and source of a ceph-fuse mount: mount.fuse.ceph (in
// the mount pod, a safe translation to ceph-fuse's arguments: see package
// scope) turns each ceph.NAME=VALUE option into --NAME=VALUE.
const (
	cephFuseType   = "fuse.ceph"
	cephFuseSource = "none"
	cephKeyOption  = "ceph.keyfile"
	cephMonPort    = 6789
)

var (
	cephNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	cephPathRE = regexp.MustCompile(`^/[A-Za-z0-9_./-]*$`)
	cephKeyRE  = regexp.MustCompile(`^[A-Za-z0-9+/]{16,256}={0,2}$`)
)

// cephMountOptions are the mount options a CephFS volume may ask for:
// those libfuse takes from ceph-fuse. Ceph settings (ceph.*) are not
// among them: they would let a pod author point the client at other
// files (ceph.keyring, ceph.log_file, ceph.admin_socket) in the mount pod.
var cephMountOptions = []string{"ro", "rw", "nosuid", "nodev", "noexec", "noatime", "_netdev", "defaults"}

// CephFS is the [Filesystem] of CephFS volumes, mounted with ceph-fuse.
// A volume's options:
//
//   - monitors: the Ceph monitors, comma-separated, each a host name or an
//     IPv4 address (as GlusterFS servers are written, see [ParseOptions])
//     with an optional ":PORT" (default 6789); each is checked against
//     the allowed servers and a name is replaced by its address as for
//     GlusterFS;
//   - user (optional): the cephx user, without "client." (default admin);
//   - fs (optional): the CephFS name; path (optional): the directory of
//     the CephFS to mount, absolute, without "..";
//   - mountOptions (optional): comma-separated, from ro, rw, nosuid, nodev,
//     noexec, noatime, _netdev, defaults;
//   - the user's key from the volume's secretRef: the kubelet passes the
//     Secret's entry "key" as kubernetes.io/secret/key, base64-encoded. It
//     reaches ceph-fuse through a file ([Mount].Secret), never argv;
//   - kubernetes.io/fsType: empty or "cephfs"; kubernetes.io/readwrite as
//     for GlusterFS; other kubernetes.io/* keys are the kubelet's.
type CephFS struct{}

// Name is "cephfs".
func (CephFS) Name() string { return CephFSType }

// Mount checks vals and returns the ceph-fuse mount they ask for.
func (CephFS) Mount(ctx context.Context, vals map[string]string, env Env) (Mount, error) {
	var readOnly bool
	for _, k := range sortedKeys(vals) {
		if k == KeySecretKey {
			continue
		}
		if handled, err := checkCommonKeys(CephFSType, k, vals[k], &readOnly); err != nil {
			return Mount{}, err
		} else if handled {
			continue
		}
		switch k {
		case KeyMonitors, KeyUser, KeyFS, KeyPath, KeyMountOptions:
		default:
			return Mount{}, badOption(k, "unknown option (known: %s, %s, %s, %s, %s)", KeyMonitors, KeyUser, KeyFS, KeyPath, KeyMountOptions)
		}
	}
	mons, err := parseMonitors(ctx, vals, env)
	if err != nil {
		return Mount{}, err
	}
	user := "admin"
	if v, ok := vals[KeyUser]; ok {
		if v = strings.TrimPrefix(v, "client."); !cephNameRE.MatchString(v) {
			return Mount{}, badOption(KeyUser, "%q: a cephx user has 1 to 64 letters, digits, '.', '-' or '_'", vals[KeyUser])
		}
		user = v
	}
	// ceph.conf=/dev/null: the volume says everything; a ceph.conf in the
	// mount pod (an rbd pod's /etc/ceph) must not add to it.
	opts := []string{"ceph.conf=/dev/null", "ceph.id=" + user, "ceph.mon_host=" + strings.Join(mons, ";")}
	if v, ok := vals[KeyFS]; ok {
		if !cephNameRE.MatchString(v) {
			return Mount{}, badOption(KeyFS, "%q: a file system name has 1 to 64 letters, digits, '.', '-' or '_'", v)
		}
		opts = append(opts, "ceph.client_fs="+v)
	}
	if v, ok := vals[KeyPath]; ok && v != "/" {
		if len(v) > 1024 || !cephPathRE.MatchString(v) || path.Clean(v) != v || slices.Contains(strings.Split(v, "/"), "..") {
			return Mount{}, badOption(KeyPath, "%q: want a clean absolute path of letters, digits, '.', '-', '_' and '/'", v)
		}
		opts = append(opts, "ceph.client_mountpoint="+v)
	}
	mo, err := parseCephMountOptions(vals[KeyMountOptions])
	if err != nil {
		return Mount{}, err
	}
	key, err := cephKey(vals)
	if err != nil {
		return Mount{}, err
	}
	what := "CephFS " + cmp.Or(vals[KeyFS], "(default)") + ":" + cmp.Or(vals[KeyPath], "/") + " as client." + user
	return Mount{
		FSType:  cephFuseType,
		Source:  cephFuseSource,
		What:    what,
		Options: append(opts, readOnlyOptions(mo, readOnly)...),
		Pod:     podOf(vals),
		Secret:  &Secret{Option: cephKeyOption, Data: key},
	}, nil
}

// parseMonitors returns the monitors of vals as ceph-fuse connects to them,
// "ADDRESS:PORT", each host checked by env.Servers.
func parseMonitors(ctx context.Context, vals map[string]string, env Env) ([]string, error) {
	v, ok := vals[KeyMonitors]
	if !ok || strings.TrimSpace(v) == "" {
		return nil, badOption(KeyMonitors, "missing: the Ceph monitors, such as 10.0.0.1:6789,10.0.0.2")
	}
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.TrimSpace(m)
		host, port := m, cephMonPort
		if h, p, ok := strings.Cut(m, ":"); ok {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
				return nil, badOption(KeyMonitors, "%q: the port must be a number from 1 to 65535 (IPv6 monitors are not supported)", m)
			}
			host, port = h, n
		}
		if err := checkHost(host); err != nil {
			return nil, badOption(KeyMonitors, "%v", err)
		}
		conn, err := env.Servers.Check(ctx, env.Resolver, host)
		if err != nil {
			return nil, badOption(KeyMonitors, "%v", err)
		}
		out = append(out, conn+":"+strconv.Itoa(port))
	}
	return out, nil
}

func parseCephMountOptions(mo string) ([]string, error) {
	var out []string
	for _, opt := range strings.Split(mo, ",") {
		opt = strings.TrimSpace(opt)
		switch {
		case opt == "", slices.Contains(out, opt):
		case slices.Contains(cephMountOptions, opt):
			out = append(out, opt)
		default:
			name, _, _ := strings.Cut(opt, "=")
			return nil, badOption(KeyMountOptions, "mount option %q is not allowed (allowed: %s)", name, strings.Join(cephMountOptions, ", "))
		}
	}
	return out, nil
}

// cephKey returns the cephx key of the volume's secret. Messages never
// quote it.
func cephKey(vals map[string]string) ([]byte, error) {
	enc, ok := vals[KeySecretKey]
	if !ok {
		return nil, badOption(KeySecretKey, "missing: give the volume a secretRef to a Secret (of the driver's name as its type) whose entry \"key\" is the user's cephx key")
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, badOption(KeySecretKey, "not base64 as the kubelet writes it")
	}
	key = bytes.TrimSpace(key)
	if !cephKeyRE.Match(key) {
		return nil, badOption(KeySecretKey, "the Secret's entry \"key\" is not a cephx key (the base64 text `ceph auth get-key` prints)")
	}
	return key, nil
}
