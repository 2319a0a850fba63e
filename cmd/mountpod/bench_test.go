package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// BenchmarkServeStorm runs the real mountpod binary and measures, from
// /proc, its steady-state RSS and the CPU it uses while the benchmark writes
// to the registration directory at stormRate writes per second; one op is
// one write. For the figure in BENCHMARKS.md (a 10 s storm):
//
//	go test ./cmd/mountpod -run '^$' -bench ServeStorm -benchtime 10000x
//
// Each storm runs with metrics off and on (a loopback port, scraped once
// before the RSS is read). The binary is built as the image builds it
// (releaseBuild): a default build links libc through cgo and is about
// 2.5 MiB larger in memory.
//
// With MOUNTPOD_BENCH_BASE set to a git revision, the binary of that
// revision is built the same way and runs every storm too, interleaved,
// as "base/..." sub-benchmarks: before and after in the same run.
//
// Reported: writes/s (the storm's real rate), daemon-cpu-% (of one core, over the storm), daemon-cpu/writer-cpu
// (the daemon's CPU time against the writer's own, measured in the same run),
// rss-KiB and anon-KiB (VmRSS and RssAnon, mountpod's own memory, after
// start, before the storm), end-rss-KiB and end-anon-KiB (3 s after the
// storm, scraped again with metrics on) and peak-rss-KiB (VmHWM at the
// end).
func BenchmarkServeStorm(b *testing.B) {
	bins := []struct{ prefix, path string }{{"", buildRelease(b, ".")}}
	if rev := os.Getenv("MOUNTPOD_BENCH_BASE"); rev != "" {
		bins = append(bins, struct{ prefix, path string }{"base/", buildRevision(b, rev)})
	}
	want := pod
	want.ExecSocket = execclient.SocketName(pod.PodUID)
	other := registration.Registration{PodNamespace: "kube-system", PodName: "mount-other", PodUID: "0c9f6a2e-9999-4222-8333-444455556666", ContainerName: "mount"}
	foreign, err := registration.Encode(other)
	if err != nil {
		b.Fatal(err)
	}
	storms := []struct {
		name string
		// target is the plugin whose file is written; the daemon serves
		// kubernetes.io/rbd and kubernetes.io/glusterfs.
		target  string
		content []byte
		atomic  bool
	}{
		// Another pod's registration renamed over the daemon's own file,
		// as a competing mount pod writes it: the daemon yields once.
		{"foreign", "kubernetes.io/glusterfs", foreign, true},
		// Garbage written in place over the daemon's own file: restored at
		// most once per second.
		{"garbage", "kubernetes.io/glusterfs", []byte("garbage"), false},
		// Registrations of a plugin the daemon does not serve.
		{"unrelated", "kubernetes.io/cephfs", foreign, true},
	}
	for _, s := range storms {
		for _, withMetrics := range []bool{false, true} {
			for _, bin := range bins {
				b.Run(fmt.Sprintf("%s%s/metrics=%t", bin.prefix, s.name, withMetrics), func(b *testing.B) {
					serveStorm(b, bin.path, want, s.target, s.content, s.atomic, withMetrics)
				})
			}
		}
	}
}

// releaseBuild are the flags of images/Dockerfile's go build, but the
// version's -X flags.
var releaseBuild = []string{"build", "-trimpath", "-tags", "urfave_cli_no_docs,grpcnotrace", "-ldflags", "-s -w"}

// buildRelease builds the mountpod command in dir (cmd/mountpod of a
// module) as the image does, with CGO_ENABLED=0, and returns the binary.
func buildRelease(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "mountpod")
	cmd := exec.Command("go", append(releaseBuild, "-o", bin, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	return bin
}

// buildRevision builds cmd/mountpod of the repository's revision rev (git
// archive into a temporary directory) as buildRelease does.
func buildRevision(b *testing.B, rev string) string {
	b.Helper()
	src := b.TempDir()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		b.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	// From the top: in a subdirectory, git archive archives that only.
	archive := exec.Command("git", "archive", "--format=tar", rev)
	archive.Dir = strings.TrimSpace(string(top))
	tar := exec.Command("tar", "-x", "-C", src)
	if tar.Stdin, err = archive.StdoutPipe(); err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	archive.Stderr, tar.Stderr = &stderr, &stderr
	if err := tar.Start(); err != nil {
		b.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		b.Fatalf("git archive %s: %v\n%s", rev, err, stderr.String())
	}
	if err := tar.Wait(); err != nil {
		b.Fatalf("tar: %v\n%s", err, stderr.String())
	}
	return buildRelease(b, filepath.Join(src, "cmd", "mountpod"))
}

// serveStorm is one storm of BenchmarkServeStorm: with metrics, serve
// listens on a free loopback port and is scraped once before the RSS is
// read, as Prometheus would have done by then.
func serveStorm(b *testing.B, bin string, want registration.Registration, target string, content []byte, atomic, withMetrics bool) {
	// A short path: serve runs its exec service, as by default.
	dir := filepath.Join(shortTempDir(b), "plugin-containers")
	metricsAddr := ""
	if withMetrics {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		metricsAddr = l.Addr().String()
		l.Close()
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"MOUNTPOD_POD_NAMESPACE="+pod.PodNamespace, "MOUNTPOD_POD_NAME="+pod.PodName, "MOUNTPOD_POD_UID="+pod.PodUID, "MOUNTPOD_CONTAINER_NAME="+pod.ContainerName,
		"MOUNTPOD_REGISTRATION_DIR="+dir, "MOUNTPOD_PLUGINS=kubernetes.io/rbd,kubernetes.io/glusterfs", "MOUNTPOD_REQUIRE_TOOLS=", "MOUNTPOD_EXEC_BATCH=none",
		"MOUNTPOD_METRICS_ADDRESS="+metricsAddr)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Errorf("mountpod serve: %v\n%s", err, logs.String())
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if r, ok, _ := registration.Read(dir, "kubernetes.io/glusterfs"); ok && r == want {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not registered within 10s\n%s", logs.String())
		}
	}
	scrape := func() {
		if !withMetrics {
			return
		}
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			b.Fatalf("scrape: %v\n%s", err, logs.String())
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	scrape()
	time.Sleep(time.Second) // settle: steady state
	pid := cmd.Process.Pid
	rss, anon := procStatusKiB(b, pid, "VmRSS"), procStatusKiB(b, pid, "RssAnon")

	path, _ := registration.Path(dir, target)
	tmp := filepath.Join(dir, ".storm.tmp")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, writer0 := procCPU(b, pid), threadCPU(b)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		// Pace to stormRate without drifting.
		if d := time.Until(start.Add(time.Duration(i) * time.Second / stormRate)); d > 0 {
			time.Sleep(d)
		}
		if atomic {
			if err := os.WriteFile(tmp, content, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				b.Fatal(err)
			}
		} else if err := os.WriteFile(path, content, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
	// Let the last batch (at most MaxDelay behind) be handled.
	time.Sleep(registration.DefaultMaxDelay + 100*time.Millisecond)
	wall := time.Since(start)
	b.StopTimer()
	cpu, writer := procCPU(b, pid)-cpu0, threadCPU(b)-writer0
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "daemon-cpu-%")
	if writer > 0 {
		b.ReportMetric(cpu.Seconds()/writer.Seconds(), "daemon-cpu/writer-cpu")
	}
	b.ReportMetric(float64(rss), "rss-KiB")
	b.ReportMetric(float64(anon), "anon-KiB")
	scrape()
	// Steady state after the storm: serve's memory trim looks once a
	// second and acts on the first quiet look.
	time.Sleep(3 * time.Second)
	b.ReportMetric(float64(procStatusKiB(b, pid, "VmRSS")), "end-rss-KiB")
	b.ReportMetric(float64(procStatusKiB(b, pid, "RssAnon")), "end-anon-KiB")
	b.ReportMetric(float64(procStatusKiB(b, pid, "VmHWM")), "peak-rss-KiB")
}

// stormRate is the writes per second of BenchmarkServeStorm.
const stormRate = 1000

// procCPU returns the user+system CPU time of process pid, all threads.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may contain spaces: split after it.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parse /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// threadCPU returns the CPU time of the calling OS thread.
func threadCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatusKiB returns a "kB" field of /proc/PID/status.
func procStatusKiB(b *testing.B, pid int, field string) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if ok && name == field {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
