package registration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const plugin = "kubernetes.io/glusterfs"

func regDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "plugin-containers")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustWrite(t *testing.T, dir, plugin string, r Registration) {
	t.Helper()
	if err := Write(dir, plugin, r); err != nil {
		t.Fatalf("Write(%s): %v", plugin, err)
	}
}

func TestWriteRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "plugin-containers") // created by Write
	r := validReg()
	mustWrite(t, dir, plugin, r)

	got, ok, err := Read(dir, plugin)
	if err != nil || !ok || got != r {
		t.Fatalf("Read = %+v, %v, %v; want %+v", got, ok, err, r)
	}
	path := filepath.Join(dir, "kubernetes.io~glusterfs.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", fi.Mode().Perm())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm()&0o022 != 0 {
		t.Errorf("created directory mode %v is group/other-writable", di.Mode().Perm())
	}

	// A leftover of an older pod is overwritten.
	newer := r
	newer.PodName, newer.PodUID = "glusterfs-mount-abcde", "11111111-2222-3333-4444-555555555555"
	mustWrite(t, dir, plugin, newer)
	if got, _, _ := Read(dir, plugin); got != newer {
		t.Fatalf("after overwrite Read = %+v, want %+v", got, newer)
	}
	assertNoTemps(t, dir)
}

func TestReadNotRegistered(t *testing.T) {
	dir := regDir(t)
	if _, ok, err := Read(dir, plugin); ok || err != nil {
		t.Fatalf("Read of a missing file = %v, %v; want not registered, no error", ok, err)
	}
	if _, ok, err := Read(filepath.Join(dir, "missing"), plugin); ok || err != nil {
		t.Fatalf("Read in a missing directory = %v, %v; want not registered, no error", ok, err)
	}
}

func TestReadRefusesBadFiles(t *testing.T) {
	good, _ := Encode(validReg())
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir, path string)
		wantErr string
		trust   bool // refused as untrusted rather than for its content
	}{
		{"symlink", func(t *testing.T, dir, path string) {
			target := filepath.Join(dir, ".target")
			writeRaw(t, target, good, 0o644)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link", true},
		{"fifo", func(t *testing.T, dir, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "FIFO", true},
		{"directory", func(t *testing.T, dir, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "directory", true},
		{"oversize", func(t *testing.T, dir, path string) {
			big := append([]byte(strings.TrimSuffix(string(good), "}\n")), []byte(`,"pad":"`+strings.Repeat("x", MaxFileSize)+`"}`)...)
			writeRaw(t, path, big, 0o644)
		}, "more than the limit", true},
		{"group writable", func(t *testing.T, dir, path string) {
			writeRaw(t, path, good, 0o664)
		}, "writable by group or others", true},
		{"world writable", func(t *testing.T, dir, path string) {
			writeRaw(t, path, good, 0o646)
		}, "writable by group or others", true},
		{"malformed JSON", func(t *testing.T, dir, path string) {
			writeRaw(t, path, []byte(`{"podNamespace":`), 0o644)
		}, "malformed JSON", false},
		{"missing field", func(t *testing.T, dir, path string) {
			writeRaw(t, path, []byte(`{"podNamespace":"ns","podName":"p","podUID":"u"}`), 0o644)
		}, "containerName is missing", false},
		{"empty file", func(t *testing.T, dir, path string) {
			writeRaw(t, path, nil, 0o644)
		}, "malformed JSON", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := regDir(t)
			path := filepath.Join(dir, "kubernetes.io~glusterfs.json")
			tc.setup(t, dir, path)
			err := readWithin(t, dir)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Read = %v; want an error naming %s and containing %q", err, path, tc.wantErr)
			}
			if got := errors.Is(err, ErrUntrusted); got != tc.trust {
				t.Fatalf("errors.Is(err, ErrUntrusted) = %v, want %v (err: %v)", got, tc.trust, err)
			}
			// The listing reports the bad file without failing.
			entries, lerr := List(dir)
			if lerr != nil || len(entries) != 1 || entries[0].Err == nil || entries[0].Plugin != plugin {
				t.Fatalf("List = %+v, %v; want one entry with an error", entries, lerr)
			}
		})
	}
}

func TestReadRefusesWritableDirectory(t *testing.T) {
	dir := regDir(t)
	mustWrite(t, dir, plugin, validReg())
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, ok, err := Read(dir, plugin)
	if ok || !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Read in a world-writable directory = %v, %v; want an untrusted error naming %s", ok, err, dir)
	}
	if err := Write(dir, plugin, validReg()); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("Write into a world-writable directory = %v, want an untrusted error", err)
	}
	if _, err := List(dir); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("List of a world-writable directory = %v, want an untrusted error", err)
	}
}

func TestReadRefusesForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root; CI runs this as root")
	}
	dir := regDir(t)
	mustWrite(t, dir, plugin, validReg())
	path := filepath.Join(dir, "kubernetes.io~glusterfs.json")
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, _, err := Read(dir, plugin)
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("Read of a file owned by nobody = %v, want an untrusted error", err)
	}
	if err := os.Chown(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Read(dir, plugin); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("Read in a directory owned by nobody = %v, want an untrusted error", err)
	}
}

func TestBadPluginNamesChangeNothing(t *testing.T) {
	dir := regDir(t)
	for _, name := range []string{"", "../escape", ".hidden", "a~b", "a\x00b", "a/b/c", "x/.."} {
		if err := Write(dir, name, validReg()); err == nil || !strings.Contains(err.Error(), "invalid plugin name") {
			t.Errorf("Write(%q) = %v, want an invalid plugin name error", name, err)
		}
		if _, _, err := Read(dir, name); err == nil {
			t.Errorf("Read(%q) succeeded", name)
		}
		if _, err := RemoveIfOwned(dir, name, "u"); err == nil {
			t.Errorf("RemoveIfOwned(%q) succeeded", name)
		}
	}
	if err := Write(dir, plugin, Registration{PodName: "p"}); err == nil {
		t.Error("Write of an invalid registration succeeded")
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if de.Name() != lockName {
			t.Errorf("bad input left %s behind", de.Name())
		}
	}
	if des, _ := os.ReadDir(filepath.Dir(dir)); len(des) != 1 {
		t.Errorf("bad input wrote outside the directory: %v", des)
	}
}

func TestRemoveIfOwned(t *testing.T) {
	dir := regDir(t)
	r := validReg()
	mustWrite(t, dir, plugin, r)

	if removed, err := RemoveIfOwned(dir, plugin, "another-uid"); removed || err != nil {
		t.Fatalf("RemoveIfOwned(other uid) = %v, %v; want false, nil", removed, err)
	}
	if _, ok, _ := Read(dir, plugin); !ok {
		t.Fatal("registration of another pod was removed")
	}
	if removed, err := RemoveIfOwned(dir, plugin, r.PodUID); !removed || err != nil {
		t.Fatalf("RemoveIfOwned(own uid) = %v, %v; want true, nil", removed, err)
	}
	if _, ok, _ := Read(dir, plugin); ok {
		t.Fatal("registration still present after RemoveIfOwned")
	}
	if removed, err := RemoveIfOwned(dir, plugin, r.PodUID); removed || err != nil {
		t.Fatalf("RemoveIfOwned of a missing file = %v, %v; want false, nil", removed, err)
	}
	// Garbage is left in place and reported.
	path := filepath.Join(dir, "kubernetes.io~glusterfs.json")
	writeRaw(t, path, []byte("garbage"), 0o644)
	if removed, err := RemoveIfOwned(dir, plugin, r.PodUID); removed || err == nil {
		t.Fatalf("RemoveIfOwned of garbage = %v, %v; want false and an error", removed, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("garbage was removed: %v", err)
	}
}

func TestRemoveIfOwnedRacesWriter(t *testing.T) {
	// A pod shutting down races its successor's registration: whatever the
	// interleaving, the successor's registration must survive.
	dir := regDir(t)
	old, next := validReg(), validReg()
	next.PodName, next.PodUID = "glusterfs-mount-new", "new-uid"
	for i := 0; i < 200; i++ {
		mustWrite(t, dir, plugin, old)
		done := make(chan error, 1)
		go func() { done <- Write(dir, plugin, next) }()
		if _, err := RemoveIfOwned(dir, plugin, old.PodUID); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got, ok, err := Read(dir, plugin)
		if err != nil || !ok || got != next {
			t.Fatalf("iteration %d: Read = %+v, %v, %v; want the successor's registration", i, got, ok, err)
		}
	}
}

func TestList(t *testing.T) {
	dir := regDir(t)
	a, b := validReg(), validReg()
	b.PodName = "rbd-mount-1"
	mustWrite(t, dir, "kubernetes.io/glusterfs", a)
	mustWrite(t, dir, "kubernetes.io/rbd", b)
	writeRaw(t, filepath.Join(dir, ".kubernetes.io~x.json.tmp-1"), []byte("junk"), 0o644)
	writeRaw(t, filepath.Join(dir, "README"), []byte("not a registration"), 0o644)
	writeRaw(t, filepath.Join(dir, "a~b~c.json"), []byte("{}"), 0o644)
	writeRaw(t, filepath.Join(dir, "broken.json"), []byte("{"), 0o644)

	entries, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range entries {
		got[filepath.Base(e.Path)] = e
	}
	if len(got) != 4 {
		t.Fatalf("List returned %d entries, want 4: %+v", len(got), entries)
	}
	if e := got["kubernetes.io~glusterfs.json"]; e.Err != nil || e.Plugin != "kubernetes.io/glusterfs" || e.Registration != a {
		t.Errorf("glusterfs entry = %+v", e)
	}
	if e := got["kubernetes.io~rbd.json"]; e.Err != nil || e.Plugin != "kubernetes.io/rbd" || e.Registration != b {
		t.Errorf("rbd entry = %+v", e)
	}
	if e := got["a~b~c.json"]; e.Err == nil {
		t.Errorf("bad file name listed without error: %+v", e)
	}
	if e := got["broken.json"]; e.Err == nil || e.Plugin != "broken" {
		t.Errorf("broken file listed without error: %+v", e)
	}
	if entries, err := List(filepath.Join(dir, "missing")); err != nil || len(entries) != 0 {
		t.Errorf("List of a missing directory = %v, %v", entries, err)
	}
}

func TestWriteCleansStaleTemps(t *testing.T) {
	dir := regDir(t)
	stale := filepath.Join(dir, ".kubernetes.io~glusterfs.json.tmp-12345")
	writeRaw(t, stale, []byte(`{"podNa`), 0o600)
	other := filepath.Join(dir, ".kubernetes.io~rbd.json.tmp-1")
	writeRaw(t, other, []byte(`x`), 0o600)
	// A symlink with a temp name is not ours to delete.
	link := filepath.Join(dir, ".kubernetes.io~glusterfs.json.tmp-link")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, plugin, validReg())
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temp file survived: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("temp file of another plugin was removed: %v", err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("symlink was removed: %v", err)
	}
}

// readWithin reads plugin from dir and fails the test if Read blocks.
func readWithin(t *testing.T, dir string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _, err := Read(dir, plugin)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Read blocked")
		return nil
	}
}

func writeRaw(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // umask
		t.Fatal(err)
	}
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.Contains(de.Name(), tempInfix) {
			t.Errorf("temporary file %s left behind", de.Name())
		}
	}
}

// Exists says "no registration" exactly where Read does, and otherwise
// either true or Read's error.
func TestExistsAgreesWithRead(t *testing.T) {
	good, _ := Encode(validReg())
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, path string) string // returns the directory to ask
		want  bool
	}{
		{"registered", func(t *testing.T, dir, path string) string { writeRaw(t, path, good, 0o644); return dir }, true},
		{"no file", func(t *testing.T, dir, path string) string { return dir }, false},
		{"no directory", func(t *testing.T, dir, path string) string { return filepath.Join(dir, "missing") }, false},
		{"fifo", func(t *testing.T, dir, path string) string {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true},
		{"dangling symlink", func(t *testing.T, dir, path string) string {
			if err := os.Symlink(filepath.Join(dir, "nowhere"), path); err != nil {
				t.Fatal(err)
			}
			return dir
		}, true},
		{"malformed", func(t *testing.T, dir, path string) string { writeRaw(t, path, []byte("{"), 0o644); return dir }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := regDir(t)
			ask := tc.setup(t, dir, filepath.Join(dir, "kubernetes.io~glusterfs.json"))
			got, err := Exists(ask, plugin)
			if err != nil || got != tc.want {
				t.Fatalf("Exists = %v, %v; want %v", got, err, tc.want)
			}
			_, ok, rerr := Read(ask, plugin)
			if readSaysNone := !ok && rerr == nil; readSaysNone != !got {
				t.Fatalf("Exists = %v but Read = %v, %v", got, ok, rerr)
			}
		})
	}
	dir := regDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Exists(dir, plugin); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("Exists in a world-writable directory: %v, want Read's untrusted error", err)
	}
	if _, err := Exists(dir, "../etc"); err == nil {
		t.Fatal("Exists accepted a plugin name that escapes the directory")
	}
}
