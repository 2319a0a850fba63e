package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
	"github.com/mountcontainers/mountcontainers/internal/pod/scope/scopetest"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// fakeMount is a mount(8) that prints its cgroups first thing: a mount
// placed before it runs is in its scope from its start.
const fakeMount = `#!/bin/sh
cat /proc/$$/cgroup
`

// earlyEnv points the scopes at a cgroup parent of the test's own, with the
// cgroupfs backend, and puts fakeMount first in PATH as mount.
func earlyEnv(t *testing.T) {
	t.Helper()
	parent, _ := scopetest.Parent(t)
	t.Setenv("MOUNTPOD_SCOPES", "true")
	t.Setenv("MOUNTPOD_SCOPE_BACKEND", "cgroupfs")
	t.Setenv("MOUNTPOD_SCOPE_PARENT", parent)
	t.Setenv("MOUNTPOD_PLUGINS", "kubernetes.io/glusterfs")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mount"), []byte(fakeMount), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
}

// inScopeOf reports whether the cgroups a fakeMount printed put it in the
// scope of target.
func inScopeOf(cgroups, target string) bool {
	return strings.Contains(cgroups, "/kubernetes.io~glusterfs/"+scope.Name(target)+"\n")
}

const earlyTarget = "/var/lib/kubelet/pods/p1/volumes/kubernetes.io~glusterfs/v1"

// TestMountsPlacedEarlyCRI: through CRI ExecSync (`mountpod exec-batch`),
// a mount of a FUSE client runs in its mount's scope from its first
// instruction; any other mount stays where it was started.
func TestMountsPlacedEarlyCRI(t *testing.T) {
	earlyEnv(t)
	other := []string{"mount", "-t", "ext4", "/dev/rbd0", "/var/lib/kubelet/plugins/kubernetes.io/rbd/mounts/rbd-image-x"}
	reqs := []wire.Request{{Argv: other, TimeoutMs: 60_000}}
	// A batch of a wave: sixteen at once, each placed before it runs.
	var targets []string
	for i := range 16 {
		target := fmt.Sprintf("%s-%d", earlyTarget, i)
		targets = append(targets, target)
		reqs = append(reqs, wire.Request{Argv: []string{"mount", "-t", "glusterfs", "-o", "ro,log-level=WARNING", "srv:/vol", target}, TimeoutMs: 60_000})
	}
	args, err := wire.EncodeRequests(reqs)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runApp(context.Background(), append([]string{"exec-batch"}, args...)...)
	if code != 0 {
		t.Fatalf("exec-batch = %d, stderr %q", code, stderr)
	}
	rs, err := wire.DecodeResults([]byte(stdout), len(reqs))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(rs[0].Stdout); strings.Contains(got, "/mount-") || !strings.Contains(got, ":/") {
		t.Errorf("the ext4 mount ran in:\n%s\nwant no scope", got)
	}
	for i, target := range targets {
		if got := string(rs[i+1].Stdout); !inScopeOf(got, target) {
			t.Errorf("the FUSE mount at %s ran in:\n%s\nwant its scope (%s)", target, got, scope.Name(target))
		}
	}
}

// TestMountsPlacedEarlySocket: the same through the exec socket of serve.
func TestMountsPlacedEarlySocket(t *testing.T) {
	dir := setPodEnv(t)
	earlyEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr string
	go func() {
		var code int
		code, _, stderr = runApp(ctx, "serve")
		done <- code
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d after cancel; stderr:\n%s", code, stderr)
		}
		if !strings.Contains(stderr, "FUSE mounts are placed in their scopes before mount(8) runs") {
			t.Errorf("serve's log does not say that mounts are placed early:\n%s", stderr)
		}
	}()
	sockName := execclient.SocketName(pod.PodUID)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if r, ok, err := registration.Read(dir, "kubernetes.io/glusterfs"); err == nil && ok && r.ExecSocket == sockName {
			break
		}
		if time.Now().After(deadline) { // a hang guard
			t.Fatal("not registered with the exec socket a minute after serve started")
		}
	}
	_, c := dialExecSocket(t, dir, sockName)
	var out bytes.Buffer
	p, err := c.Start(ctx, execclient.Command{Argv: []string{"mount", "-t", "glusterfs", "srv:/vol", earlyTarget}, Stdout: &out,
		ExpectPodUID: pod.PodUID, ExpectContainer: pod.ContainerName})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(); err != nil || res.Code != 0 {
		t.Fatalf("mount: %+v, %v", res, err)
	}
	if !inScopeOf(out.String(), earlyTarget) {
		t.Errorf("the FUSE mount ran in:\n%s\nwant the scope of %s (%s)", out.String(), earlyTarget, scope.Name(earlyTarget))
	}
}
