package livemount

import (
	"context"
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
	writeStatNamed(t, root, pid, start, "gluster fs")
}

// writeStatNamed writes the stat of a fake process pid named comm,
// started at start.
func writeStatNamed(t *testing.T, root string, pid int, start int, comm string) {
	t.Helper()
	// 20 fields after the command's name; the start time is the last.
	f := make([]string, 20)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[19] = "S", fmt.Sprint(start)
	stat := fmt.Sprintf("%d (%s) %s\n", pid, comm, strings.Join(f, " "))
	if err := os.WriteFile(filepath.Join(root, fmt.Sprint(pid), "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

// twoMounts returns a fake /proc with process 100, started at 5000, the
// daemon of a (connection 30), and the targets a and b (connection 31),
// as findDaemons takes them.
func twoMounts(t *testing.T) (proc, a, b string, targets map[string]bool, conns map[uint64][]string) {
	t.Helper()
	proc = t.TempDir()
	a, b = "/var/lib/kubelet/pods/a/volumes/x~glusterfs/data", "/var/lib/kubelet/pods/b/volumes/x~glusterfs/data"
	writeProc(t, proc, 100, rootProc([]int{30}, "/usr/sbin/glusterfs"))
	writeStat(t, proc, 100, 5000)
	return proc, a, b, map[string]bool{a: true, b: true}, map[uint64][]string{30: {a}, 31: {b}}
}

// TestKnownDaemonsReadOnlyTheirDescriptors: a survey in the scopes reads,
// of a daemon it knows (its PID and start time), only the descriptor it
// held its connection through, and still checks its UIDs, that link and
// that connection; a process whose PID went to a later one, or whose
// descriptor changed, is read whole. What is known is what the last
// survey read.
func TestKnownDaemonsReadOnlyTheirDescriptors(t *testing.T) {
	proc, a, b, targets, conns := twoMounts(t)
	writeProc(t, proc, 101, rootProc([]int{31}, "/usr/sbin/glusterfs"))
	writeStat(t, proc, 101, 5001)
	known := &Known{}
	survey := func(step string, useKnown bool, want map[string][]int) {
		t.Helper()
		got := findDaemons(proc, []int{100, 101}, targets, conns, known, useKnown, false, nil)
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

// TestQuietProcessesSkipped: a read of every process counts, of each root
// process (its PID, start time and name), the reads in a row that found
// it holding no /dev/fuse descriptor; with skipQuiet, one counted
// quietReads times is not read again, but for its stat: a connection it
// gets later, keeping its PID, start time and name, is seen only by a
// read without skipQuiet, while a new process at its PID, or the same
// one under another name (an exec), is read whole. A process that does
// not run as root is never counted; a read of the scopes' processes
// counts nothing, and one that reads no process ends every row.
func TestQuietProcessesSkipped(t *testing.T) {
	proc, a, b, targets, conns := twoMounts(t)
	writeProc(t, proc, 200, rootProc(nil, "/bin/sleep", "1000"))
	writeStat(t, proc, 200, 5001)
	writeProc(t, proc, 300, fakeProc{uids: [4]int{1000, 1000, 1000, 1000}, fuse: []int{31}})
	writeStat(t, proc, 300, 5002)
	known := &Known{}
	read := func(step string, pids []int, skipQuiet bool, want map[string][]int) {
		t.Helper()
		got := findDaemons(proc, pids, targets, conns, known, false, skipQuiet, nil)
		if len(got) != len(want) {
			t.Errorf("%s: daemons %v, want %v", step, got, want)
		}
		for target, pids := range want {
			if !slices.Equal(got[target], pids) {
				t.Errorf("%s: daemons %v, want %v", step, got, want)
			}
		}
	}
	reads := func(step string, want map[int]int) {
		t.Helper()
		for pid, n := range want {
			if got := known.quietOf(pid).reads; got != n {
				t.Errorf("%s: %d counted quiet %d times, want %d", step, pid, got, n)
			}
		}
	}
	read("first", nil, true, map[string][]int{a: {100}})
	reads("first", map[int]int{100: 0, 200: 1, 300: 0})
	read("in the scopes", []int{100, 200}, true, map[string][]int{a: {100}})
	reads("in the scopes", map[int]int{100: 0, 200: 1, 300: 0})
	if got := findDaemons(proc, nil, nil, conns, known, false, true, nil); len(got) != 0 {
		t.Errorf("no target: daemons %v, want none", got)
	}
	reads("a read of no process", map[int]int{100: 0, 200: 0, 300: 0})
	read("first again", nil, true, map[string][]int{a: {100}})
	read("second", nil, true, map[string][]int{a: {100}})
	reads("second", map[int]int{100: 0, 200: quietReads, 300: 0})

	// 200 execs a daemon in place (its PID and start time kept) and
	// mounts b: the reads that skip it do not see it; a deep one does,
	// and counts it no longer quiet.
	if err := os.RemoveAll(filepath.Join(proc, "200")); err != nil {
		t.Fatal(err)
	}
	writeProc(t, proc, 200, rootProc([]int{31}, "/usr/sbin/glusterfs"))
	writeStat(t, proc, 200, 5001)
	read("200 quiet, skipped", nil, true, map[string][]int{a: {100}})
	reads("200 quiet, skipped", map[int]int{200: quietReads})
	read("deep", nil, false, map[string][]int{a: {100}, b: {200}})
	reads("deep", map[int]int{200: 0, 300: 0})
	read("200 a daemon, read", nil, true, map[string][]int{a: {100}, b: {200}})

	// 400, quiet, execs a program of another name that holds a's
	// connection: its name changed, it is read whole.
	writeProc(t, proc, 400, rootProc(nil, "/bin/sh", "-c", "sleep 1"))
	writeStatNamed(t, proc, 400, 7000, "sh")
	read("400 new", nil, true, map[string][]int{a: {100}, b: {200}})
	read("400 quiet", nil, true, map[string][]int{a: {100}, b: {200}})
	reads("400 quiet", map[int]int{400: quietReads})
	if err := os.RemoveAll(filepath.Join(proc, "400")); err != nil {
		t.Fatal(err)
	}
	writeProc(t, proc, 400, rootProc([]int{30}, "/usr/sbin/glusterfs"))
	writeStatNamed(t, proc, 400, 7000, "glusterfs")
	read("400 exec-ed", nil, true, map[string][]int{a: {100, 400}, b: {200}})
	if err := os.RemoveAll(filepath.Join(proc, "400")); err != nil {
		t.Fatal(err)
	}

	// 300's PID goes to a new process (a later start), a root daemon of
	// b: read whole although 300 was quiet.
	if err := os.RemoveAll(filepath.Join(proc, "300")); err != nil {
		t.Fatal(err)
	}
	writeProc(t, proc, 300, rootProc([]int{31}, "/usr/sbin/glusterfs"))
	writeStat(t, proc, 300, 9000)
	read("300's PID reused", nil, true, map[string][]int{a: {100}, b: {200, 300}})

	// A process gone is forgotten.
	if err := os.RemoveAll(filepath.Join(proc, "300")); err != nil {
		t.Fatal(err)
	}
	writeProc(t, proc, 500, rootProc(nil, "/bin/sleep", "1000"))
	writeStat(t, proc, 500, 9100)
	read("300 gone", nil, true, map[string][]int{a: {100}, b: {200}})
	known.mu.Lock()
	_, kept := known.quiet[300]
	known.mu.Unlock()
	if kept {
		t.Error("300 is gone, still counted")
	}
	reads("300 gone", map[int]int{500: 1})
}

// TestSurveyReadsWholeWhenAMountLacksADaemon: a survey that skips the
// quiet processes and leaves a mount without a daemon reads every process
// whole after all: a quiet process that got the connection since, under
// its own name, is found.
func TestSurveyReadsWholeWhenAMountLacksADaemon(t *testing.T) {
	kubelet := t.TempDir()
	a := filepath.Join(kubelet, "pods/a/volumes/x~glusterfs/data")
	makeDirs(t, a)
	mi := writeMountInfo(t,
		"20 1 0:20 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/gv0 rw", a),
	)
	proc := t.TempDir()
	writeProc(t, proc, 100, rootProc([]int{30}, "/usr/sbin/glusterfs", a))
	writeStat(t, proc, 100, 5000)
	writeProc(t, proc, 200, rootProc(nil, "/usr/sbin/glusterfs"))
	writeStat(t, proc, 200, 5001)
	known := &Known{}
	survey := func() []int {
		t.Helper()
		r, err := Survey(context.Background(), Options{KubeletDir: kubelet, MountInfo: mi, ProcRoot: proc, Known: known, SkipQuiet: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Mounts) != 1 {
			t.Fatalf("mounts %+v, want a's", r.Mounts)
		}
		return r.Mounts[0].Daemons
	}
	for range quietReads {
		if got := survey(); !slices.Equal(got, []int{100}) {
			t.Fatalf("daemons %v, want [100]", got)
		}
	}
	if q := known.quietOf(200); q.reads != quietReads {
		t.Fatalf("200 counted quiet %d times, want %d", q.reads, quietReads)
	}
	// 100 dies; 200, quiet, takes a's connection under the same name.
	if err := os.RemoveAll(filepath.Join(proc, "100")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(proc, "200")); err != nil {
		t.Fatal(err)
	}
	writeProc(t, proc, 200, rootProc([]int{30}, "/usr/sbin/glusterfs", a))
	writeStat(t, proc, 200, 5001)
	if got := survey(); !slices.Equal(got, []int{200}) {
		t.Errorf("daemons %v after the quiet process took the connection, want [200] (read whole)", got)
	}
}
