// Package clientargs translates mount.glusterfs's arguments into those of
// the glusterfs client. It runs in the mount pod, in the scope helper
// (cmd/mount-scope, through package scope), which mount(8) starts for every
// FUSE mount: it links the standard library and golang.org/x/sys only
// (which the helper links for its cgroups anyway), so that the helper stays
// small. Which options a GlusterFS volume may ask for is package
// glusterfs's (its allow list); this package translates what mount(8)
// passes, for the drivers and for anyone who runs `mount -t glusterfs` in
// the mount pod.
package clientargs

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// Helper is the mount helper whose arguments [Args] translates, by the
// base name mount(8) runs it under, and Program the program it would have
// started, which runs in its place.
//
// mount.glusterfs (package glusterfs-client, GlusterFS 10.3 in Debian 12)
// is a shell script that forks about twenty programs per mount (sed, cut,
// awk, grep, wc, uname, stat, getfattr) to build one command line, which it
// then runs unquoted: an option value is split at spaces and expanded as a
// file name pattern. Under a wave of mounts those forks were most of the
// mount pod's CPU. [Args] does the same translation without a shell; the
// script's checks around the mount are [CheckTarget] and [Verify].
const (
	Helper  = "mount.glusterfs"
	Program = "glusterfs"
)

// An Error is a refused call: the exit status is the script's for the
// same refusal (1, or 32 for a volume already mounted there, 2 for a
// mount over / or /tmp or a brick).
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the exit status of the helper for e.
func (e *Error) ExitCode() int { return e.Code }

func refuse(format string, a ...any) error {
	return &Error{Code: 1, Err: fmt.Errorf(format, a...)}
}

// hostNameMax is the script's HOST_NAME_MAX: a server name of 64 bytes
// or more is not a server.
const hostNameMax = 64

// logLevels are the client's log levels, as the script accepts them
// (in any case).
var logLevels = map[string]bool{"NONE": true, "CRITICAL": true, "ERROR": true, "WARNING": true, "INFO": true, "DEBUG": true, "TRACE": true}

// The script's options with a value, by the client option each becomes
// and the order the script puts them in (see [Args]).
var (
	// valued: NAME=VALUE gives --NAME=VALUE; valuedAlias: the script's
	// NAME=VALUE that gives another flag.
	valued = setOf(
		"log-level", "log-file", "direct-io-mode", "use-readdirp", "event-history",
		"reader-thread-count", "auto-invalidation", "volume-name", "attribute-timeout",
		"entry-timeout", "negative-timeout", "gid-timeout", "lru-limit", "invalidate-limit",
		"background-qlen", "congestion-threshold", "oom-score-adj", "xlator-option",
		"kernel-writeback-cache", "attr-times-granularity", "dump-fuse",
		"fuse-flush-handle-interrupt", "io-engine", "fuse-dev-eperm-ratelimit-ns",
		// Not the script's: the client's own name for fetch-attempts,
		// which package glusterfs's allow list names too.
		"volfile-max-fetch-attempts",
	)
	valuedAlias = map[string]string{"fetch-attempts": "volfile-max-fetch-attempts"}
	// flags: a NAME without a value gives --FLAG.
	flags = map[string]string{
		"ro": "read-only", "acl": "acl", "selinux": "selinux", "enable-ino32": "enable-ino32",
		"worm": "worm", "mem-accounting": "mem-accounting", "aux-gfid-mount": "aux-gfid-mount",
		"resolve-gids": "resolve-gids", "thin-client": "thin-client",
		"global-threading": "global-threading", "localtime-logging": "localtime-logging",
	}
	// kernelFlags are passed to the kernel, in --fuse-mountopts.
	kernelFlags = map[string]bool{
		"atime": true, "noatime": true, "diratime": true, "nodiratime": true,
		"relatime": true, "norelatime": true, "strictatime": true, "nostrictatime": true,
		"lazyatime": true, "nolazyatime": true, "dev": true, "nodev": true,
		"exec": true, "noexec": true, "suid": true, "nosuid": true, "auto_unmount": true,
	}
	// kernelValued are SELinux's, passed to the kernel as NAME="VALUE".
	kernelValued = map[string]bool{"context": true, "fscontext": true, "defcontext": true, "rootcontext": true}
	// ignored are accepted and dropped: rw is mount(8)'s default, auto,
	// noauto and _netdev are for the boot, the others the script does
	// not handle (it warns). defaults is not the script's (it refuses
	// it), but mount(8)'s and package glusterfs's allow list's.
	ignored = map[string]bool{
		"rw": true, "auto": true, "noauto": true, "_netdev": true, "defaults": true,
		"async": true, "sync": true, "dirsync": true, "mand": true, "nomand": true,
		"silent": true, "loud": true, "iversion": true, "noiversion": true, "nofail": true,
	}
	// The script's order of the client options it makes: first the flags,
	// then the options with values, then the volume file's source.
	flagOrder = []string{
		"read-only", "acl", "selinux", "enable-ino32", "worm", "volfile-max-fetch-attempts",
		"volfile-check", "mem-accounting", "aux-gfid-mount", "resolve-gids", "no-root-squash",
		"thin-client", "global-threading", "localtime-logging", "fopen-keep-cache",
		"halo-max-latency", "halo-max-replicas", "halo-min-replicas",
	}
	valuedOrder = []string{
		"log-level", "log-file", "direct-io-mode", "use-readdirp", "event-history",
		"reader-thread-count", "auto-invalidation", "volume-name", "attribute-timeout",
		"entry-timeout", "negative-timeout", "gid-timeout", "lru-limit", "invalidate-limit",
		"background-qlen", "congestion-threshold", "oom-score-adj", "fuse-mountopts",
		"xlator-option", "kernel-writeback-cache", "attr-times-granularity", "dump-fuse",
		"fuse-flush-handle-interrupt", "process-name", "io-engine",
	}
)

var squashWords = map[string]bool{"yes": true, "on": true, "enable": true, "true": true, "no": false, "off": false, "disable": false, "false": false}

// mount is one call's translated state.
type mount struct {
	opts        map[string]string // client option (without --) -> value ("" for a flag)
	kernel      []string          // --fuse-mountopts, in order
	processName string
	server      string // the backupvolfile-server option
	backups     string // the backup-volfile-servers option
	port        string
	transport   string
	subdir      string // the subdir-mount option
}

// Args translates `mount.glusterfs SOURCE TARGET [-sfnv] [-o OPTIONS]...`
// (as mount(8) calls helpers) into the glusterfs client's arguments, as
// mount.glusterfs does; args[0] is [Program] and the last is the absolute
// TARGET. SOURCE is either SERVERS:VOLUME[/SUBDIR] (SERVERS
// comma-separated, VOLUME with or without a leading slash; /snaps/...
// mounts read-only) or the absolute path of a volume file. The options
// are the script's (man 8 mount.glusterfs), in the script's order:
//
//   - flags (ro, acl, selinux, worm, ...) give --read-only, --acl, ...;
//     fopen-keep-cache gives --fopen-keep-cache=true, and
//     fopen-keep-cache=BOOL --fopen-keep-cache=BOOL (the script makes
//     --fopen-keep-cache==BOOL, which the client refuses);
//   - NAME=VALUE options give --NAME=VALUE (fetch-attempts
//     --volfile-max-fetch-attempts, background-qlen and the others under
//     their client names); log-level is upper-cased; halo-* give
//     --xlator-option *replicate*.halo-*=VALUE; root-squash=off (or
//     no-root-squash=on) gives --no-root-squash; process-name=NAME gives
//     --process-name fuse.NAME (plain fuse without it);
//   - the kernel's options (noatime, nodev, nosuid, auto_unmount, SELinux
//     contexts, ...) are joined into one --fuse-mountopts (the script
//     passes it twice, the same);
//   - rw, defaults, auto, noauto, _netdev, nofail and options the script
//     does not handle (sync, mand, ...) are dropped, x-* options too;
//   - every server gives --volfile-server, then backupvolfile-server and
//     the servers of backup-volfile-servers (colon-separated, an IPv6
//     address in brackets), then --volfile-server-port,
//     --volfile-server-transport, --volfile-id (VOLUME.TRANSPORT with a
//     transport) and --subdir-mount=/SUBDIR.
//
// -s, -n and -v are ignored, -t TYPE too; -f (fake) and -N (another
// namespace) are refused: the client cannot do either. Where the script
// warns and goes on, or drops a value it cannot read, Args refuses with
// the option named (an unknown option, an unknown log level, an empty
// value, a server name of 64 bytes or more, a space, a control character
// or a NUL byte anywhere): a refusal means nothing runs. `mount.glusterfs
// -V` gives `glusterfs -V`, not a mount (mount is false, target empty);
// any other call that is not a mount is refused.
func Args(argv []string) (args []string, target string, isMount bool, err error) {
	if len(argv) == 2 && (argv[1] == "-V" || argv[1] == "--version") {
		return []string{Program, "-V"}, "", false, nil
	}
	target, ok := boundary.MountHelperTarget(argv)
	if !ok {
		return nil, "", false, refuse("usage: %s SOURCE TARGET [-sfnv] [-o OPTIONS] (or -V), got %q", filepath.Base(argv[0]), argv[1:])
	}
	if bad(argv[1]) || strings.ContainsRune(target, 0) {
		return nil, "", false, refuse("source %q or target %q holds a space, a control character or a NUL byte", argv[1], argv[2])
	}
	var opts []string
	for i := 3; i < len(argv); i++ {
		switch a := argv[i]; {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(argv) {
				return nil, "", false, refuse("%s needs a value", a)
			}
			i++
			switch a {
			case "-o":
				opts = append(opts, argv[i])
			case "-N":
				return nil, "", false, refuse("-N %s: mounting in another namespace is not supported", argv[i])
			}
		case strings.HasPrefix(a, "-o"):
			opts = append(opts, a[len("-o"):])
		case len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "sfnv") == "":
			if strings.Contains(a, "f") {
				return nil, "", false, refuse("-f (fake mount) is not supported: the glusterfs client cannot record a mount without making it")
			}
		default:
			return nil, "", false, refuse("unexpected argument %q", a)
		}
	}
	m := mount{opts: map[string]string{}}
	for _, o := range strings.Split(strings.Join(opts, ","), ",") {
		if err := m.option(o); err != nil {
			return nil, "", false, err
		}
	}
	src, err := m.source(argv[1])
	if err != nil {
		return nil, "", false, err
	}
	if len(m.kernel) > 0 {
		m.opts["fuse-mountopts"] = strings.Join(m.kernel, ",")
	}
	args = []string{Program}
	for _, f := range flagOrder {
		v, ok := m.opts[f]
		switch {
		case !ok:
		case strings.HasPrefix(f, "halo-"):
			args = append(args, "--xlator-option", "*replicate*."+f+"="+v)
		case v == "":
			args = append(args, "--"+f)
		default:
			args = append(args, "--"+f+"="+v)
		}
	}
	for _, f := range valuedOrder {
		if f == "process-name" {
			args = append(args, "--process-name", "fuse"+m.processName)
		} else if v, ok := m.opts[f]; ok {
			args = append(args, "--"+f+"="+v)
		}
	}
	args = append(args, src...)
	return append(args, target), target, true, nil
}

// bad reports whether s holds what the script would split or mangle: a
// space or another control character (NUL included).
func bad(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// option reads one option of -o.
func (m *mount) option(o string) error {
	name, value, hasValue := strings.Cut(o, "=")
	switch {
	case o == "":
		// An empty entry (a,,b or a trailing comma) is no option.
		return nil
	case bad(o):
		return refuse("option %q holds a space, a control character or a NUL byte", name)
	case name == "":
		return refuse("option %q has no name", o)
	case hasValue && value == "":
		return refuse("option %q has an empty value", name)
	case strings.HasPrefix(name, "x-"):
		// Comments and other programs' options, as the script.
		return nil
	case !hasValue:
		switch {
		case flags[name] != "":
			m.opts[flags[name]] = ""
		case name == "fopen-keep-cache":
			m.opts[name] = "true"
		case kernelFlags[name]:
			m.kernel = append(m.kernel, name)
		case ignored[name]:
		default:
			return refuse("invalid option %q (man 8 mount.glusterfs lists the options)", name)
		}
		return nil
	}
	switch {
	case valued[name]:
		if name == "log-level" {
			if value = strings.ToUpper(value); !logLevels[value] {
				return refuse("option log-level: %q is no log level (NONE, CRITICAL, ERROR, WARNING, INFO, DEBUG, TRACE)", value)
			}
		}
		m.opts[name] = value
	case valuedAlias[name] != "":
		m.opts[valuedAlias[name]] = value
	case name == "fopen-keep-cache" || name == "halo-max-latency" || name == "halo-max-replicas" || name == "halo-min-replicas":
		m.opts[name] = value
	case name == "volfile-check":
		m.opts[name] = ""
	case name == "no-root-squash" || name == "root-squash":
		on, ok := squashWords[value]
		if !ok {
			return refuse("option %s: %q is not one of yes, no, on, off, enable, disable, true, false", name, value)
		}
		if on == (name == "no-root-squash") {
			m.opts["no-root-squash"] = ""
		}
	case kernelValued[name]:
		m.kernel = append(m.kernel, name+`="`+value+`"`)
	case name == "process-name":
		m.processName = "." + value
	case name == "backupvolfile-server":
		m.server = value
	case name == "backup-volfile-servers":
		m.backups = value
	case name == "server-port":
		m.port = value
	case name == "transport":
		m.transport = value
	case name == "volume-id":
		// The script reads it and then sets it from SOURCE.
	case name == "subdir-mount":
		// SOURCE's subdirectory wins.
		m.subdir = value
	default:
		return refuse("invalid option %q (man 8 mount.glusterfs lists the options)", name)
	}
	return nil
}

// source returns the client options that name where the volume file comes
// from: SOURCE and the server options read by [mount.option].
func (m *mount) source(source string) ([]string, error) {
	if strings.HasPrefix(source, "/") {
		// A volume file on this machine. (The script takes any readable
		// file; a SOURCE that is not absolute is a server's.)
		return []string{"--volfile=" + source}, nil
	}
	i := strings.LastIndexByte(source, ':')
	if i <= 0 || i == len(source)-1 {
		return nil, refuse("source %q: want SERVER[,SERVER...]:VOLUME[/SUBDIR] or the absolute path of a volume file", source)
	}
	servers, volume := source[:i], source[i+1:]
	if j := strings.IndexFunc(servers, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune(":%,.-", r))
	}); j >= 0 {
		return nil, refuse("source %q: %q may not be in a server's name", source, servers[j:j+1])
	}
	var out []string
	for _, s := range strings.Split(servers, ",") {
		if err := checkServer(source, s); err != nil {
			return nil, err
		}
		out = append(out, "--volfile-server="+s)
	}
	if m.server != "" && m.backups == "" {
		if err := checkServer("backupvolfile-server", m.server); err != nil {
			return nil, err
		}
		out = append(out, "--volfile-server="+m.server)
	}
	if m.backups != "" {
		backups, err := splitBackups(m.backups)
		if err != nil {
			return nil, err
		}
		for _, s := range backups {
			out = append(out, "--volfile-server="+s)
		}
	}
	if m.port != "" {
		out = append(out, "--volfile-server-port="+m.port)
	}
	// VOLUME, /VOLUME, VOLUME/SUBDIR, /VOLUME/SUBDIR; snaps/... is a
	// snapshot's volume, whose slashes are its name's.
	id, sub := volume, ""
	lead := ""
	if strings.HasPrefix(volume, "/") {
		lead = "/"
	}
	if first, rest, ok := strings.Cut(strings.TrimPrefix(volume, "/"), "/"); ok && first != "snaps" {
		id, sub = lead+first, rest
	}
	if id == "" || id == "/" {
		return nil, refuse("source %q names no volume", source)
	}
	if strings.HasPrefix(id, "/snaps/") {
		m.opts["read-only"] = ""
	}
	if m.transport != "" {
		id += "." + m.transport
		out = append(out, "--volfile-server-transport="+m.transport)
	}
	out = append(out, "--volfile-id="+id)
	if sub == "" {
		sub = m.subdir
	}
	if sub != "" {
		out = append(out, "--subdir-mount=/"+sub)
	}
	if v, ok := m.opts["fuse-dev-eperm-ratelimit-ns"]; ok {
		out = append(out, "--fuse-dev-eperm-ratelimit-ns="+v)
	}
	return out, nil
}

// checkServer refuses a server name that is empty or, as the script
// counts, of [hostNameMax] bytes or more (the script skips it silently).
func checkServer(where, s string) error {
	switch {
	case s == "":
		return refuse("%s: an empty server name", where)
	case len(s) >= hostNameMax:
		return refuse("%s: server name %q is longer than %d bytes", where, s, hostNameMax-1)
	}
	return nil
}

// splitBackups splits backup-volfile-servers as the script does:
// colon-separated names, an IPv6 address in brackets ([::1]:host2).
func splitBackups(list string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		inBkt bool
		sep   bool // a ':' seen inside the brackets
	)
	flush := func() error {
		if cur.Len() == 0 {
			return nil
		}
		s := cur.String()
		cur.Reset()
		if err := checkServer("backup-volfile-servers", s); err != nil {
			return err
		}
		out = append(out, s)
		return nil
	}
	for _, r := range list {
		switch {
		case r == '[':
			if inBkt {
				return nil, refuse("backup-volfile-servers %q: a '[' inside brackets", list)
			}
			inBkt, sep = true, false
		case r == ']':
			if !inBkt || !sep {
				return nil, refuse("backup-volfile-servers %q: a ']' without its '[' or an address without ':'", list)
			}
			inBkt = false
		case r == ':' && !inBkt:
			if err := flush(); err != nil {
				return nil, err
			}
		default:
			if r == ':' {
				sep = true
			}
			cur.WriteRune(r)
		}
	}
	if inBkt {
		return nil, refuse("backup-volfile-servers %q: a '[' without its ']'", list)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, refuse("backup-volfile-servers %q names no server", list)
	}
	return out, nil
}

func setOf(names ...string) map[string]bool {
	s := make(map[string]bool, len(names))
	for _, n := range names {
		s[n] = true
	}
	return s
}
