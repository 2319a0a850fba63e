package scope

import (
	"fmt"
	"path"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// The names here are checked by hand rather than with package regexp or
// Kubernetes' validation package: the mount helper (cmd/mount-scope) links
// this package and runs for every FUSE mount, and those packages'
// initialisers cost as much as the Go runtime's own start (BENCHMARKS.md).

// Name returns the scope name of a mount target: its mount key
// ([boundary.MountKey]), which also names its mount record and key file,
// so that a later process finds the scope from the target alone. Name does
// not validate target; Place does (see [ValidateTarget]).
func Name(target string) string { return boundary.MountKey(target) }

// ValidateTarget reports whether target is usable as a mount target: an
// absolute path without NUL. Its name is a hash, so a target can never reach
// outside the plugin's parent; this only refuses what cannot be a mount
// point.
func ValidateTarget(target string) error {
	switch {
	case target == "":
		return fmt.Errorf("invalid mount target %q: must not be empty", target)
	case strings.ContainsRune(target, 0):
		return fmt.Errorf("invalid mount target %q: must not contain NUL", target)
	case !path.IsAbs(target):
		return fmt.Errorf("invalid mount target %q: must be an absolute path", target)
	}
	return nil
}

// PluginDir returns the directory name of plugin's parent cgroup, below
// Config.Parent: the plugin name escaped as in the registration file names
// ([boundary.EscapePluginName]: "kubernetes.io/glusterfs" becomes
// "kubernetes.io~glusterfs"). It fails for any name
// [boundary.ValidatePluginName] refuses, so the result is always a single
// path component that is neither "." nor "..".
func PluginDir(plugin string) (string, error) {
	if err := boundary.ValidatePluginName(plugin); err != nil {
		return "", err
	}
	return boundary.EscapePluginName(plugin), nil
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// validateParent checks Config.Parent: a relative path of one or more
// components made of [A-Za-z0-9_.-], none starting with '.' or '-'.
func validateParent(parent string) error {
	if parent == "" {
		return fmt.Errorf("invalid cgroup parent %q: must not be empty", parent)
	}
	for _, c := range strings.Split(parent, "/") {
		if !cgroupName(c) {
			return fmt.Errorf("invalid cgroup parent %q: %q is not a cgroup name of [A-Za-z0-9_.-] (no leading '.' or '-', no empty component, relative)", parent, c)
		}
	}
	return nil
}

// cgroupName reports whether c matches [A-Za-z0-9_][A-Za-z0-9_.-]*.
func cgroupName(c string) bool {
	if c == "" || !alnum(c[0]) && c[0] != '_' {
		return false
	}
	for i := 0; i < len(c); i++ {
		if !alnum(c[i]) && c[i] != '_' && c[i] != '.' && c[i] != '-' {
			return false
		}
	}
	return true
}

// SliceName returns the systemd slice of plugin's scopes for a parent: the
// parent's components and the plugin name escaped as systemd escapes unit
// names (systemd-escape: "-" becomes \x2d, "/" becomes "-"), joined with "-",
// so systemd nests it below one slice per component:
// parent "mountcontainers" and plugin "kubernetes.io/glusterfs" give
// "mountcontainers-kubernetes.io-glusterfs.slice", which lives in
// mountcontainers.slice/mountcontainers-kubernetes.io.slice/.
func SliceName(parent, plugin string) (string, error) {
	if err := validateParent(parent); err != nil {
		return "", err
	}
	if err := boundary.ValidatePluginName(plugin); err != nil {
		return "", err
	}
	var parts []string
	for _, c := range strings.Split(parent, "/") {
		parts = append(parts, unitEscape(c))
	}
	for _, c := range strings.Split(plugin, "/") {
		parts = append(parts, unitEscape(c))
	}
	return strings.Join(parts, "-") + ".slice", nil
}

// unitEscape escapes one component of a unit name the way systemd-escape
// does: [A-Za-z0-9:_.] stay (but a leading '.'), everything else becomes
// \xNN.
func unitEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == ':', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}
