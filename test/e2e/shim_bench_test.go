//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/node/shim/shimtest"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// BenchmarkShimLive runs `true` in a live mount pod, alternately through a
// minimal raw CRI ExecSync client process (test/tools/rawexecsync), through
// whole kubelet-exec-shim processes on the CRI path and on the exec socket
// path, through the helper alone on the CRI path, and, for scale, /bin/true
// and the shim's host fallback (a plugin with no registration). It reports
// the median of each, and the socket path against the host fallback:
//
//	sudo BED_REUSE=1 go test -tags e2e -run '^$' -bench ShimLive -benchtime 300x ./test/e2e/
//
// With SHIM_BENCH_BASE set to a git revision, that revision's shim runs
// too, on the host fallback and the socket path (base-shim-*): before and
// after in the same run.
func BenchmarkShimLive(b *testing.B) {
	bed := framework.Current(b)
	m, pod := startMountPod(b, bed, "shimbench")
	shimBin := buildShim(b)
	root, err := framework.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	raw := filepath.Join(b.TempDir(), "rawexecsync")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", raw, "./test/tools/rawexecsync")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build rawexecsync: %v\n%s", err, out)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	id := bed.RunningContainerID(b, pod.UID, "mount", time.Minute)
	env := append(os.Environ(), "CONTAINER_RUNTIME_ENDPOINT="+bed.Env.CRIEndpoint, shim.EnvRegistrationDir+"="+bed.Env.RegistrationDir)
	// The socket path measured is the shim's own: the socket proves the
	// container live, and neither the helper nor the runtime is asked.
	out, err := exec.Command(shimBin, "--registration-dir", bed.Env.RegistrationDir, "--verbose", "--exec-mode", "socket",
		"run", "--plugin", m.plugin, "--", "true").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "runtime not asked") {
		b.Fatalf("the shim's socket path is not its own: %v\n%s", err, out)
	}
	timed := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return time.Since(start)
	}
	helperBin := filepath.Join(filepath.Dir(shimBin), shim.HelperName)
	var baseBin string
	if rev := os.Getenv("SHIM_BENCH_BASE"); rev != "" {
		if baseBin, err = shimtest.BuildRevision(b.TempDir(), rev); err != nil {
			b.Fatal(err)
		}
	}
	var tTrue, tFallback, tRaw, tCRI, tHelper, tSocket, tBaseFallback, tBaseSocket []time.Duration
	b.ResetTimer()
	for range b.N {
		tTrue = append(tTrue, timed(truePath))
		tFallback = append(tFallback, timed(shimBin, "run", "--plugin", "e2e.mountcontainers.io/unregistered", "--", "true"))
		tRaw = append(tRaw, timed(raw, bed.Env.CRIEndpoint, id, "true"))
		tCRI = append(tCRI, timed(shimBin, "--exec-mode", "cri", "run", "--plugin", m.plugin, "--", "true"))
		tHelper = append(tHelper, timed(helperBin, "--exec-mode", "cri", "run", "--plugin", m.plugin, "--", "true"))
		tSocket = append(tSocket, timed(shimBin, "--exec-mode", "socket", "run", "--plugin", m.plugin, "--", "true"))
		if baseBin != "" {
			tBaseFallback = append(tBaseFallback, timed(baseBin, "run", "--plugin", "e2e.mountcontainers.io/unregistered", "--", "true"))
			tBaseSocket = append(tBaseSocket, timed(baseBin, "--exec-mode", "socket", "run", "--plugin", m.plugin, "--", "true"))
		}
	}
	b.StopTimer()
	median := func(ds []time.Duration) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(median(tTrue), "true-ms")
	b.ReportMetric(median(tFallback), "shim-host-ms")
	b.ReportMetric(median(tRaw), "raw-execsync-ms")
	b.ReportMetric(median(tCRI), "shim-cri-ms")
	b.ReportMetric(median(tHelper), "helper-cri-ms")
	b.ReportMetric(median(tSocket), "shim-socket-ms")
	b.ReportMetric(median(tSocket)/median(tFallback), "socket/host")
	if baseBin != "" {
		b.ReportMetric(median(tBaseFallback), "base-shim-host-ms")
		b.ReportMetric(median(tBaseSocket), "base-shim-socket-ms")
	}
}
