package boundary

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func ExampleSplitFlexvolumeDriver() {
	exe, volumeDriver, _ := SplitFlexvolumeDriver("mountcontainers.io~glusterfs")
	fmt.Println(exe, volumeDriver)
	// Output: glusterfs mountcontainers.io/glusterfs
}

// TestDriverPartIsTheRegexp holds the hand-written check to the rule as a
// regular expression.
func TestDriverPartIsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)
	for _, s := range []string{"", "a", "a.b", "a-", "-a", "A", "a_b", "a~b", "a/b", "0", strings.Repeat("a", 63), strings.Repeat("a", 64), "a\nb", "é"} {
		if got, want := driverPart(s), re.MatchString(s); got != want {
			t.Errorf("driverPart(%q) = %v, the regexp says %v", s, got, want)
		}
	}
	for _, bad := range []string{"", "glusterfs", "a~", "~b", "A~b", "a~b~c", "a/b"} {
		if _, _, err := SplitFlexvolumeDriver(bad); err == nil {
			t.Errorf("SplitFlexvolumeDriver(%q) succeeded", bad)
		}
	}
	if v, err := FlexvolumeVolumeDriver(""); err != nil || v != "mountcontainers.io/glusterfs" {
		t.Errorf("FlexvolumeVolumeDriver(\"\") = %q, %v", v, err)
	}
}
