//go:build e2e && e2e_load

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

// envLoadProfiles names a directory: when set, each wave of TestLoad takes
// CPU profiles of the kubelet while its pods start, so that what the
// kubelet does more for a pod with a volume than for one with an emptyDir
// can be told apart (go tool pprof merges a wave's files: go tool pprof
// -top DIR/TestLoad_socket-kubelet-*.pprof). Unset, none is taken.
const envLoadProfiles = "LOAD_PROFILE_DIR"

// loadProfileChunk is the length of each profile: a wave is covered by
// consecutive ones from its start until its pods are Running, the last
// reaching at most this far past it.
const loadProfileChunk = 5 * time.Second

// profileKubelet starts, when envLoadProfiles is set, CPU profiles of the
// bed's kubelet (through the API server's proxy to the node, the bed's
// admin credentials), one after the other, written to
// NAME-kubelet-NN.pprof there; stop ends them after the one under way and
// returns when it is written. An error is logged, not a failure: a profile
// is a figure, not a verdict.
func profileKubelet(t *testing.T, bed *framework.Bed, name string) (stop func()) {
	dir := os.Getenv(envLoadProfiles)
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("the kubelet's CPU profiles of wave %s: %v", name, err)
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var n int
		var total time.Duration
		for ; ; n++ {
			select {
			case <-quit:
				t.Logf("the kubelet's CPU profiles of wave %s: %d of %s each, %s in all: %s", name, n, loadProfileChunk, total, filepath.Join(dir, name+"-kubelet-*.pprof"))
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), loadProfileChunk+time.Minute)
			data, err := bed.Client.CoreV1().RESTClient().Get().
				AbsPath("/api/v1/nodes", bed.Env.NodeName, "proxy/debug/pprof/profile").
				Param("seconds", strconv.Itoa(int(loadProfileChunk/time.Second))).DoRaw(ctx)
			cancel()
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-kubelet-%02d.pprof", name, n)), data, 0o644)
			}
			if err != nil {
				t.Logf("the kubelet's CPU profile %d of wave %s: %v", n, name, err)
				<-quit
				return
			}
			total += loadProfileChunk
		}
	}()
	var stopped bool
	return func() {
		if !stopped {
			stopped = true
			close(quit)
		}
		<-done
	}
}

// profileName names a wave's profiles after its test: TestLoad_socket.
func profileName(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", "_")
}
