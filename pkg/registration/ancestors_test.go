package registration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ancestorCase lays out a registration directory below base and returns
// it, with the directory the refusal must name ("" when it is trusted).
type ancestorCase struct {
	name  string
	root  bool // needs root to change owners
	setup func(t *testing.T, base string) (dir, blame string)
	want  string
}

// mkdirMode creates dir with exactly mode (not masked by the umask).
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// chown changes the owner of path, not following a symbolic link.
func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

var ancestorCases = []ancestorCase{
	{"directory is a symbolic link", false, func(t *testing.T, base string) (string, string) {
		mkdirMode(t, filepath.Join(base, "real"), 0o755)
		link := filepath.Join(base, "plugin-containers")
		if err := os.Symlink("real", link); err != nil {
			t.Fatal(err)
		}
		return link, link
	}, "symbolic link"},
	{"ancestor is a symbolic link", false, func(t *testing.T, base string) (string, string) {
		mkdirMode(t, filepath.Join(base, "real", "plugin-containers"), 0o755)
		link := filepath.Join(base, "kubelet")
		if err := os.Symlink("real", link); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(link, "plugin-containers"), link
	}, "symbolic link"},
	{"ancestor writable by others", false, func(t *testing.T, base string) (string, string) {
		a := filepath.Join(base, "a")
		mkdirMode(t, filepath.Join(a, "b", "plugin-containers"), 0o755)
		mkdirMode(t, a, 0o777)
		return filepath.Join(a, "b", "plugin-containers"), a
	}, "writable by group or others"},
	{"ancestor writable by group", false, func(t *testing.T, base string) (string, string) {
		a := filepath.Join(base, "a")
		mkdirMode(t, filepath.Join(a, "plugin-containers"), 0o755)
		mkdirMode(t, a, 0o775)
		return filepath.Join(a, "plugin-containers"), a
	}, "writable by group or others"},
	{"ancestor root's and sticky", false, func(t *testing.T, base string) (string, string) {
		if os.Geteuid() != 0 {
			t.Skip("a root-owned directory needs root")
		}
		a := filepath.Join(base, "tmp")
		mkdirMode(t, filepath.Join(a, "plugin-containers"), 0o755)
		mkdirMode(t, a, 0o777|os.ModeSticky)
		return filepath.Join(a, "plugin-containers"), ""
	}, ""},
	{"ancestor sticky but not root's", true, func(t *testing.T, base string) (string, string) {
		a := filepath.Join(base, "tmp")
		mkdirMode(t, filepath.Join(a, "plugin-containers"), 0o755)
		mkdirMode(t, a, 0o777|os.ModeSticky)
		chown(t, a, 65534)
		return filepath.Join(a, "plugin-containers"), a
	}, "owned by uid 65534"},
	{"ancestor owned by another user", true, func(t *testing.T, base string) (string, string) {
		a := filepath.Join(base, "a")
		mkdirMode(t, filepath.Join(a, "plugin-containers"), 0o755)
		chown(t, a, 65534)
		return filepath.Join(a, "plugin-containers"), a
	}, "owned by uid 65534"},
	{"directory sticky and root's", false, func(t *testing.T, base string) (string, string) {
		dir := filepath.Join(base, "plugin-containers")
		mkdirMode(t, dir, 0o777|os.ModeSticky)
		return dir, dir
	}, "writable by group or others"},
}

// TestUntrustedAncestorIsRefused checks that every reader and writer of
// registrations refuses a directory reached through a symbolic link or
// below a directory that someone else can write, naming that directory.
func TestUntrustedAncestorIsRefused(t *testing.T) {
	for _, tc := range ancestorCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("changing a directory's owner needs root; CI runs this as root")
			}
			base := t.TempDir()
			dir, blame := tc.setup(t, base)
			good, _ := Encode(validReg())
			writeRaw(t, filepath.Join(dir, "kubernetes.io~glusterfs.json"), good, 0o644)
			if blame == "" {
				assertTrusted(t, dir)
				return
			}
			for name, err := range callAll(dir) {
				if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), blame+":") || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s = %v; want an untrusted error naming %s and containing %q", name, err, blame, tc.want)
				}
			}
		})
	}
}

// callAll calls every function that trusts the registration directory dir
// and returns their errors by name.
func callAll(dir string) map[string]error {
	errs := map[string]error{}
	_, _, errs["Read"] = Read(dir, plugin)
	_, errs["Exists"] = Exists(dir, plugin)
	_, errs["List"] = List(dir)
	errs["Write"] = Write(dir, plugin, validReg())
	_, errs["RemoveIfOwned"] = RemoveIfOwned(dir, plugin, validReg().PodUID)
	_, _, errs["ReadTrusted"] = ReadTrusted(filepath.Join(dir, "kubernetes.io~glusterfs.json"), MaxFileSize)
	return errs
}

// assertTrusted fails unless every function trusts dir.
func assertTrusted(t *testing.T, dir string) {
	t.Helper()
	if r, ok, err := Read(dir, plugin); err != nil || !ok || r != validReg() {
		t.Fatalf("Read = %+v, %v, %v; want the registration", r, ok, err)
	}
	if _, ok, err := ReadTrusted(filepath.Join(dir, "kubernetes.io~glusterfs.json"), MaxFileSize); err != nil || !ok {
		t.Fatalf("ReadTrusted = %v, %v; want the file", ok, err)
	}
	if es, err := List(dir); err != nil || len(es) != 1 || es[0].Err != nil {
		t.Fatalf("List = %+v, %v; want the registration", es, err)
	}
	mustWrite(t, dir, plugin, validReg())
	if ok, err := RemoveIfOwned(dir, plugin, validReg().PodUID); err != nil || !ok {
		t.Fatalf("RemoveIfOwned = %v, %v; want it removed", ok, err)
	}
}

// TestTrustedDirectoryBelowTempDir checks that the rules accept what the
// tests and the test bed use: a directory below root's sticky /tmp.
func TestTrustedDirectoryBelowTempDir(t *testing.T) {
	dir := regDir(t)
	mustWrite(t, dir, plugin, validReg())
	assertTrusted(t, dir)
	mustWrite(t, dir, plugin, validReg())
	rel, err := filepath.Rel(mustGetwd(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Read(rel, plugin); err != nil || !ok {
		t.Fatalf("Read(%s) = %v, %v; want the registration through a relative path", rel, ok, err)
	}
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
