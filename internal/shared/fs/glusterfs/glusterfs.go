// Package glusterfs is what the node knows of GlusterFS volumes, whatever
// the front end that mounts them (the Flexvolume driver, a CSI driver):
// the options a volume may give and their checks, the servers they name,
// the mount(8) call they make (mount.glusterfs, in the mount pod), and the
// servers a mount's record names, which the mount pod's recovery checks
// before it makes a dead mount again. It runs in the node's volume hosts
// and, for the record's check, in the mount pod.
package glusterfs

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Option keys of a GlusterFS volume's options.
const (
	// KeyServer is one GlusterFS server: a host name or an IPv4 address,
	// allowed by the administrator's list ([fs.ServerPolicy]).
	KeyServer = "server"
	// KeyServers is a comma-separated list of servers; the first one
	// serves the volume file, the others are its backups.
	KeyServers = "servers"
	// KeyVolume is the GlusterFS volume name.
	KeyVolume = "volume"
	// KeyMountOptions is a comma-separated list of mount options, each
	// from an allow list (see [ParseOptions]).
	KeyMountOptions = fs.KeyMountOptions
)

// FSType is the file system type of GlusterFS volumes, as
// kubernetes.io/fsType and mount(8) name it.
const FSType = "glusterfs"

// Plugin is the kubelet's in-tree GlusterFS volume plugin, and Tools the
// utilities it runs, under whose names the shim is installed.
const Plugin = "kubernetes.io/glusterfs"

// Tools: see [Plugin].
var Tools = []string{"mount.glusterfs"}

// Options are a volume's validated mount parameters.
type Options struct {
	// Servers are host names or IPv4 addresses; Servers[0] is the source.
	Servers []string
	// Volume is the GlusterFS volume name.
	Volume string
	// MountOptions are the allowed mount options, in the given order.
	MountOptions []string
	// ReadOnly is set when the kubelet asks for a read-only mount.
	ReadOnly bool
	// Pod is the pod the kubelet mounts the volume for, from its
	// kubernetes.io/pod.* keys; nil when they are missing or invalid.
	Pod *mountrecord.Pod

	fromServers bool // Servers came from "servers", not "server"
}

// backupServersOption is the mount option naming backup volume file
// servers, colon-separated.
const backupServersOption = "backup-volfile-servers"

var (
	volumeRE = fs.Pattern(`^[A-Za-z0-9_-]{1,128}$`)
	uintRE   = fs.Pattern(`^[0-9]{1,10}$`)
)

// valueKind checks the value of a mount option.
type valueKind int

const (
	flagOnly valueKind = iota // no value
	uintValue
	boolValue
	hostList // colon-separated servers
	enumValue
)

type allowed struct {
	kind valueKind
	enum []string
	// least and most bound a uintValue; most 0 means any 32-bit value.
	least, most uint64
}

// allowedOptions are the mount options a volume may ask for. Left out on
// purpose: log-file and volfile (they name files the glusterfs client
// writes or reads as root in the mount pod), xlator-option (arbitrary
// translator settings), log-level TRACE and DEBUG (a client logging every
// call can fill the node's disk: the logs are on the node, see
// deploy/glusterfs), and anything not listed.
//
// The options that size the client's caches, queues and threads are
// bounded: a FUSE daemon outlives the mount pod in a scope of its own
// (docs/scopes.md), and one volume must not make it grow without end.
// lru-limit=0 would turn the inode cache's limit off, so it is refused.
var allowedOptions = map[string]allowed{
	"ro": {}, "rw": {}, "acl": {}, "selinux": {}, "worm": {}, "defaults": {},
	"noatime": {}, "nodiratime": {}, "relatime": {}, "nodev": {}, "nosuid": {},
	"noexec": {}, "_netdev": {}, "auto_unmount": {}, "enable-ino32": {},
	"log-level":                  {kind: enumValue, enum: []string{"INFO", "WARNING", "ERROR", "CRITICAL", "NONE"}},
	"transport":                  {kind: enumValue, enum: []string{"tcp", "rdma"}},
	"direct-io-mode":             {kind: enumValue, enum: []string{"enable", "disable", "auto"}},
	"use-readdirp":               {kind: boolValue},
	"fopen-keep-cache":           {kind: boolValue},
	"kernel-writeback-cache":     {kind: boolValue},
	"attribute-timeout":          {kind: uintValue},
	"entry-timeout":              {kind: uintValue},
	"negative-timeout":           {kind: uintValue},
	"gid-timeout":                {kind: uintValue},
	"background-qlen":            {kind: uintValue, most: 1024},
	"fetch-attempts":             {kind: uintValue, most: 64},
	"volfile-max-fetch-attempts": {kind: uintValue, most: 64},
	"lru-limit":                  {kind: uintValue, least: 1, most: 262144},
	"invalidate-limit":           {kind: uintValue, most: 65536},
	"reader-thread-count":        {kind: uintValue, most: 16},
	backupServersOption:          {kind: hostList},
}

var boolWords = []string{"yes", "no", "true", "false", "on", "off", "enable", "disable"}

// ParseOptions decodes and checks the JSON options of a mount call:
//
//   - server or servers (not both): host names (RFC 1123, not ending in a
//     numeric label) or IPv4 addresses in dotted-quad form; no ':' (IPv6
//     addresses, IPv4-mapped ones included, are not supported); more than
//     one server adds backup-volfile-servers. Whether a server is allowed
//     is [Options.CheckServers]' decision;
//   - volume: letters, digits, '-' and '_';
//   - mountOptions (optional): comma-separated options from an allow list;
//   - kubernetes.io/fsType: empty or "glusterfs"; kubernetes.io/readwrite:
//     "ro" or "rw"; other kubernetes.io/* keys are the kubelet's and ignored;
//   - any other key is an error, so that a misspelt option is not silently
//     dropped.
//
// Errors are *[fs.OptionError] values naming the field.
func ParseOptions(raw []byte) (Options, error) {
	vals, err := fs.DecodeOptions(raw)
	if err != nil {
		return Options{}, err
	}
	return parseGlusterfs(vals)
}

func parseGlusterfs(vals map[string]string) (Options, error) {
	var o Options
	var err error
	if o.ReadOnly, err = checkKeys(vals); err != nil {
		return Options{}, err
	}
	if o.Servers, err = parseServers(vals); err != nil {
		return Options{}, err
	}
	_, o.fromServers = vals[KeyServers]
	if o.Volume, err = parseVolume(vals); err != nil {
		return Options{}, err
	}
	if o.MountOptions, err = parseMountOptions(vals[KeyMountOptions], len(o.Servers) > 1); err != nil {
		return Options{}, err
	}
	o.Pod = fs.PodOf(vals)
	return o, nil
}

// FS is the [fs.Filesystem] of GlusterFS volumes, mounted with
// mount.glusterfs: see [ParseOptions] for the options.
type FS struct{}

// Name is "glusterfs".
func (FS) Name() string { return FSType }

// Mount parses vals as [ParseOptions] does and checks the servers with
// [Options.CheckServers].
func (FS) Mount(ctx context.Context, vals map[string]string, env fs.Env) (fs.Mount, error) {
	o, err := parseGlusterfs(vals)
	if err != nil {
		return fs.Mount{}, err
	}
	if o, err = o.CheckServers(ctx, env.Servers, env.Resolver); err != nil {
		return fs.Mount{}, err
	}
	return fs.Mount{FSType: FSType, Source: o.Source(), Options: o.RecordedOptions(), Pod: o.Pod}, nil
}

// checkKeys refuses unknown keys and checks the kubelet's fsType and
// readwrite; it returns whether the kubelet asks for a read-only mount.
// Keys are checked in order, so that the error is always the same.
func checkKeys(vals map[string]string) (readOnly bool, err error) {
	for _, k := range fs.SortedKeys(vals) {
		if handled, err := fs.CheckCommonKeys(FSType, k, vals[k], &readOnly); err != nil {
			return false, err
		} else if handled {
			continue
		}
		switch k {
		case KeyServer, KeyServers, KeyVolume, KeyMountOptions:
		default:
			return false, fs.BadOption(k, "unknown option (known: %s, %s, %s, %s)", KeyServer, KeyServers, KeyVolume, KeyMountOptions)
		}
	}
	return readOnly, nil
}

// parseServers returns the servers of server or servers (exactly one of
// them must be set), each checked with [fs.CheckHost].
func parseServers(vals map[string]string) ([]string, error) {
	server, hasServer := vals[KeyServer]
	servers, hasServers := vals[KeyServers]
	switch {
	case hasServer && hasServers:
		return nil, fs.BadOption(KeyServers, "give either %q or %q, not both", KeyServer, KeyServers)
	case hasServer:
		if err := fs.CheckHost(server); err != nil {
			return nil, fs.BadOption(KeyServer, "%v", err)
		}
		return []string{server}, nil
	case hasServers:
		var out []string
		for _, s := range strings.Split(servers, ",") {
			s = strings.TrimSpace(s)
			if err := fs.CheckHost(s); err != nil {
				return nil, fs.BadOption(KeyServers, "%v", err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fs.BadOption(KeyServer, "missing: the GlusterFS server's host name or IPv4 address")
}

// parseVolume returns the checked volume name.
func parseVolume(vals map[string]string) (string, error) {
	vol, ok := vals[KeyVolume]
	switch {
	case !ok:
		return "", fs.BadOption(KeyVolume, "missing: the GlusterFS volume name")
	case !volumeRE().MatchString(vol):
		return "", fs.BadOption(KeyVolume, "%q: a volume name has 1 to 128 letters, digits, '-' or '_'", vol)
	}
	return vol, nil
}

// parseMountOptions returns the options of the comma-separated list mo,
// empty ones dropped, each checked against the allow list.
// backup-volfile-servers is refused when servers already names backups.
func parseMountOptions(mo string, hasBackups bool) ([]string, error) {
	var out []string
	for _, opt := range strings.Split(mo, ",") {
		opt = strings.TrimSpace(opt)
		if opt == "" {
			continue
		}
		if err := checkMountOption(opt); err != nil {
			return nil, fs.BadOption(KeyMountOptions, "%v", err)
		}
		if strings.HasPrefix(opt, "backup-volfile-servers=") && hasBackups {
			return nil, fs.BadOption(KeyMountOptions, "backup-volfile-servers conflicts with the backup servers in %q", KeyServers)
		}
		out = append(out, opt)
	}
	return out, nil
}

func checkMountOption(opt string) error {
	name, value, hasValue := strings.Cut(opt, "=")
	a, ok := allowedOptions[name]
	if !ok {
		return fmt.Errorf("mount option %q is not allowed (allowed: %s)", name, strings.Join(allowedNames(), ", "))
	}
	if a.kind == flagOnly {
		if hasValue {
			return fmt.Errorf("mount option %q takes no value", name)
		}
		return nil
	}
	if !hasValue || value == "" {
		return fmt.Errorf("mount option %q needs a value", name)
	}
	switch a.kind {
	case uintValue:
		if !uintRE().MatchString(value) {
			return fmt.Errorf("mount option %s=%q: want a non-negative integer", name, value)
		}
		return checkUint(name, value, a)
	case boolValue:
		if !slices.Contains(boolWords, value) {
			return fmt.Errorf("mount option %s=%q: want one of %s", name, value, strings.Join(boolWords, ", "))
		}
	case enumValue:
		if !slices.Contains(a.enum, value) {
			return fmt.Errorf("mount option %s=%q: want one of %s", name, value, strings.Join(a.enum, ", "))
		}
	case hostList:
		for _, h := range strings.Split(value, ":") {
			if err := fs.CheckHost(h); err != nil {
				return fmt.Errorf("mount option %s: %v", name, err)
			}
		}
	}
	return nil
}

// checkUint checks the value of the uintValue option name against its
// bounds.
func checkUint(name, value string, a allowed) error {
	n, err := strconv.ParseUint(value, 10, 32)
	if err != nil {
		return fmt.Errorf("mount option %s=%q: out of range", name, value)
	}
	if a.most != 0 && (n < a.least || n > a.most) {
		return fmt.Errorf("mount option %s=%d: out of range, want %d to %d", name, n, a.least, a.most)
	}
	return nil
}

func allowedNames() []string {
	names := make([]string, 0, len(allowedOptions))
	for n := range allowedOptions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Source is the mount source, "server:/volume".
func (o Options) Source() string { return o.Servers[0] + ":/" + o.Volume }

// MountArgs are the arguments of mount(8) that mount the volume at dir.
// Every value was checked by [ParseOptions]; none goes through a shell.
func (o Options) MountArgs(dir string) []string {
	return fs.Mount{FSType: FSType, Source: o.Source(), Options: o.RecordedOptions()}.Args(dir)
}

// RecordedOptions returns the mount options of [Options.MountArgs], one
// per element, as the mount record keeps them.
func (o Options) RecordedOptions() []string {
	opts := fs.ReadOnlyOptions(o.MountOptions, o.ReadOnly)
	if len(o.Servers) > 1 {
		opts = append(opts, "backup-volfile-servers="+strings.Join(o.Servers[1:], ":"))
	}
	return opts
}

// CheckServers applies p to every server o names: the volume file server,
// its backups from "servers" and those of the mount option
// backup-volfile-servers. It returns o with each server that was allowed
// by its addresses replaced by the address checked, or an *[fs.OptionError]
// naming the option that holds the refused server.
func (o Options) CheckServers(ctx context.Context, p fs.ServerPolicy, r fs.Resolver) (Options, error) {
	out := o
	out.Servers = slices.Clone(o.Servers)
	for i, s := range o.Servers {
		conn, err := p.Check(ctx, r, s)
		if err != nil {
			return Options{}, fs.BadOption(o.serversKey(), "%v", err)
		}
		out.Servers[i] = conn
	}
	out.MountOptions = slices.Clone(o.MountOptions)
	for i, opt := range o.MountOptions {
		v, ok := strings.CutPrefix(opt, backupServersOption+"=")
		if !ok {
			continue
		}
		hosts := strings.Split(v, ":")
		for j, h := range hosts {
			conn, err := p.Check(ctx, r, h)
			if err != nil {
				return Options{}, fs.BadOption(KeyMountOptions, "%s: %v", backupServersOption, err)
			}
			hosts[j] = conn
		}
		out.MountOptions[i] = backupServersOption + "=" + strings.Join(hosts, ":")
	}
	return out, nil
}

// serversKey is the option the servers came from.
func (o Options) serversKey() string {
	if o.fromServers {
		return KeyServers
	}
	return KeyServer
}

// backupServerOption is mount.glusterfs's older single backup server, which
// a record may name besides backup-volfile-servers.
const backupServerOption = "backupvolfile-server"

// CheckRecorded reports why p does not allow a server that rec, the record
// of a GlusterFS mount made through the mount pod, connects to (nil when
// it allows them all): the hosts of the source (host:/volume, or
// host1,host2:/volume) and of backup-volfile-servers and
// backupvolfile-server, each checked by [fs.ServerPolicy.CheckRecordedServer].
func CheckRecorded(ctx context.Context, p fs.ServerPolicy, rec mountrecord.Record) error {
	hosts, _, ok := strings.Cut(rec.Source, ":")
	if !ok {
		return fmt.Errorf("source %q: want server:/volume", rec.Source)
	}
	for _, h := range strings.Split(hosts, ",") {
		if err := p.CheckRecordedServer(ctx, h); err != nil {
			return fmt.Errorf("server %s of the source %s: %w", h, rec.Source, err)
		}
	}
	for _, o := range rec.Options {
		name, v, _ := strings.Cut(o, "=")
		if name != backupServersOption && name != backupServerOption {
			continue
		}
		for _, h := range strings.Split(v, ":") {
			if err := p.CheckRecordedServer(ctx, h); err != nil {
				return fmt.Errorf("server %s of %s: %w", h, name, err)
			}
		}
	}
	return nil
}
