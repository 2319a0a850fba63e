package scope

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// The names here are checked by hand rather than with package regexp or
// Kubernetes' validation package: the mount helper (cmd/mount-scope) links
// this package and runs for every FUSE mount, and those packages'
// initialisers cost as much as the Go runtime's own start (BENCHMARKS.md).

// NamePrefix starts the name of every scope.
const NamePrefix = "mount-"

// hashDigits is the number of hexadecimal digits of a scope name.
const hashDigits = 16

// Name returns the scope name of a mount target: "mount-" and the first 16
// hexadecimal digits of the SHA-256 of the cleaned path, so that the same
// target always maps to the same scope and a later process can find it.
// Name does not validate target; Place does (see [ValidateTarget]).
func Name(target string) string {
	sum := sha256.Sum256([]byte(path.Clean(target)))
	return NamePrefix + hex.EncodeToString(sum[:hashDigits/2])
}

// ValidName reports whether name is a scope name as [Name] makes them:
// the only names List reports and Remove accepts.
func ValidName(name string) bool {
	hash, ok := strings.CutPrefix(name, NamePrefix)
	if !ok || len(hash) != hashDigits {
		return false
	}
	for i := 0; i < len(hash); i++ {
		if c := hash[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
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
// "kubernetes.io~glusterfs"). It fails for any name [ValidatePluginName]
// refuses, so the result is always a single path component that is neither
// "." nor "..".
func PluginDir(plugin string) (string, error) {
	if err := ValidatePluginName(plugin); err != nil {
		return "", err
	}
	return strings.ReplaceAll(plugin, "/", "~"), nil
}

// ValidatePluginName accepts exactly the names registration.ValidatePluginName
// accepts (a test holds the two to each other): a Kubernetes qualified name,
// an optional DNS subdomain prefix and "/", then 1 to 63 characters of
// [A-Za-z0-9._-] starting and ending with a letter or digit. Such a name has
// no NUL, no "~", no "..", no leading "." and at most one "/". The error
// quotes the name.
func ValidatePluginName(plugin string) error {
	prefix, name, hasPrefix := strings.Cut(plugin, "/")
	if !hasPrefix {
		prefix, name = "", plugin
	}
	var why string
	switch {
	case plugin == "":
		why = "must not be empty"
	case strings.Contains(plugin, ".."):
		why = "must not contain '..'"
	case strings.Contains(name, "/"):
		why = "must have at most one '/'"
	case hasPrefix && !dnsSubdomain(prefix):
		why = "the part before '/' must be a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253 characters)"
	case !qualifiedNamePart(name):
		why = "the name part must be 1 to 63 characters of [A-Za-z0-9._-], starting and ending with a letter or digit"
	default:
		return nil
	}
	return fmt.Errorf("invalid plugin name %q: %s", plugin, why)
}

// qualifiedNamePart reports whether s matches ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
// and has at most 63 characters.
func qualifiedNamePart(s string) bool {
	if len(s) == 0 || len(s) > 63 || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// dnsSubdomain reports whether s is an RFC 1123 subdomain: at most 253
// characters, dot-separated labels of [a-z0-9-] that start and end with
// [a-z0-9].
func dnsSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) == 0 || !lowerAlnum(label[0]) || !lowerAlnum(label[len(label)-1]) {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !lowerAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func alnum(c byte) bool      { return lowerAlnum(c) || c >= 'A' && c <= 'Z' }
func lowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

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
	if err := ValidatePluginName(plugin); err != nil {
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
