package flexvolume

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/atomicfile"
)

// DefaultDriver is the driver directory name the mount pod installs:
// <vendor>~<driver>. A volume uses it as flexVolume.driver
// "mountcontainers.io/glusterfs".
const DefaultDriver = "mountcontainers.io~glusterfs"

// DefaultPluginDir is the kubelet's default Flexvolume directory.
const DefaultPluginDir = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"

var driverPartRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// SplitDriver checks a driver directory name "<vendor>~<driver>" and
// returns the executable's name (<driver>) and the name volumes use
// ("<vendor>/<driver>").
func SplitDriver(dirName string) (exe, volumeDriver string, err error) {
	vendor, drv, ok := strings.Cut(dirName, "~")
	if !ok || !driverPartRE.MatchString(vendor) || !driverPartRE.MatchString(drv) {
		return "", "", fmt.Errorf("driver %q: want <vendor>~<driver> of lower-case letters, digits, '.', '-' and '_'", dirName)
	}
	return drv, vendor + "/" + drv, nil
}

// VolumeDriver returns the name volumes use (flexVolume.driver,
// "<vendor>/<driver>") for the driver directory name dirName, or for
// [DefaultDriver] when dirName is empty, as [Install] places it.
func VolumeDriver(dirName string) (string, error) {
	_, v, err := SplitDriver(driverOrDefault(dirName))
	return v, err
}

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
// something to delete. Install returns the executable's path.
func Install(o InstallOptions) (string, error) {
	o.Driver = driverOrDefault(o.Driver)
	exe, _, err := SplitDriver(o.Driver)
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
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
