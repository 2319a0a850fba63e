package scope

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// The systemd backend's scopes report their end as the cgroupfs backend's
// do, wherever systemd tracks its units in a cgroup2 hierarchy (cgroup v2,
// or the "unified" hierarchy of a hybrid node): each scope unit's cgroup
// there has a cgroup.events file, rewritten ("populated 0") when its last
// process exits, after which systemd, CollectMode=inactive-or-failed,
// removes the cgroup. The unit's cgroup is the slice's path
// ([slicePath]) below the hierarchy's root, as the mount pod sees it
// through Config.CgroupRoot, the host's cgroup file system.

// v2Root returns the cgroup2 hierarchy under root: root itself (cgroup v2)
// or root/unified (hybrid); "" without one.
func v2Root(root string) string {
	for _, dir := range []string{root, filepath.Join(root, "unified")} {
		if fi, err := os.Stat(filepath.Join(dir, "cgroup.controllers")); err == nil && fi.Mode().IsRegular() {
			return dir
		}
	}
	return ""
}

// EventFiles implements [EventSource]: the cgroup.events file of every
// scope unit in plugin's slice, sorted. It lists one directory.
func (s *systemd) EventFiles(plugin string) ([]string, error) {
	if s.v2 == "" {
		return nil, nil
	}
	dir, err := s.EventDir(plugin)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // no scope yet: systemd makes the slice with the first
	}
	if err != nil {
		return nil, fmt.Errorf("list the scopes' cgroup events of plugin %s: %w", plugin, err)
	}
	var files []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".scope")
		if e.IsDir() && ok && boundary.ValidMountKey(name) {
			files = append(files, filepath.Join(dir, e.Name(), "cgroup.events"))
		}
	}
	return files, nil
}

// EventDir implements [EventSource]: plugin's slice in the cgroup2
// hierarchy.
func (s *systemd) EventDir(plugin string) (string, error) {
	if s.v2 == "" {
		return "", fmt.Errorf("no cgroup2 hierarchy: %w", fs.ErrNotExist)
	}
	slice, err := SliceName(s.cfg.Parent, plugin)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.v2, slicePath(slice)), nil
}

// RemovalIsExit implements [RemovalIsExit]: systemd removes a scope
// unit's cgroup once its last process has exited.
func (s *systemd) RemovalIsExit() bool { return true }

// RemovalIsExit is an [EventSource] whose scopes' cgroups go away by
// themselves once their last process exited (systemd's units), so that
// a watched cgroup.events file's removal reports an exit too; the
// cgroupfs backend's go only when a pass removes them.
type RemovalIsExit interface {
	RemovalIsExit() bool
}
