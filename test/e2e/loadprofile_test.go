//go:build e2e && e2e_load

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

// envLoadProfiles names a directory: when set, each wave of TestLoad takes
// a CPU profile of the kubelet while its pods start (go tool pprof reads
// them), so that what the kubelet does more for a pod with a volume than
// for one with an emptyDir can be told apart. Unset, no profile is taken.
const envLoadProfiles = "LOAD_PROFILE_DIR"

// loadProfileSeconds is how long each profile runs from the wave's start:
// less than any wave of this machine takes until its pods are Running, so
// that every profile covers the same part of its wave.
const loadProfileSeconds = 18

// profileKubelet starts, when envLoadProfiles is set, a CPU profile of the
// bed's kubelet (through the API server's proxy to the node, the bed's
// admin credentials) and writes it to NAME-kubelet.pprof there; wait
// returns when it is written or failed, its error logged (a profile is a
// figure, not a verdict).
func profileKubelet(t *testing.T, bed *framework.Bed, name string) (wait func()) {
	dir := os.Getenv(envLoadProfiles)
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), (loadProfileSeconds+60)*time.Second)
		defer cancel()
		data, err := bed.Client.CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes", bed.Env.NodeName, "proxy/debug/pprof/profile").
			Param("seconds", strconv.Itoa(loadProfileSeconds)).DoRaw(ctx)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		path := filepath.Join(dir, name+"-kubelet.pprof")
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err != nil {
			t.Logf("the kubelet's CPU profile of wave %s: %v", name, err)
			return
		}
		t.Logf("the kubelet's CPU profile of wave %s, its first %d s: %s", name, loadProfileSeconds, path)
	}()
	return func() { <-done }
}

// profileName names a wave's profile after its test: TestLoad_socket.
func profileName(t *testing.T) string {
	return strings.ReplaceAll(t.Name(), "/", "_")
}
