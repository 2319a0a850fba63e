package registration

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// DefaultDir is where the kubelet and volume hosts look for registrations.
	DefaultDir = "/var/lib/kubelet/plugin-containers"

	// FileSuffix ends the name of every registration file.
	FileSuffix = ".json"

	// separator replaces the "/" of a plugin name in its file name.
	separator = "~"
)

// ValidatePluginName reports whether name is usable as a volume plugin name:
// a Kubernetes qualified name (an optional DNS subdomain prefix and "/", then
// at most 63 characters of [A-Za-z0-9._-] starting and ending with an
// alphanumeric character). Anything that could leave the registration
// directory (a leading dot, "..", "~", NUL, a second "/") is refused. The
// error quotes the name.
func ValidatePluginName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("invalid plugin name %q: must not be empty", name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("invalid plugin name %q: must not contain NUL", name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("invalid plugin name %q: must not start with '.'", name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("invalid plugin name %q: must not contain '..'", name)
	case strings.Contains(name, separator):
		return fmt.Errorf("invalid plugin name %q: must not contain %q", name, separator)
	}
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return fmt.Errorf("invalid plugin name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// FileName returns the base name of the registration file of plugin:
// "kubernetes.io/glusterfs" becomes "kubernetes.io~glusterfs.json".
func FileName(plugin string) (string, error) {
	if err := ValidatePluginName(plugin); err != nil {
		return "", err
	}
	return strings.ReplaceAll(plugin, "/", separator) + FileSuffix, nil
}

// PluginFromFileName is the reverse of [FileName]. It fails for dotfiles,
// names without the suffix and names that do not map back to a valid plugin.
func PluginFromFileName(base string) (string, error) {
	if base != filepath.Base(base) || strings.HasPrefix(base, ".") || !strings.HasSuffix(base, FileSuffix) {
		return "", fmt.Errorf("%q is not a registration file name", base)
	}
	plugin := strings.ReplaceAll(strings.TrimSuffix(base, FileSuffix), separator, "/")
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
