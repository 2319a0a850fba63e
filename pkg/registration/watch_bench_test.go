package registration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// watchChildEnv makes the test binary a process that only watches a
// directory, so that its CPU time can be measured apart from the writer's.
const watchChildEnv = "REGISTRATION_TEST_WATCH_DIR"

func watchChild(dir string) {
	ch, err := Watch(context.Background(), dir, WatchOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("ready")
	for ev := range ch {
		_, _, _ = Read(dir, ev.Plugin) // what a consumer does
	}
}

// cpuTime returns the user+system CPU time of pid.
func cpuTime(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// BenchmarkWatchStorm measures the CPU a watcher spends while another
// process writes 1000 registration files a second into its directory, each
// op being one write. The figure that matters is watcher-cpu-%: the share
// of one core the watching process used, against the writer's own share
// (writer-cpu-%) in the same run.
func BenchmarkWatchStorm(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "plugin-containers")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), watchChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	data, _ := Encode(validReg())
	names := []string{"kubernetes.io~glusterfs.json", "kubernetes.io~rbd.json", "example.com~x.json", "notes.txt"}

	child0 := cpuTime(b, cmd.Process.Pid)
	self0 := cpuTime(b, os.Getpid())
	start := time.Now()
	b.ResetTimer()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := 0; i < b.N; i++ {
		<-tick.C
		if err := os.WriteFile(filepath.Join(dir, names[i%len(names)]), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	elapsed := time.Since(start)
	time.Sleep(2 * DefaultMaxDelay) // let the last batch be handled
	child := cpuTime(b, cmd.Process.Pid) - child0
	writer := cpuTime(b, os.Getpid()) - self0
	b.ReportMetric(100*child.Seconds()/elapsed.Seconds(), "watcher-cpu-%")
	b.ReportMetric(100*writer.Seconds()/elapsed.Seconds(), "writer-cpu-%")
}
