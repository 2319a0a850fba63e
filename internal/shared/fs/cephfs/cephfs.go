// Package cephfs is what the node knows of CephFS volumes, mounted with
// ceph-fuse, whatever the front end that mounts them (the Flexvolume
// driver, a CSI driver): the options a volume may give and their checks,
// the monitors they name, the mount(8) call they make, the user's key (a
// secret the driver hands to ceph-fuse through a file), and the monitors a
// mount's record names, which the mount pod's recovery checks before it
// makes a dead mount again. It runs in the node's volume hosts and, for
// the record's check, in the mount pod. The mount pod's mount.fuse.ceph,
// which turns the options this package makes into ceph-fuse's arguments,
// is package fuseargs, kept apart so that the scope helper links little.
package cephfs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Option keys of a CephFS volume's options.
const (
	// KeyMonitors is a comma-separated list of Ceph monitors, each a host
	// name or an IPv4 address with an optional port (default 6789, the
	// monitors' v1 port, which ceph-fuse speaks), allowed by the
	// administrator's list ([fs.ServerPolicy]).
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
	// KeyMountOptions is a comma-separated list of mount options, from
	// [FS]'s list.
	KeyMountOptions = fs.KeyMountOptions
)

// FSType is the file system type name of CephFS volumes.
const FSType = "cephfs"

// Plugin is the volume plugin the CephFS mount pods register for (the
// kubelet's in-tree plugin's name), and Tools the utilities its mounts run
// in them.
const Plugin = "kubernetes.io/cephfs"

// Tools: see [Plugin].
var Tools = []string{"ceph-fuse", "mount.fuse.ceph"}

// The mount(8) type and source of a ceph-fuse mount: mount.fuse.ceph (in
// the mount pod, a safe translation to ceph-fuse's arguments: package
// fuseargs) turns each ceph.NAME=VALUE option into --NAME=VALUE.
const (
	// FuseType is the mount(8) type of a ceph-fuse mount, as its record
	// holds it.
	FuseType       = "fuse.ceph"
	cephFuseSource = "none"
	cephKeyOption  = "ceph.keyfile"
	cephMonPort    = 6789
)

var (
	cephNameRE = fs.Pattern(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	cephPathRE = fs.Pattern(`^/[A-Za-z0-9_./-]*$`)
	cephKeyRE  = fs.Pattern(`^[A-Za-z0-9+/]{16,256}={0,2}$`)
)

// cephMountOptions are the mount options a CephFS volume may ask for:
// those libfuse takes from ceph-fuse. Ceph settings (ceph.*) are not
// among them: they would let a pod author point the client at other
// files (ceph.keyring, ceph.log_file, ceph.admin_socket) in the mount pod.
var cephMountOptions = []string{"ro", "rw", "nosuid", "nodev", "noexec", "noatime", "_netdev", "defaults"}

// FS is the [fs.Filesystem] of CephFS volumes, mounted with ceph-fuse.
// A volume's options:
//
//   - monitors: the Ceph monitors, comma-separated, each a host name or an
//     IPv4 address (as GlusterFS servers are written, see [fs.CheckHost])
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
//     reaches ceph-fuse through a file ([fs.Mount].Secret), never argv;
//   - kubernetes.io/fsType: empty or "cephfs"; kubernetes.io/readwrite as
//     for GlusterFS; other kubernetes.io/* keys are the kubelet's.
type FS struct{}

// Name is "cephfs".
func (FS) Name() string { return FSType }

// Mount checks vals and returns the ceph-fuse mount they ask for.
func (FS) Mount(ctx context.Context, vals map[string]string, env fs.Env) (fs.Mount, error) {
	var readOnly bool
	for _, k := range fs.SortedKeys(vals) {
		if k == KeySecretKey {
			continue
		}
		if handled, err := fs.CheckCommonKeys(FSType, k, vals[k], &readOnly); err != nil {
			return fs.Mount{}, err
		} else if handled {
			continue
		}
		switch k {
		case KeyMonitors, KeyUser, KeyFS, KeyPath, KeyMountOptions:
		default:
			return fs.Mount{}, fs.BadOption(k, "unknown option (known: %s, %s, %s, %s, %s)", KeyMonitors, KeyUser, KeyFS, KeyPath, KeyMountOptions)
		}
	}
	mons, err := parseMonitors(ctx, vals, env)
	if err != nil {
		return fs.Mount{}, err
	}
	user := "admin"
	if v, ok := vals[KeyUser]; ok {
		if v = strings.TrimPrefix(v, "client."); !cephNameRE().MatchString(v) {
			return fs.Mount{}, fs.BadOption(KeyUser, "%q: a cephx user has 1 to 64 letters, digits, '.', '-' or '_'", vals[KeyUser])
		}
		user = v
	}
	// ceph.conf=/dev/null: the volume says everything; a ceph.conf in the
	// mount pod (an rbd pod's /etc/ceph) must not add to it.
	opts := []string{"ceph.conf=/dev/null", "ceph.id=" + user, "ceph.mon_host=" + strings.Join(mons, ";")}
	if v, ok := vals[KeyFS]; ok {
		if !cephNameRE().MatchString(v) {
			return fs.Mount{}, fs.BadOption(KeyFS, "%q: a file system name has 1 to 64 letters, digits, '.', '-' or '_'", v)
		}
		opts = append(opts, "ceph.client_fs="+v)
	}
	if v, ok := vals[KeyPath]; ok && v != "/" {
		if !pathOK(v) {
			return fs.Mount{}, fs.BadOption(KeyPath, "%q: want a clean absolute path of letters, digits, '.', '-', '_' and '/'", v)
		}
		opts = append(opts, "ceph.client_mountpoint="+v)
	}
	mo, err := parseCephMountOptions(vals[KeyMountOptions])
	if err != nil {
		return fs.Mount{}, err
	}
	key, err := cephKey(vals)
	if err != nil {
		return fs.Mount{}, err
	}
	what := "CephFS " + cmp.Or(vals[KeyFS], "(default)") + ":" + cmp.Or(vals[KeyPath], "/") + " as client." + user
	return fs.Mount{
		FSType:  FuseType,
		Source:  cephFuseSource,
		What:    what,
		Options: append(opts, fs.ReadOnlyOptions(mo, readOnly)...),
		Pod:     fs.PodOf(vals),
		Secret:  &fs.Secret{Option: cephKeyOption, Data: key},
	}, nil
}

// pathOK says whether v is a path option may name: clean, absolute, of
// letters, digits, '.', '-', '_' and '/', without "..".
func pathOK(v string) bool {
	return len(v) <= 1024 && cephPathRE().MatchString(v) && path.Clean(v) == v && !slices.Contains(strings.Split(v, "/"), "..")
}

// parseMonitors returns the monitors of vals as ceph-fuse connects to them,
// "ADDRESS:PORT", each host checked by env.Servers.
func parseMonitors(ctx context.Context, vals map[string]string, env fs.Env) ([]string, error) {
	v, ok := vals[KeyMonitors]
	if !ok || strings.TrimSpace(v) == "" {
		return nil, fs.BadOption(KeyMonitors, "missing: the Ceph monitors, such as 10.0.0.1:6789,10.0.0.2")
	}
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.TrimSpace(m)
		host, port := m, cephMonPort
		if h, p, ok := strings.Cut(m, ":"); ok {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
				return nil, fs.BadOption(KeyMonitors, "%q: the port must be a number from 1 to 65535 (IPv6 monitors are not supported)", m)
			}
			host, port = h, n
		}
		if err := fs.CheckHost(host); err != nil {
			return nil, fs.BadOption(KeyMonitors, "%v", err)
		}
		conn, err := env.Servers.Check(ctx, env.Resolver, host)
		if err != nil {
			return nil, fs.BadOption(KeyMonitors, "%v", err)
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
			return nil, fs.BadOption(KeyMountOptions, "mount option %q is not allowed (allowed: %s)", name, strings.Join(cephMountOptions, ", "))
		}
	}
	return out, nil
}

// cephKey returns the cephx key of the volume's secret. Messages never
// quote it.
func cephKey(vals map[string]string) ([]byte, error) {
	enc, ok := vals[KeySecretKey]
	if !ok {
		return nil, fs.BadOption(KeySecretKey, "missing: give the volume a secretRef to a Secret (of the driver's name as its type) whose entry \"key\" is the user's cephx key")
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fs.BadOption(KeySecretKey, "not base64 as the kubelet writes it")
	}
	key = bytes.TrimSpace(key)
	if !cephKeyRE().Match(key) {
		return nil, fs.BadOption(KeySecretKey, "the Secret's entry \"key\" is not a cephx key (the base64 text `ceph auth get-key` prints)")
	}
	return key, nil
}

// monHostOption is the option of a ceph-fuse mount that names its
// monitors.
const monHostOption = "ceph.mon_host"

// CheckRecorded reports why p does not allow a monitor that rec, the
// record of a ceph-fuse mount made through the mount pod (type
// [FuseType]), connects to (nil when it allows them all): those of
// ceph.mon_host, which such a record must have, each checked by
// [fs.ServerPolicy.CheckRecordedServer].
func CheckRecorded(ctx context.Context, p fs.ServerPolicy, rec mountrecord.Record) error {
	monitors := 0
	for _, o := range rec.Options {
		v, ok := strings.CutPrefix(o, monHostOption+"=")
		if !ok {
			continue
		}
		// The driver writes ADDRESS:PORT;...; Ceph also splits on
		// commas and spaces.
		for _, m := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' || unicode.IsSpace(r) }) {
			h, _, _ := strings.Cut(m, ":")
			if err := p.CheckRecordedServer(ctx, h); err != nil {
				return fmt.Errorf("monitor %s of %s: %w", h, monHostOption, err)
			}
			monitors++
		}
	}
	if monitors == 0 {
		return fmt.Errorf("no monitors in %s: they cannot be checked", monHostOption)
	}
	return nil
}
