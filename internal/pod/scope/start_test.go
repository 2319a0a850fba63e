package scope

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartFailures(t *testing.T) {
	root := fakeHybrid(t)
	m := newFake(t, Config{CgroupRoot: root})
	marker := filepath.Join(t.TempDir(), "ran")

	cmd := exec.Command("touch", marker)
	if _, err := Start(m, "../etc", targetA, cmd); err == nil || cmd.Process != nil {
		t.Errorf("Start with a bad plugin = %v, started %v", err, cmd.Process != nil)
	}
	cmd = exec.Command("no-such-command-here")
	if _, err := Start(m, glusterfs, targetA, cmd); ExitCode(err) != ExitNotFound || cmd.Process != nil {
		t.Errorf("Start of a missing command = %v (exit %d)", err, ExitCode(err))
	}

	// Placement fails once the gate runs: the command never does.
	if err := os.Remove(filepath.Join(root, "cpuset/cpuset.mems")); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("touch", marker)
	_, err := Start(m, glusterfs, targetA, cmd)
	if err == nil || ExitCode(err) != ExitFailed || !strings.Contains(err.Error(), "cpuset.mems") {
		t.Errorf("Start with a failing placement = %v", err)
	}
	if cmd.ProcessState == nil {
		t.Error("the gate was not waited for")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran although placement failed: %v", err)
	}
}

func TestStartFake(t *testing.T) {
	m := newFake(t, Config{CgroupRoot: fakeHybrid(t)})
	cmd := exec.Command("sh", "-c", `echo "$0|$1"; echo $$`, "zero", "one two")
	cmd.ExtraFiles = []*os.File{os.Stdin} // Start's pipe goes after these
	var stdout strings.Builder
	cmd.Stdout = &stdout
	s, err := Start(m, glusterfs, targetA, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 || lines[0] != "zero|one two" {
		t.Fatalf("output %q; want the arguments unchanged, then the PID", stdout.String())
	}
	// The PID that was placed is the one that ran the command.
	if got := readTrim(t, filepath.Join(s.Paths[0], "cgroup.procs")); got != lines[1] {
		t.Errorf("placed PID %s, the command ran as %s", got, lines[1])
	}
}

func TestStartReal(t *testing.T) {
	m, _ := realCgroupfs(t, Config{})
	cmd := exec.Command("sh", "-c", `sleep 30 >/dev/null 2>&1 & echo $!; cat /proc/$$/cgroup`)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	s, err := Start(m, glusterfs, targetA, cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	first, shCgroup, _ := strings.Cut(stdout.String(), "\n")
	daemon, err := strconv.Atoi(first)
	if err != nil {
		t.Fatalf("output %q", stdout.String())
	}
	defer func() {
		// The orphan is not ours to wait for: poll until the scope empties.
		syscall.Kill(daemon, syscall.SIGKILL)
		deadline := time.Now().Add(5 * time.Second)
		for err = m.Remove(glusterfs, s.Name); errors.Is(err, ErrPopulated) && time.Now().Before(deadline); err = m.Remove(glusterfs, s.Name) {
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			t.Error(err)
		}
	}()
	sh, err := ParseMembership(strings.NewReader(shCgroup))
	if err != nil || !sh.In(s.Cgroup) {
		t.Errorf("the command's cgroups:\n%s\nwant %s everywhere", shCgroup, s.Cgroup)
	}
	if got, err := ProcMembership(daemon); err != nil || !got.In(s.Cgroup) {
		t.Errorf("its background child's cgroups = %v, %v; want %s", got, err, s.Cgroup)
	}
	if list, _ := m.List(glusterfs); len(list) != 1 || !slices.Contains(list[0].PIDs, daemon) {
		t.Errorf("List = %+v; want the background child %d", list, daemon)
	}
}

// BenchmarkStart measures what Start adds to running a command on the real
// cgroup file system (root only): each op runs `true` through Start (the
// gate, Place in this process, exec) and, in the same run, `true` alone and
// `sh -c 'exec "$@"' sh true` (the gate's shell without the placement).
// Reported: the medians, the median difference (added-ms) and the ratio.
func BenchmarkStart(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to write the cgroup file system")
	}
	parent := "mountcontainers-bench-start-" + strconv.Itoa(os.Getpid())
	m, err := New(Config{Backend: BackendCgroupfs, Parent: parent})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := m.Remove(glusterfs, Name("/mnt/bench")); err != nil {
			b.Error(err)
		}
		for _, h := range m.(*cgroupfs).layout.Hierarchies {
			for _, d := range []string{filepath.Join(h.Path, parent, "kubernetes.io~glusterfs"), filepath.Join(h.Path, parent)} {
				if err := rmdir(d); err != nil {
					b.Errorf("leaked cgroup: %v", err)
				}
			}
		}
	}()
	run := func(scoped bool, argv ...string) time.Duration {
		if len(argv) == 0 {
			argv = []string{"true"}
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		start := time.Now()
		if scoped {
			if _, err := Start(m, glusterfs, "/mnt/bench", cmd); err != nil {
				b.Fatal(err)
			}
		} else if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	run(true) // the parents exist from here on, as on a node
	var raw, scoped, added, shell []time.Duration
	b.ResetTimer()
	for range b.N {
		r, s := run(false), run(true)
		raw, scoped, added = append(raw, r), append(scoped, s), append(added, s-r)
		shell = append(shell, run(false, Shell, "-c", `exec "$@"`, "sh", "true"))
	}
	b.StopTimer()
	reportMedians(b, raw, scoped, added)
	b.ReportMetric(float64(median(shell))/float64(time.Millisecond), "shell-ms")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// reportMedians reports the medians of a benchmark's raw and scoped runs.
func reportMedians(b *testing.B, raw, scoped, added []time.Duration) {
	med := median
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(med(raw)), "raw-ms")
	b.ReportMetric(ms(med(scoped)), "scope-ms")
	b.ReportMetric(ms(med(added)), "added-ms")
	b.ReportMetric(float64(med(scoped))/float64(med(raw)), "scope/raw")
}
