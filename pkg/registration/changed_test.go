package registration

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A file the caller says it has read is not read again, but the rules
// hold for it at every listing: a symbolic link, a FIFO (which must not
// block), a file others may write or one too big is refused even when
// the caller would take any version as read.
func TestReadTrustedDirChangedKeepsTheRules(t *testing.T) {
	dir := regDir(t)
	write := func(name, data string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("good", "{}", 0o600)
	write("writable", "{}", 0o602)
	write("big", strings.Repeat("x", 65), 0o600)
	if err := os.Symlink(filepath.Join(dir, "good"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	var asked []string
	anyRead := func(name string, _ FileVersion) bool {
		asked = append(asked, name)
		return true
	}
	done := make(chan struct{})
	var files []TrustedFile
	var err error
	go func() {
		defer close(done)
		files, err = ReadTrustedDirChanged(dir, 64, func(string) bool { return true }, anyRead)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("ReadTrustedDirChanged blocked (on the FIFO?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]TrustedFile{}
	for _, f := range files {
		got[f.Name] = f
	}
	if len(files) != 5 {
		t.Fatalf("%d files, want 5: %+v", len(files), files)
	}
	for name, want := range map[string]string{"writable": "writable by group or others", "big": "more than the limit", "link": "symbolic link", "fifo": "not a regular file"} {
		if f := got[name]; f.Err == nil || !errors.Is(f.Err, ErrUntrusted) || !strings.Contains(f.Err.Error(), want) || f.Unchanged {
			t.Errorf("%s: %+v; want refused (%s)", name, f, want)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "good"), &st); err != nil {
		t.Fatal(err)
	}
	if f := got["good"]; f.Err != nil || !f.Unchanged || f.Data != nil || f.Version != versionOf(&st) {
		t.Errorf("good: %+v; want unchanged, no data, version %+v", f, versionOf(&st))
	}
	if strings.Join(asked, ",") != "good" {
		t.Errorf("asked about %q; want only the file that passed the rules", asked)
	}

	// Read when the caller has not read that version, and the version
	// is the file's.
	files, err = ReadTrustedDirChanged(dir, 64, func(n string) bool { return n == "good" }, func(string, FileVersion) bool { return false })
	if err != nil || len(files) != 1 || string(files[0].Data) != "{}" || files[0].Unchanged || files[0].Version != versionOf(&st) {
		t.Fatalf("read again: %+v, %v", files, err)
	}
	old := time.Unix(st.Ctim.Unix())
	if !files[0].Version.Settled(old.Add(2*time.Second), time.Second) || files[0].Version.Settled(old.Add(time.Second/2), time.Second) {
		t.Errorf("Settled: a ctime 2 s before the read with a window of 1 s must be settled, one 0.5 s before must not")
	}
}
