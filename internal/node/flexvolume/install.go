package flexvolume

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/shared/atomicfile"
)

// DefaultDriver is the driver directory name the mount pod installs
// ([boundary.DefaultFlexvolumeDriver]).
const DefaultDriver = boundary.DefaultFlexvolumeDriver

// DefaultPluginDir is the kubelet's default Flexvolume directory.
const DefaultPluginDir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"

// driverOrDefault returns dirName, or [DefaultDriver] when it is empty.
func driverOrDefault(dirName string) string {
	if dirName == "" {
		return DefaultDriver
	}
	return dirName
}

// InstallOptions says what [Install] places.
type InstallOptions struct {
	// PluginDir is the kubelet's Flexvolume directory.
	PluginDir string
	// Driver is the driver directory name, <vendor>~<driver>; default
	// [DefaultDriver].
	Driver string
	// Source is the driver binary to copy.
	Source string
	// Settings are written next to the driver.
	Settings Settings
}

// Install places the driver at PluginDir/Driver/<driver> with its settings
// next to it (<driver>.json), the way the Flexvolume deployment design
// prescribes: each file is written under a dot-name in the same directory,
// synced, and renamed into place, and the directory is synced. The kubelet's
// prober ignores dot-names, so it only ever sees a complete file, and a
// running call keeps the old binary while a new one replaces it. The
// settings are placed first, so the first probe of the driver already finds
// them. A directory or symbolic link where a file belongs is an error, not
// something to delete. The plugin directory and the driver's directory
// are created if missing, and refused unless each is a directory (not a
// symbolic link) owned by root and not writable by group or others: the
// kubelet runs as root whatever it finds there. Install returns the
// executable's path.
func Install(o InstallOptions) (string, error) {
	o.Driver = driverOrDefault(o.Driver)
	exe, _, err := boundary.SplitFlexvolumeDriver(o.Driver)
	if err != nil {
		return "", fmt.Errorf("install flexvolume driver: %w", err)
	}
	if o.PluginDir == "" || !filepath.IsAbs(o.PluginDir) {
		return "", fmt.Errorf("install flexvolume driver: plugin directory %q is not absolute", o.PluginDir)
	}
	if err := o.Settings.Validate(); err != nil {
		return "", fmt.Errorf("install flexvolume driver: %w", err)
	}
	dir := filepath.Join(o.PluginDir, o.Driver)
	if err := makeTrustedDirs(o.PluginDir, dir); err != nil {
		return "", fmt.Errorf("install flexvolume driver: %w", err)
	}
	target := filepath.Join(dir, exe)
	settings := target + SettingsSuffix
	for _, p := range []string{target, settings} {
		if err := checkReplaceable(p); err != nil {
			return "", fmt.Errorf("install flexvolume driver: %w", err)
		}
	}
	data, err := json.MarshalIndent(o.Settings, "", "  ")
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(settings, 0o644, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	}); err != nil {
		return "", fmt.Errorf("install flexvolume driver: write %s: %w", settings, err)
	}
	in, err := os.Open(o.Source)
	if err != nil {
		return "", fmt.Errorf("install flexvolume driver: %w", err)
	}
	defer in.Close()
	if err := atomicfile.Write(target, 0o755, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	}); err != nil {
		return "", fmt.Errorf("install flexvolume driver: copy %s to %s: %w", o.Source, target, err)
	}
	return target, nil
}

// makeTrustedDirs creates the plugin directory and the driver's directory
// in it if they are missing (mode 0755), and checks both with
// [checkTrustedDir]: root runs what the kubelet finds there, so no one
// else may be able to put it there.
func makeTrustedDirs(pluginDir, driverDir string) error {
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return fmt.Errorf("create plugin directory: %w", err)
	}
	if err := checkTrustedDir(pluginDir); err != nil {
		return err
	}
	if err := os.Mkdir(driverDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create driver directory: %w", err)
	}
	return checkTrustedDir(driverDir)
}

// checkTrustedDir fails unless dir is a directory, not a symbolic link,
// owned by root (or by the installer's own user, which is root wherever
// the kubelet runs what it installs) and not writable by group or others.
func checkTrustedDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: refusing to install there", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (%v): refusing to install there", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not root: refusing to install there", dir, st.Uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (%v): refusing to install there", dir, perm)
	}
	return nil
}

// checkReplaceable fails unless p is missing or a regular file.
func checkReplaceable(p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file (%v): refusing to replace it", p, fi.Mode().Type())
	}
	return nil
}
