package scope

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// NamePrefix starts the name of every scope.
const NamePrefix = "mount-"

// scopeName matches what [Name] returns and nothing else: the only names
// List reports and Remove accepts.
var scopeName = regexp.MustCompile(`^` + NamePrefix + `[0-9a-f]{16}$`)

// parentComponent is one directory of Config.Parent.
var parentComponent = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// Name returns the scope name of a mount target: "mount-" and the first 16
// hexadecimal digits of the SHA-256 of the cleaned path, so that the same
// target always maps to the same scope and a later process can find it.
// Name does not validate target; Place does (see [ValidateTarget]).
func Name(target string) string {
	sum := sha256.Sum256([]byte(path.Clean(target)))
	return NamePrefix + hex.EncodeToString(sum[:8])
}

// ValidName reports whether name is a scope name as [Name] makes them.
func ValidName(name string) bool {
	return scopeName.MatchString(name)
}

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
// Config.Parent: the plugin name with "/" replaced by "~", as in the
// registration file names ("kubernetes.io/glusterfs" becomes
// "kubernetes.io~glusterfs"). It fails for any name
// registration.ValidatePluginName refuses, so the result is always a single
// path component that is neither "." nor "..".
func PluginDir(plugin string) (string, error) {
	name, err := registration.FileName(plugin)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(name, registration.FileSuffix), nil
}

// validateParent checks Config.Parent: a relative path of one or more
// components made of [A-Za-z0-9_.-], none starting with '.' or '-'.
func validateParent(parent string) error {
	if parent == "" {
		return fmt.Errorf("invalid cgroup parent %q: must not be empty", parent)
	}
	for _, c := range strings.Split(parent, "/") {
		if !parentComponent.MatchString(c) {
			return fmt.Errorf("invalid cgroup parent %q: %q is not a cgroup name of [A-Za-z0-9_.-] (no leading '.' or '-', no empty component, relative)", parent, c)
		}
	}
	return nil
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
	if err := registration.ValidatePluginName(plugin); err != nil {
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
