package registration

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

const (
	// DefaultDir is where the kubelet and volume hosts look for registrations.
	DefaultDir = "/var/lib/kubelet/plugin-containers"

	// FileSuffix ends the name of every registration file.
	FileSuffix = ".json"
)

// ValidatePluginName reports whether name is usable as a volume plugin name:
// a Kubernetes qualified name (an optional DNS subdomain prefix and "/", then
// at most 63 characters of [A-Za-z0-9._-] starting and ending with an
// alphanumeric character). Anything that could leave the registration
// directory (a leading dot, "..", "~", NUL, a second "/") is refused. The
// error quotes the name. It is the rule every process of the project
// applies to a plugin name.
func ValidatePluginName(name string) error { return boundary.ValidatePluginName(name) }

// FileName returns the base name of the registration file of plugin:
// "kubernetes.io/glusterfs" becomes "kubernetes.io~glusterfs.json".
func FileName(plugin string) (string, error) {
	if err := ValidatePluginName(plugin); err != nil {
		return "", err
	}
	return boundary.EscapePluginName(plugin) + FileSuffix, nil
}

// PluginFromFileName is the reverse of [FileName]. It fails for dotfiles,
// names without the suffix and names that do not map back to a valid plugin.
func PluginFromFileName(base string) (string, error) {
	if base != filepath.Base(base) || strings.HasPrefix(base, ".") || !strings.HasSuffix(base, FileSuffix) {
		return "", fmt.Errorf("%q is not a registration file name", base)
	}
	plugin := boundary.UnescapePluginName(strings.TrimSuffix(base, FileSuffix))
	if err := ValidatePluginName(plugin); err != nil {
		return "", fmt.Errorf("registration file name %q: %w", base, err)
	}
	return plugin, nil
}

// Path returns the registration file of plugin in dir.
func Path(dir, plugin string) (string, error) {
	name, err := FileName(plugin)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}
