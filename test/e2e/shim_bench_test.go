//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shim"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// BenchmarkShimLive runs `true` in a live mount pod, alternately through a
// minimal raw CRI ExecSync client process (test/tools/rawexecsync) and
// through whole kubelet-exec-shim processes on the CRI path and on the exec
// socket path, and reports each and what the shim adds to the raw client:
//
//	sudo BED_REUSE=1 go test -tags e2e -run '^$' -bench ShimLive -benchtime 100x ./test/e2e/
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
	id := bed.RunningContainerID(b, pod.UID, "mount", time.Minute)
	env := append(os.Environ(), "CONTAINER_RUNTIME_ENDPOINT="+bed.Env.CRIEndpoint, "PLUGIN_CONTAINERS_DIR="+bed.Env.RegistrationDir)
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
	var tRaw, tCRI, tHelper, tSocket time.Duration
	b.ResetTimer()
	for range b.N {
		tRaw += timed(raw, bed.Env.CRIEndpoint, id, "true")
		tCRI += timed(shimBin, "--exec-mode", "cri", "run", "--plugin", m.plugin, "--", "true")
		tHelper += timed(helperBin, "--exec-mode", "cri", "run", "--plugin", m.plugin, "--", "true")
		tSocket += timed(shimBin, "--exec-mode", "socket", "run", "--plugin", m.plugin, "--", "true")
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) / 1000 }
	b.ReportMetric(ms(tRaw), "raw-execsync-ms/op")
	b.ReportMetric(ms(tCRI), "shim-cri-ms/op")
	b.ReportMetric(ms(tSocket), "shim-socket-ms/op")
	b.ReportMetric(ms(tCRI-tRaw), "shim-cri-added-ms/op")
	// The shim hands a live plugin over to its helper; run directly, the
	// helper shows what that handover costs.
	b.ReportMetric(ms(tHelper), "helper-cri-ms/op")
	b.ReportMetric(ms(tCRI-tHelper), "handover-ms/op")
}
