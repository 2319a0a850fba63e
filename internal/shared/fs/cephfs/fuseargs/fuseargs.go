// Package fuseargs translates mount.fuse.ceph's arguments into
// ceph-fuse's. It runs in the mount pod, in the scope helper
// (cmd/mount-scope, through package scope), which mount(8) starts for every
// FUSE mount: it links the standard library only, so that the helper stays
// small. What a CephFS volume's options are, and which mount(8) options
// they make, is package cephfs's.
package fuseargs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// Helper is the mount helper whose arguments [Args] translates, by the
// base name mount(8) runs it under, and Program the program it would have
// started, which runs in its place.
//
// mount.fuse.ceph (package ceph-fuse, Ceph 16) is a Python script that
// joins its options and the mount point into one command line and runs it
// with Popen(command, shell=True): an option value or a mount point with
// shell syntax in it runs as a shell command, as root, in the mount pod. It
// also exits 0 when ceph-fuse fails, so mount(8) and the kubelet would take
// a failed mount for a mounted volume. Its translation is small, so it is
// done here, argument by argument, and ceph-fuse's exit status is mount's.
const (
	Helper  = "mount.fuse.ceph"
	Program = "ceph-fuse"
)

// dropped are the mount options mount.fuse.ceph (16.2.15) does not pass
// on to ceph-fuse: libfuse refuses them.
var dropped = map[string]bool{"defaults": true, "noauto": true, "_netdev": true, "nofail": true}

// Args translates `mount.fuse.ceph SOURCE TARGET [-sfnv] [-o OPTIONS]...`
// (as mount(8) calls helpers) into `ceph-fuse [--NAME=VALUE...] TARGET [-o
// FUSE-OPTIONS]`, as mount.fuse.ceph does:
//
//   - an option ceph.NAME=VALUE becomes --NAME=VALUE, ceph.NAME --NAME;
//   - the other options, minus defaults, noauto, _netdev and nofail, are
//     passed on, in their order (the script's order is random: a set), as
//     one -o after the mount point;
//   - SOURCE is ignored unless it holds a '=': the old form
//     `id=admin,conf=/etc/ceph/ceph.conf` gives --id=admin
//     --conf=/etc/ceph/ceph.conf, before those of the ceph. options (the
//     script then drops the ceph. options into -o instead, where libfuse
//     refuses them);
//   - -s, -n and -v (sloppy, no mtab, verbose) are ignored, -t TYPE too;
//     -f (fake: record a mount without mounting) and -N (another mount
//     namespace) are refused: ceph-fuse cannot do either.
//
// argv[0] is the helper's name; args[0] is [Program]. mount is false for a
// call that is not a mount (no scope); target, the absolute mount point,
// is then empty. An empty value (ceph.id=, an empty SOURCE entry) or a NUL
// byte anywhere is refused with the option named, and a refusal means
// nothing runs. `mount.fuse.ceph -V` (or --version) gives `ceph-fuse
// --version`, not a mount; any other call that is not a mount is refused:
// nothing but a mount or a version is ever passed to ceph-fuse.
func Args(argv []string) (args []string, target string, mount bool, err error) {
	if len(argv) == 2 && (argv[1] == "-V" || argv[1] == "--version") {
		return []string{Program, "--version"}, "", false, nil
	}
	target, ok := boundary.MountHelperTarget(argv)
	if !ok {
		return nil, "", false, fmt.Errorf("usage: %s SOURCE TARGET [-sfnv] [-o OPTIONS] (or -V), got %q", filepath.Base(argv[0]), argv[1:])
	}
	if strings.ContainsRune(argv[1], 0) || strings.ContainsRune(target, 0) {
		return nil, "", false, fmt.Errorf("source %q or target %q holds a NUL byte", argv[1], argv[2])
	}
	var opts []string
	for i := 3; i < len(argv); i++ {
		switch a := argv[i]; {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(argv) {
				return nil, "", false, fmt.Errorf("%s needs a value", a)
			}
			i++
			switch a {
			case "-o":
				opts = append(opts, argv[i])
			case "-N":
				return nil, "", false, fmt.Errorf("-N %s: mounting in another namespace is not supported", argv[i])
			}
		case strings.HasPrefix(a, "-o"):
			opts = append(opts, a[len("-o"):])
		case len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "sfnv") == "":
			if strings.Contains(a, "f") {
				return nil, "", false, errors.New("-f (fake mount) is not supported: ceph-fuse cannot record a mount without making it")
			}
		default:
			return nil, "", false, fmt.Errorf("unexpected argument %q", a)
		}
	}
	args = []string{Program}
	// The old form: SOURCE is the ceph options themselves.
	if source := argv[1]; strings.Contains(source, "=") {
		for _, o := range strings.Split(source, ",") {
			if name, value, _ := strings.Cut(o, "="); name == "" || value == "" {
				return nil, "", false, fmt.Errorf("source %q: option %q has no name or an empty value", source, o)
			}
			args = append(args, "--"+o)
		}
	}
	var fuse []string
	for _, o := range strings.Split(strings.Join(opts, ","), ",") {
		name, value, hasValue := strings.Cut(o, "=")
		switch {
		case o == "":
			// An empty entry (a,,b or a trailing comma) is no option.
		case strings.ContainsRune(o, 0):
			return nil, "", false, fmt.Errorf("option %q holds a NUL byte", name)
		case hasValue && value == "":
			return nil, "", false, fmt.Errorf("option %q has an empty value", name)
		case name == "" || name == "ceph.":
			return nil, "", false, fmt.Errorf("option %q has no name", o)
		case strings.HasPrefix(name, "ceph."):
			args = append(args, "--"+strings.TrimPrefix(o, "ceph."))
		case dropped[o]:
		default:
			fuse = append(fuse, o)
		}
	}
	args = append(args, target)
	if len(fuse) > 0 {
		args = append(args, "-o", strings.Join(fuse, ","))
	}
	return args, target, true, nil
}
