package clientargs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func sha256File(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func errorCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return -1
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	spaced := filepath.Join(dir, "a b")
	if err := os.Mkdir(spaced, 0o755); err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(dir, "mountinfo")
	// The kernel's table: the mount point's space escaped; another type
	// on dir itself.
	escaped := strings.ReplaceAll(spaced, " ", `\040`)
	lines := "22 1 0:21 / " + dir + " rw,relatime shared:1 - tmpfs tmpfs rw\n" +
		"23 22 0:50 / " + escaped + " rw,nosuid,nodev,relatime shared:2 - fuse.glusterfs srv:/vol rw,user_id=0,group_id=0\n"
	if err := os.WriteFile(table, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	old := mountTable
	mountTable = table
	t.Cleanup(func() { mountTable = old })

	for _, tc := range []struct {
		target string
		code   int
		err    string
	}{
		{"/", 2, "cannot mount over /"},
		{"/tmp", 2, "cannot mount over /tmp"},
		{filepath.Join(dir, "missing"), 1, "no such file"},
		{file, 1, "not a directory"},
	} {
		if _, err := Check(tc.target); err == nil || errorCode(err) != tc.code || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Check(%s): %v (code %d); want code %d, %q", tc.target, err, errorCode(err), tc.code, tc.err)
		}
	}
	m, err := Check(dir)
	if err != nil || m.target != dir || m.dev == 0 || m.ino == 0 {
		t.Errorf("Check(%s) = %+v, %v; want a mark", dir, m, err)
	}
	// A directory that is not the root of a mount has nothing mounted on
	// it: the table is not read (it lists every mount of the node). The
	// table lists one at spaced, which is not what spaced shows.
	if _, err := Check(spaced); err != nil {
		t.Errorf("Check(%s), not a mount's root, with the table listing a GlusterFS mount there: %v; want no look at the table", spaced, err)
	}
	mountTable = filepath.Join(dir, "no-table")
	if _, err := Check(dir); err != nil {
		t.Errorf("Check(%s), not a mount's root, without a mount table: %v; want no look at the table", dir, err)
	}

	if os.Geteuid() != 0 {
		t.Skip("mounting and setting trusted.gfid need root; the rest ran")
	}
	// The root of a mount: the table says what it is.
	if err := syscall.Mount("tmpfs", spaced, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(spaced, syscall.MNT_DETACH) })
	if _, err := Check(spaced); err == nil || !strings.Contains(err.Error(), "no-table") {
		t.Errorf("Check(%s), a mount's root, without a mount table: %v; want the table's error", spaced, err)
	}
	mountTable = table
	if _, err := Check(spaced); err == nil || errorCode(err) != 32 || !strings.Contains(err.Error(), "already mounted on "+spaced) {
		t.Errorf("Check(%s), a mount's root listed as GlusterFS: %v (code %d); want code 32, already mounted", spaced, err, errorCode(err))
	}

	// A brick's directory has the trusted.gfid attribute.
	brick := filepath.Join(dir, "brick")
	if err := os.Mkdir(brick, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(brick, "trusted.gfid", make([]byte, 16), 0); err != nil {
		t.Fatalf("set trusted.gfid on %s: %v", brick, err)
	}
	if _, err := Check(brick); err == nil || errorCode(err) != 2 || !strings.Contains(err.Error(), "brick") {
		t.Errorf("Check(brick): %v; want code 2, a brick", err)
	}
}

// TestVerify: a client that exited 0 with nothing mounted, or with another
// file system mounted there, is a failed mount naming the log file; a
// mount that is not FUSE is left alone.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	m, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = Verify(m, "")
	if want := "nothing is mounted on " + dir; err == nil || errorCode(err) != 1 || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), DefaultLogFile(dir)) {
		t.Errorf("Verify with nothing mounted: %v; want %q and the log file %s", err, want, DefaultLogFile(dir))
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root; the rest ran")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := Verify(m, "/var/log/x.log"); err == nil || !strings.Contains(err.Error(), "not FUSE") || !strings.Contains(err.Error(), "/var/log/x.log") {
		t.Errorf("Verify over a tmpfs: %v; want not FUSE and the log file", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil || st.Dev == m.dev {
		t.Errorf("Verify undid a mount that was not the client's (stat: %v)", err)
	}
}

func TestDefaultLogFile(t *testing.T) {
	if got, want := DefaultLogFile("/var/lib/kubelet/pods/x/mnt"), "/var/log/glusterfs/var-lib-kubelet-pods-x-mnt.log"; got != want {
		t.Errorf("DefaultLogFile = %q, want %q", got, want)
	}
	if got := LogFile([]string{"glusterfs", "--acl", "--log-file=/a.log", "/mnt"}); got != "/a.log" {
		t.Errorf("LogFile = %q", got)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`a\040b`: "a b", `a\134b`: `a\b`, `a\0`: `a\0`, `\x`: `\x`, `plain`: "plain", `a\011`: "a\tb"[:2]} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
