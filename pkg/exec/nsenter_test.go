package exec

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	utilexec "k8s.io/utils/exec"
)

func TestNsenter(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/sbin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "usr/sbin/mkfs.ext4"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Debian's merged /usr: relative directory links, and an absolute link
	// that must resolve within the host root, not the caller's.
	if err := os.Symlink("usr/sbin", filepath.Join(root, "sbin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/sbin/mkfs.ext4", filepath.Join(root, "usr/bin/mke2fs")); err != nil {
		t.Fatal(err)
	}
	n := NewNsenter(root)
	n.Path = []string{"/sbin", "/usr/bin"}
	for file, want := range map[string]string{
		"mkfs.ext4":            "/sbin/mkfs.ext4",
		"mke2fs":               "/usr/bin/mke2fs",
		"/usr/sbin/mkfs.ext4":  "/usr/sbin/mkfs.ext4",
		"notexec":              "",
		"missing":              "",
		"/usr/bin/notexec":     "",
		"/usr/sbin/../bin/xyz": "",
	} {
		got, err := n.LookPath(file)
		if want == "" {
			if err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
				t.Errorf("LookPath(%q) = %q, %v; want ErrExecutableNotFound", file, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("LookPath(%q) = %q, %v; want %q", file, got, err, want)
		}
	}

	rec := newRecorder(1, nil)
	n.Exec = &rec.fake
	cmd := n.Command("mkfs.ext4", "-F", "/dev/loop0")
	cmd.SetDir("/var/lib")
	if _, err := cmd.CombinedOutput(); err != nil {
		t.Fatal(err)
	}
	want := []string{"nsenter", "--mount=" + root + "/proc/1/ns/mnt", "--wd=/var/lib", "--", "/sbin/mkfs.ext4", "-F", "/dev/loop0"}
	if len(rec.calls) != 1 || !slices.Equal(rec.calls[0], want) {
		t.Errorf("calls %q, want %q", rec.calls, want)
	}
	if err := n.Command("missing").Run(); err != utilexec.ErrExecutableNotFound { //nolint:errorlint // compared by equality
		t.Errorf("Run(missing) = %v", err)
	}
}
