package flexvolume

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Option keys of a volume's flexVolume.options that the driver reads.
const (
	// KeyServer is one GlusterFS server: a host name or an IPv4 address,
	// allowed by the administrator's list ([ServerPolicy]).
	KeyServer = "server"
	// KeyServers is a comma-separated list of servers; the first one
	// serves the volume file, the others are its backups.
	KeyServers = "servers"
	// KeyVolume is the GlusterFS volume name.
	KeyVolume = "volume"
	// KeyMountOptions is a comma-separated list of mount options, each
	// from an allow list (see [ParseOptions]).
	KeyMountOptions = "mountOptions"
)

// Keys the kubelet adds to the options.
const (
	KeyFSType    = "kubernetes.io/fsType"
	KeyReadWrite = "kubernetes.io/readwrite"
	// kubeletPrefix starts every key the kubelet adds (pod name,
	// namespace and UID, service account, secrets, fsGroup, ...).
	kubeletPrefix = "kubernetes.io/"
)

// FSType is the file system type the driver mounts.
const FSType = "glusterfs"

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

// OptionError is a bad option: Field names it, as the user wrote it.
type OptionError struct {
	Field  string
	Reason string
}

// Error says which field is bad and why.
func (e *OptionError) Error() string {
	return fmt.Sprintf("invalid option %q: %s", e.Field, e.Reason)
}

func badOption(field, format string, args ...any) error {
	return &OptionError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

var (
	volumeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	labelRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	uintRE   = regexp.MustCompile(`^[0-9]{1,10}$`)
	// numericLabelRE matches what inet_aton(3) may take as a number.
	numericLabelRE = regexp.MustCompile(`^([0-9]+|0[xX][0-9a-fA-F]*)$`)
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
// Errors are *[OptionError] values naming the field.
func ParseOptions(raw []byte) (Options, error) {
	vals, err := decodeOptions(raw)
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
	o.Pod = podOf(vals)
	return o, nil
}

// GlusterFS is the [Filesystem] of GlusterFS volumes, mounted with
// mount.glusterfs: see [ParseOptions] for the options.
type GlusterFS struct{}

// Name is "glusterfs".
func (GlusterFS) Name() string { return FSType }

// Mount parses vals as [ParseOptions] does and checks the servers with
// [Options.CheckServers].
func (GlusterFS) Mount(ctx context.Context, vals map[string]string, env Env) (Mount, error) {
	o, err := parseGlusterfs(vals)
	if err != nil {
		return Mount{}, err
	}
	if o, err = o.CheckServers(ctx, env.Servers, env.Resolver); err != nil {
		return Mount{}, err
	}
	return Mount{FSType: FSType, Source: o.Source(), Options: o.RecordedOptions(), Pod: o.Pod}, nil
}

// Keys the kubelet adds that name the pod a volume is mounted for.
const (
	KeyPodNamespace = "kubernetes.io/pod.namespace"
	KeyPodName      = "kubernetes.io/pod.name"
	KeyPodUID       = "kubernetes.io/pod.uid"
)

// podOf returns the pod the kubelet names in vals, or nil when it names
// none, or one that is not valid (it is only reported on, never trusted
// for anything else).
func podOf(vals map[string]string) *mountrecord.Pod {
	p := mountrecord.Pod{Namespace: vals[KeyPodNamespace], Name: vals[KeyPodName], UID: vals[KeyPodUID]}
	if p.Validate() != nil {
		return nil
	}
	return &p
}

// decodeOptions decodes one JSON object whose values are all strings.
func decodeOptions(raw []byte) (map[string]string, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("options are not a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("options: trailing data after the JSON object")
	}
	vals := make(map[string]string, len(fields))
	for _, k := range sortedKeys(fields) {
		var s string
		if err := json.Unmarshal(fields[k], &s); err != nil {
			return nil, badOption(k, "must be a string")
		}
		vals[k] = s
	}
	return vals, nil
}

// checkKeys refuses unknown keys and checks the kubelet's fsType and
// readwrite; it returns whether the kubelet asks for a read-only mount.
// Keys are checked in order, so that the error is always the same.
func checkKeys(vals map[string]string) (readOnly bool, err error) {
	for _, k := range sortedKeys(vals) {
		if handled, err := checkCommonKeys(FSType, k, vals[k], &readOnly); err != nil {
			return false, err
		} else if handled {
			continue
		}
		switch k {
		case KeyServer, KeyServers, KeyVolume, KeyMountOptions:
		default:
			return false, badOption(k, "unknown option (known: %s, %s, %s, %s)", KeyServer, KeyServers, KeyVolume, KeyMountOptions)
		}
	}
	return readOnly, nil
}

// parseServers returns the servers of server or servers (exactly one of
// them must be set), each checked with checkHost.
func parseServers(vals map[string]string) ([]string, error) {
	server, hasServer := vals[KeyServer]
	servers, hasServers := vals[KeyServers]
	switch {
	case hasServer && hasServers:
		return nil, badOption(KeyServers, "give either %q or %q, not both", KeyServer, KeyServers)
	case hasServer:
		if err := checkHost(server); err != nil {
			return nil, badOption(KeyServer, "%v", err)
		}
		return []string{server}, nil
	case hasServers:
		var out []string
		for _, s := range strings.Split(servers, ",") {
			s = strings.TrimSpace(s)
			if err := checkHost(s); err != nil {
				return nil, badOption(KeyServers, "%v", err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, badOption(KeyServer, "missing: the GlusterFS server's host name or IPv4 address")
}

// parseVolume returns the checked volume name.
func parseVolume(vals map[string]string) (string, error) {
	vol, ok := vals[KeyVolume]
	switch {
	case !ok:
		return "", badOption(KeyVolume, "missing: the GlusterFS volume name")
	case !volumeRE.MatchString(vol):
		return "", badOption(KeyVolume, "%q: a volume name has 1 to 128 letters, digits, '-' or '_'", vol)
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
			return nil, badOption(KeyMountOptions, "%v", err)
		}
		if strings.HasPrefix(opt, "backup-volfile-servers=") && hasBackups {
			return nil, badOption(KeyMountOptions, "backup-volfile-servers conflicts with the backup servers in %q", KeyServers)
		}
		out = append(out, opt)
	}
	return out, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// checkHost accepts a host name (see [checkHostName]) or an IPv4 address
// in dotted-quad form. Anything with a ':' is refused: the glusterfs mount
// source is "host:/volume" and backup servers are ':'-separated, so a ':'
// would change what the client parses, and an IPv4-mapped IPv6 address
// (::ffff:127.0.0.1) would slip past checks made on IPv4 addresses.
func checkHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty server name")
	}
	if strings.ContainsAny(h, ":[]") {
		if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && a.Is4In6() {
			return fmt.Errorf("%q: IPv4-mapped IPv6 addresses are not supported; write the IPv4 address", h)
		} else if err == nil {
			return fmt.Errorf("%q: IPv6 addresses are not supported; use a host name or an IPv4 address", h)
		}
		return fmt.Errorf("%q: ':' is not allowed in a server name (no port, no IPv6 literal)", h)
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
		return nil
	}
	return checkHostName(h)
}

// checkHostName accepts a host name of RFC 1123 labels whose last label is
// not numeric: "127.1", "2130706433" and "0x7f.1" are not dotted-quad
// addresses, but the C library's resolver reads them as 127.0.0.1.
func checkHostName(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("%q: host name longer than 253 characters", h)
	}
	labels := strings.Split(strings.TrimSuffix(h, "."), ".")
	for _, l := range labels {
		if !labelRE.MatchString(l) {
			return fmt.Errorf("%q is not a host name or IPv4 address", h)
		}
	}
	if last := labels[len(labels)-1]; numericLabelRE.MatchString(last) {
		return fmt.Errorf("%q: a host name's last label cannot be numeric (an IPv4 address is written as four decimal numbers)", h)
	}
	return nil
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
		if !uintRE.MatchString(value) {
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
			if err := checkHost(h); err != nil {
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
	return Mount{FSType: FSType, Source: o.Source(), Options: o.RecordedOptions()}.Args(dir)
}

// RecordedOptions returns the mount options of [Options.MountArgs], one
// per element, as the mount record keeps them.
func (o Options) RecordedOptions() []string {
	opts := readOnlyOptions(o.MountOptions, o.ReadOnly)
	if len(o.Servers) > 1 {
		opts = append(opts, "backup-volfile-servers="+strings.Join(o.Servers[1:], ":"))
	}
	return opts
}
