package scope

import "testing"

func TestHelperTarget(t *testing.T) {
	for _, tc := range []struct {
		argv   []string
		target string
		ok     bool
	}{
		{[]string{"/sbin/mount.glusterfs", "srv:/vol", "/mnt/x", "-o", "ro"}, "/mnt/x", true},
		{[]string{"/sbin/mount.glusterfs", "srv:/vol", "/mnt/x/../y"}, "/mnt/y", true},
		{[]string{"/sbin/mount.glusterfs", "-V"}, "", false},
		{[]string{"/sbin/mount.glusterfs", "srv:/vol"}, "", false},
		{[]string{"/sbin/mount.glusterfs", "srv:/vol", "-o"}, "", false},
		{[]string{"/sbin/mount.glusterfs", "-o", "ro", "/mnt/x"}, "", false},
	} {
		if got, ok := HelperTarget(tc.argv); got != tc.target || ok != tc.ok {
			t.Errorf("HelperTarget(%q) = %q, %v; want %q, %v", tc.argv, got, ok, tc.target, tc.ok)
		}
	}
}

func TestIsMountHelperName(t *testing.T) {
	for name, want := range map[string]bool{
		"/sbin/mount.glusterfs": true, "mount.fuse3": true, "mount.": false, "mount": false,
		"/usr/local/bin/mount-scope": false, "/sbin/mount.glusterfs/x": false,
	} {
		if got := IsMountHelperName(name); got != want {
			t.Errorf("IsMountHelperName(%q) = %v, want %v", name, got, want)
		}
	}
}
