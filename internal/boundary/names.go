package boundary

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// MountKeyPrefix starts every mount key.
const MountKeyPrefix = "mount-"

// mountKeyDigits is the number of hexadecimal digits of a mount key.
const mountKeyDigits = 16

// MountKey returns the key of a mount target: "mount-" and the first 16
// hexadecimal digits of the SHA-256 of the cleaned path, so that the same
// target, however written, always has the same key, and a key is always
// one path component. It names the target's mount record, its FUSE
// daemon's scope and its key file. It does not validate target.
func MountKey(target string) string {
	sum := sha256.Sum256([]byte(path.Clean(target)))
	return MountKeyPrefix + hex.EncodeToString(sum[:mountKeyDigits/2])
}

// ValidMountKey reports whether name is a key as [MountKey] makes them.
func ValidMountKey(name string) bool {
	hash, ok := strings.CutPrefix(name, MountKeyPrefix)
	if !ok || len(hash) != mountKeyDigits {
		return false
	}
	for i := 0; i < len(hash); i++ {
		if c := hash[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// PluginNameSeparator stands for the "/" of a plugin name in a path
// component.
const PluginNameSeparator = "~"

// EscapePluginName returns plugin as one path component, its "/" as "~"
// ("kubernetes.io/glusterfs" becomes "kubernetes.io~glusterfs"), as the
// kubelet names a plugin's directories. For a name [ValidatePluginName]
// accepts, the result is neither "." nor "..", and [UnescapePluginName]
// gives the name back.
func EscapePluginName(plugin string) string {
	return strings.ReplaceAll(plugin, "/", PluginNameSeparator)
}

// UnescapePluginName is the reverse of [EscapePluginName]; the caller
// validates the result.
func UnescapePluginName(component string) string {
	return strings.ReplaceAll(component, PluginNameSeparator, "/")
}

// ValidatePluginName reports whether plugin is usable as a volume plugin
// name: a Kubernetes qualified name, an optional DNS subdomain prefix and
// "/", then 1 to 63 characters of [A-Za-z0-9._-] starting and ending with a
// letter or digit. Such a name has no NUL, no "~", no "..", no leading "."
// and at most one "/", so that its escape is one path component that
// cannot leave a directory. The error quotes the name.
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
