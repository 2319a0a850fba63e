package livemount

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeStat writes the stat of a fake process pid, started at start.
func writeStat(t *testing.T, root string, pid int, start int) {
	t.Helper()
	// 20 fields after the command's name; the start time is the last.
	f := make([]string, 20)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[19] = "S", fmt.Sprint(start)
	stat := fmt.Sprintf("%d (gluster fs) %s\n", pid, strings.Join(f, " "))
	if err := os.WriteFile(filepath.Join(root, fmt.Sprint(pid), "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKnownDaemonsReadOnlyTheirDescriptors: a survey in the scopes reads,
// of a daemon it knows (its PID and start time), only the descriptor it
// held its connection through, and still checks its UIDs, that link and
// that connection; a process whose PID went to a later one, or whose
// descriptor changed, is read whole. What is known is what the last
// survey read.
func TestKnownDaemonsReadOnlyTheirDescriptors(t *testing.T) {
	proc := t.TempDir()
	a, b := "/var/lib/kubelet/pods/a/volumes/x~glusterfs/data", "/var/lib/kubelet/pods/b/volumes/x~glusterfs/data"
	targets := map[string]bool{a: true, b: true}
	conns := map[uint64][]string{30: {a}, 31: {b}}
	writeProc(t, proc, 100, rootProc([]int{30}, "/usr/sbin/glusterfs"))
	writeStat(t, proc, 100, 5000)
	writeProc(t, proc, 101, rootProc([]int{31}, "/usr/sbin/glusterfs"))
	writeStat(t, proc, 101, 5001)
	known := &Known{}
	survey := func(step string, useKnown bool, want map[string][]int) {
		t.Helper()
		got := findDaemons(proc, []int{100, 101}, targets, conns, known, useKnown)
		if len(got) != len(want) {
			t.Errorf("%s: daemons %v, want %v", step, got, want)
		}
		for target, pids := range want {
			if !slices.Equal(got[target], pids) {
				t.Errorf("%s: daemons %v, want %v", step, got, want)
			}
		}
	}
	survey("first", true, map[string][]int{a: {100}, b: {101}})
	if k, ok := known.get(100); !ok || k.start != "5000" || !slices.Equal(k.fds, []string{"3"}) {
		t.Fatalf("known of 100: %+v, %v; want start 5000, descriptor 3", k, ok)
	}

	// 100 gets b's connection through another descriptor: a survey in
	// the scopes reads only descriptor 3 of it; a full one sees both.
	if err := os.Symlink("/dev/fuse", filepath.Join(proc, "100/fd/4")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "100/fdinfo/4"), []byte("pos:\t0\nfuse_connection:\t31\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	survey("known", true, map[string][]int{a: {100}, b: {101}})
	survey("full", false, map[string][]int{a: {100}, b: {100, 101}})
	if k, _ := known.get(100); !slices.Equal(k.fds, []string{"3", "4"}) {
		t.Errorf("known of 100 after the full survey: %+v; want descriptors 3 and 4", k)
	}

	// 101's PID now another process's (a later start), which holds a's
	// connection through descriptor 5 too: read whole.
	if err := os.Symlink("/dev/fuse", filepath.Join(proc, "101/fd/5")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "101/fdinfo/5"), []byte("pos:\t0\nfuse_connection:\t30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeStat(t, proc, 101, 9000)
	survey("pid reused", true, map[string][]int{a: {100, 101}, b: {100, 101}})
	if k, _ := known.get(101); k.start != "9000" || !slices.Equal(k.fds, []string{"3", "5"}) {
		t.Errorf("known of 101 after its PID went to another process: %+v; want start 9000, descriptors 3 and 5", k)
	}
	if err := os.Remove(filepath.Join(proc, "101/fd/3")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(proc, "101/fd/5")); err != nil {
		t.Fatal(err)
	}
	survey("101 holds nothing", true, map[string][]int{a: {100}, b: {100}})
	if _, ok := known.get(101); ok {
		t.Error("101 is still known without a /dev/fuse descriptor")
	}

	// 100's descriptor 3 is no longer /dev/fuse: read whole (4 still is).
	if err := os.Remove(filepath.Join(proc, "100/fd/3")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(proc, "100/fd/3")); err != nil {
		t.Fatal(err)
	}
	survey("descriptor changed", true, map[string][]int{b: {100}})

	// 100 no longer runs as root: it serves nothing, known or not.
	status := "Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"
	if err := os.WriteFile(filepath.Join(proc, "100/status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	survey("not root", true, map[string][]int{})

	// Without a stat (no identity), nothing is known.
	if err := os.Remove(filepath.Join(proc, "100/stat")); err != nil {
		t.Fatal(err)
	}
	survey("no stat", true, map[string][]int{})
	if _, ok := known.get(100); ok {
		t.Error("100 is known without its start time")
	}
}
