package registrar

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	rbdfs "github.com/mountcontainers/mountcontainers/internal/shared/fs/rbd"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// DefaultResyncPeriod is how often the daemon re-reads all its
// registrations even without a change event.
const DefaultResyncPeriod = time.Minute

// Config is what a mount pod registers and how.
type Config struct {
	// Pod names this pod's container: the content of every registration.
	Pod registration.Registration
	// Plugins are the volume plugins to register, e.g. "kubernetes.io/rbd".
	// At least one is required; duplicates are ignored.
	Plugins []string
	// Dir is the registration directory (registration.DefaultDir if empty).
	Dir string
	// RequiredTools are the executables that must be found before
	// registering: bare names are looked up in SearchPath, names with a "/"
	// are checked as they are. Empty names are ignored, and so are the
	// tools that only a plugin this pod does not serve runs ([PluginTools]).
	RequiredTools []string
	// SearchPath is the colon-separated list of directories in which to
	// look for RequiredTools, like $PATH; empty means the process's $PATH.
	SearchPath string
	// Logger receives the daemon's log (slog.Default() if nil).
	Logger *slog.Logger
	// Debounce is how long the daemon lets a burst of changes gather before
	// reading the files again (registration.DefaultDebounce if zero).
	Debounce time.Duration
	// MaxDelay is the longest pause between two readings while the
	// directory is busy: under a storm the daemon reacts at most once per
	// MaxDelay (registration.DefaultMaxDelay if zero).
	MaxDelay time.Duration
	// ResyncPeriod is how often every registration is re-read without an
	// event (DefaultResyncPeriod if zero).
	ResyncPeriod time.Duration
	// Observer, when set, is told of each plugin's registration state and
	// of the daemon's repairs (the mount pod's metrics).
	Observer Observer
}

// PluginTools are, for each volume plugin that has some, the tools that
// only its mounts run. A pod that serves none of a tool's plugins does not
// require it, whatever RequiredTools lists: one image lists every tool it
// may carry, and an image for a platform that lacks one plugin's tools
// still serves the others (Debian builds no ceph-fuse for arm64). A pod
// that serves the plugin requires them as listed.
var PluginTools = map[string][]string{
	rbdfs.Plugin:     rbdfs.Tools,
	glusterfs.Plugin: glusterfs.Tools,
	cephfs.Plugin:    cephfs.Tools,
}

// otherPluginsTool reports whether tool is one of [PluginTools] and none
// of its plugins is among plugins.
func otherPluginsTool(tool string, plugins []string) bool {
	owned := false
	for plugin, tools := range PluginTools {
		if slices.Contains(tools, tool) {
			if slices.Contains(plugins, plugin) {
				return false
			}
			owned = true
		}
	}
	return owned
}

// normalize validates c and returns a copy with defaults filled in, the
// plugins sorted and de-duplicated and empty tool names dropped.
func (c Config) normalize() (Config, error) {
	var errs []error
	if err := c.Pod.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("pod: %w", err))
	}
	plugins := slices.Clone(c.Plugins)
	for i, p := range plugins {
		plugins[i] = strings.TrimSpace(p)
	}
	plugins = slices.DeleteFunc(plugins, func(p string) bool { return p == "" })
	slices.Sort(plugins)
	plugins = slices.Compact(plugins)
	if len(plugins) == 0 {
		errs = append(errs, errors.New("no plugin to register"))
	}
	for _, p := range plugins {
		if err := registration.ValidatePluginName(p); err != nil {
			errs = append(errs, err)
		}
	}
	c.Plugins = plugins
	var tools []string
	for _, t := range c.RequiredTools {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(tools, t) && !otherPluginsTool(t, plugins) {
			tools = append(tools, t)
		}
	}
	c.RequiredTools = tools
	if c.Dir == "" {
		c.Dir = registration.DefaultDir
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Debounce <= 0 {
		c.Debounce = registration.DefaultDebounce
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = registration.DefaultMaxDelay
	}
	c.MaxDelay = max(c.MaxDelay, c.Debounce)
	if c.ResyncPeriod <= 0 {
		c.ResyncPeriod = DefaultResyncPeriod
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("invalid configuration: %w", err)
	}
	return c, nil
}
