package boundary

import (
	"fmt"
	"strings"
)

// DefaultFlexvolumeDriver is the Flexvolume driver directory name a mount
// pod installs unless told otherwise: <vendor>~<driver>. A volume names it
// as flexVolume.driver "mountcontainers.io/glusterfs".
const DefaultFlexvolumeDriver = "mountcontainers.io~glusterfs"

// SplitFlexvolumeDriver checks a Flexvolume driver directory name
// "<vendor>~<driver>", each part 1 to 63 characters of [a-z0-9._-]
// starting and ending with a letter or digit, and returns the executable's
// name (<driver>) and the name volumes use ("<vendor>/<driver>"), as the
// kubelet maps the one to the other.
func SplitFlexvolumeDriver(dirName string) (exe, volumeDriver string, err error) {
	vendor, drv, ok := strings.Cut(dirName, PluginNameSeparator)
	if !ok || !driverPart(vendor) || !driverPart(drv) {
		return "", "", fmt.Errorf("driver %q: want <vendor>~<driver> of lower-case letters, digits, '.', '-' and '_'", dirName)
	}
	return drv, vendor + "/" + drv, nil
}

// FlexvolumeVolumeDriver returns the name volumes use (flexVolume.driver,
// "<vendor>/<driver>") for the driver directory name dirName, or for
// [DefaultFlexvolumeDriver] when dirName is empty.
func FlexvolumeVolumeDriver(dirName string) (string, error) {
	if dirName == "" {
		dirName = DefaultFlexvolumeDriver
	}
	_, v, err := SplitFlexvolumeDriver(dirName)
	return v, err
}

// driverPart reports whether s matches [a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?.
func driverPart(s string) bool {
	if len(s) == 0 || len(s) > 63 || !lowerAlnum(s[0]) || !lowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !lowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}
