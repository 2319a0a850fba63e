package mountinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
)

// mounted reports whether infos has a mount at dir.
func mounted(infos []mount.MountInfo, dir string) bool {
	return slices.ContainsFunc(infos, func(mi mount.MountInfo) bool { return mi.MountPoint == dir })
}

// TestTableReadsAgainOnlyAfterAChange: a proc mountinfo file is read once,
// then again only after a mount or an unmount in its namespace. The test
// runs again as a process of its own in a mount namespace of its own, whose
// mounts are private (os/exec makes them so), so that nothing else on the
// machine changes it; the kernel marks no change for a namespace that one
// thread unshared alone.
func TestTableReadsAgainOnlyAfterAChange(t *testing.T) {
	if os.Getenv(tableChildEnv) == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root for a mount namespace and a mount")
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestTableReadsAgainOnlyAfterAChange$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), tableChildEnv+"="+t.TempDir())
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestTableReadsAgainOnlyAfterAChange") {
			t.Fatalf("in a mount namespace of its own: %v\n%s", err, out)
		}
		t.Logf("in a mount namespace of its own:\n%s", out)
		return
	}
	dir := os.Getenv(tableChildEnv)
	tb := NewTable("/proc/self/mountinfo")
	defer tb.Close()
	read := func(step string, wantReads int, wantMounted bool) {
		t.Helper()
		infos, err := tb.Read()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if tb.reads != wantReads || mounted(infos, dir) != wantMounted || len(infos) == 0 {
			t.Errorf("%s: %d reads, %d mounts, %s mounted %v; want %d reads, mounted %v", step, tb.reads, len(infos), dir, mounted(infos, dir), wantReads, wantMounted)
		}
	}
	read("first", 1, false)
	read("no change", 1, false)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		t.Fatalf("mount: %v", err)
	}
	// Time for anything else that polls the file (Go's network poller,
	// were the file in it) to take the change mark first.
	time.Sleep(100 * time.Millisecond)
	read("after a mount", 2, true)
	read("no change", 2, true)
	read("no change", 2, true)
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	read("after an unmount", 3, false)
	read("no change", 3, false)
	tb.maxAge = time.Nanosecond // a kept table older than its bound
	read("no change, kept too long", 4, false)
}

// tableChildEnv names, in the run of TestTableReadsAgainOnlyAfterAChange
// in its own namespace, the directory it mounts at.
const tableChildEnv = "MOUNTINFO_TABLE_TEST_DIR"

// TestTableOfAFileReadsEveryTime: a mount table that is not a proc file
// (no change mark) is read at every Read; a malformed one is an error.
func TestTableOfAFileReadsEveryTime(t *testing.T) {
	name := filepath.Join(t.TempDir(), "mountinfo")
	line := "36 35 98:0 / /mnt/a rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
	if err := os.WriteFile(name, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := NewTable(name)
	defer tb.Close()
	for i, want := range []string{"/mnt/a", "/mnt/b"} {
		if i == 1 {
			b := "36 35 98:0 / /mnt/b rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
			if err := os.WriteFile(name, []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		infos, err := tb.Read()
		if err != nil || len(infos) != 1 || infos[0].MountPoint != want || tb.reads != i+1 {
			t.Fatalf("read %d = %+v, %v (%d reads); want %s", i+1, infos, err, tb.reads, want)
		}
	}
	if err := os.WriteFile(name, []byte("36 35 98:0 /\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if infos, err := tb.Read(); err == nil {
		t.Errorf("a malformed table read as %+v", infos)
	}
}

// BenchmarkTable compares, on this machine's mount table, a Read of a
// Table that did not change against ParseFile, what the recovery's pass did
// every second before.
func BenchmarkTable(b *testing.B) {
	const path = "/proc/self/mountinfo"
	infos, err := ParseFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d mounts", len(infos))
	b.Run("ParseFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := ParseFile(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("TableUnchanged", func(b *testing.B) {
		tb := NewTable(path)
		defer tb.Close()
		for b.Loop() {
			if _, err := tb.Read(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
