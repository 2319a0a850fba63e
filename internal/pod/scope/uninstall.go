package scope

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// pluginRemover is a [Manager] that can remove a plugin's parent.
type pluginRemover interface {
	removePlugin(plugin string) error
}

// RemovePlugin removes plugin's parent from m's hierarchies, once every
// scope in it is empty: the empty scopes, the plugin's parent (a cgroup
// directory, or a systemd slice with its limits), and above it, up to
// and including the configured parent (Config.Parent), each cgroup or
// slice that no other plugin uses. It fails with an error wrapping
// [ErrPopulated], and removes nothing, while a scope has processes. A
// plugin with no parent is no error. It is the node's uninstall; the
// mount pods never call it.
func RemovePlugin(m Manager, plugin string) error {
	r, ok := m.(pluginRemover)
	if !ok {
		return fmt.Errorf("remove the scopes of plugin %s: the %s backend cannot", plugin, m.Backend())
	}
	if err := r.removePlugin(plugin); err != nil {
		return fmt.Errorf("remove the scopes of plugin %s: %w", plugin, err)
	}
	return nil
}

func (c *cgroupfs) removePlugin(plugin string) error {
	scopes, err := c.List(plugin)
	if err != nil {
		return err
	}
	// Every hierarchy's processes, not List's one: nothing is removed
	// while any scope has one anywhere.
	err = inCgroupNS(c.ns, func() error {
		for _, s := range scopes {
			for _, dir := range s.Paths {
				pids, err := readPIDs(filepath.Join(dir, "cgroup.procs"))
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				if len(pids) > 0 {
					return fmt.Errorf("%w: %v in %s", ErrPopulated, pids, dir)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, s := range scopes {
		if err := c.Remove(plugin, s.Name); err != nil {
			return err
		}
	}
	prel, err := c.pluginRel(plugin)
	if err != nil {
		return err
	}
	return inCgroupNS(c.ns, func() error {
		for _, rel := range []string{prel, c.cfg.Parent} {
			for _, h := range c.layout.Hierarchies {
				err := c.rmdir(filepath.Join(h.Path, rel))
				switch {
				case err == nil, errors.Is(err, fs.ErrNotExist):
				case rel == c.cfg.Parent && (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EBUSY)):
					// Another plugin's parent is in it.
				case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EBUSY):
					return fmt.Errorf("%w (or cgroups not of this plugin's scopes): %w", ErrPopulated, err)
				default:
					return err
				}
			}
		}
		return nil
	})
}

func (s *systemd) removePlugin(plugin string) error {
	slice, err := SliceName(s.cfg.Parent, plugin)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*s.cfg.Timeout)
	defer cancel()
	// The plugin's slice, then each slice above it up to the parent's own
	// while no other slice is below it.
	top := strings.Count(s.cfg.Parent, "/") + 1
	name := strings.TrimSuffix(slice, ".slice")
	for parts := strings.Split(name, "-"); len(parts) >= top; parts = parts[:len(parts)-1] {
		unit := strings.Join(parts, "-") + ".slice"
		if unit != slice {
			others, err := s.conn.ListUnitsByPatternsContext(ctx, []string{"active", "activating", "deactivating", "reloading"}, []string{strings.TrimSuffix(unit, ".slice") + "-*.slice"})
			if err != nil {
				return fmt.Errorf("list the slices below %s: %w", unit, dbusError(err))
			}
			if len(others) > 0 {
				return nil
			}
		}
		procs, ok, err := s.processes(ctx, unit)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if len(procs) > 0 {
			var pids []int
			for _, p := range procs {
				pids = append(pids, int(p.PID))
			}
			return fmt.Errorf("%w: %v in %s", ErrPopulated, pids, slicePath(unit))
		}
		if err := s.stop(ctx, unit); err != nil {
			return fmt.Errorf("stop %s: %w", unit, err)
		}
	}
	return nil
}

// stop stops unit and waits for the job; a unit systemd does not know is
// no error.
func (s *systemd) stop(ctx context.Context, unit string) error {
	done := make(chan string, 1)
	_, err := s.conn.StopUnitContext(ctx, unit, "fail", done)
	if dbusErrorName(err) == errNoSuchUnit {
		return nil
	}
	if err != nil {
		return dbusError(err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return fmt.Errorf("job %s", result)
		}
	case <-ctx.Done():
		return fmt.Errorf("waiting for the job: %w", ctx.Err())
	}
	return nil
}
