package shim_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkFallbackProcess runs `kubelet-exec-shim run -- true` as a whole
// process (no runtime, no registration: the host fallback) and /bin/true
// alternately, and reports what the shim adds per command.
func BenchmarkFallbackProcess(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	reg := b.TempDir()
	env := append(os.Environ(), "CONTAINER_RUNTIME_ENDPOINT=unix://"+filepath.Join(b.TempDir(), "none.sock"))
	var raw, ours time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
		raw += time.Since(start)
		start = time.Now()
		cmd := exec.Command(shimBin, "--registration-dir", reg, "run", "--plugin", "kubernetes.io/rbd", "--", "true")
		cmd.Env = env
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(raw.Microseconds())/n/1000, "raw-ms/op")
	b.ReportMetric(float64(ours.Microseconds())/n/1000, "shim-ms/op")
	b.ReportMetric(float64((ours-raw).Microseconds())/n/1000, "added-ms/op")
}
