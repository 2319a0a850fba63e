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
	"github.com/mountcontainers/mountcontainers/internal/pod/scope/systemdtest"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// fakeMount is a mount(8) that prints its PID and its cgroups first thing:
// a mount placed before it runs is in its scope from its start.
const fakeMount = `#!/bin/sh
echo "pid $$"
cat /proc/$$/cgroup
`

// earlyEnv points the scopes at backend, and puts fakeMount first in PATH
// as mount. cgroupfs: a cgroup parent of the test's own. systemd: the fake
// systemd (package systemdtest), returned, which moves no process but
// records each one's state when it was given.
func earlyEnv(t *testing.T, backend scope.Backend) *systemdtest.Systemd {
	t.Helper()
	t.Setenv("MOUNTPOD_SCOPES", "true")
	t.Setenv("MOUNTPOD_SCOPE_BACKEND", string(backend))
	t.Setenv("MOUNTPOD_PLUGINS", "kubernetes.io/glusterfs")
	var fake *systemdtest.Systemd
	switch backend {
	case scope.BackendCgroupfs:
		parent, _ := scopetest.Parent(t)
		t.Setenv("MOUNTPOD_SCOPE_PARENT", parent)
	case scope.BackendSystemd:
		bus := systemdtest.StartBus(t)
		fake = systemdtest.Serve(t, bus)
		t.Setenv("MOUNTPOD_SCOPE_SYSTEMD_SOCKETS", bus)
		t.Setenv("MOUNTPOD_SCOPE_CGROUP_ROOT", t.TempDir())
	default:
		t.Fatalf("no such backend %q", backend)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mount"), []byte(fakeMount), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return fake
}

// placedEarly says why the fakeMount whose output is out was not placed in
// the scope of target before it ran, or "" if it was. cgroupfs: its
// cgroups, as it printed them first thing, are the scope's. systemd (fake
// not nil): its PID was given to the scope's unit while it was stopped by
// its tracer ("t"), before its first instruction.
func placedEarly(fake *systemdtest.Systemd, target, out string) string {
	if fake == nil {
		if !strings.Contains(out, "/kubernetes.io~glusterfs/"+scope.Name(target)+"\n") {
			return fmt.Sprintf("it ran in:\n%s\nwant the scope %s", out, scope.Name(target))
		}
		return ""
	}
	var pid uint32
	if _, err := fmt.Sscanf(out, "pid %d", &pid); err != nil {
		return fmt.Sprintf("no PID in its output %q", out)
	}
	u, ok := fake.Unit(scope.Name(target) + ".scope")
	if !ok || len(u.PIDs) == 0 || u.PIDs[0] != pid || u.States[0] != "t" {
		return fmt.Sprintf("its unit %s is %+v (found: %v); want PID %d first, given in state t", scope.Name(target)+".scope", u, ok, pid)
	}
	return ""
}

// inScope reports whether the output of a fakeMount shows a scope.
func inScope(out string) bool { return strings.Contains(out, "/mount-") }

const earlyTarget = "/var/lib/kubelet/pods/p1/volumes/kubernetes.io~glusterfs/v1"

// backends are the scope backends the early placement is proven with.
var backends = []scope.Backend{scope.BackendCgroupfs, scope.BackendSystemd}

// TestMountsPlacedEarlyCRI: through CRI ExecSync (`mountpod exec-batch`),
// a mount of a FUSE client runs in its mount's scope from its first
// instruction, with either backend; any other mount stays where it was
// started.
func TestMountsPlacedEarlyCRI(t *testing.T) {
	for _, backend := range backends {
		t.Run(string(backend), func(t *testing.T) {
			fake := earlyEnv(t, backend)
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
			if got := string(rs[0].Stdout); inScope(got) || !strings.Contains(got, ":/") {
				t.Errorf("the ext4 mount ran in:\n%s\nwant no scope", got)
			}
			if fake != nil && len(fake.Calls()) != len(targets) {
				t.Errorf("the fake systemd was called %q; want a unit for each FUSE mount and nothing else", fake.Calls())
			}
			for i, target := range targets {
				if why := placedEarly(fake, target, string(rs[i+1].Stdout)); why != "" {
					t.Errorf("the FUSE mount at %s was not placed before it ran: %s", target, why)
				}
			}
		})
	}
}

// TestMountsPlacedEarlySocket: the same through the exec socket of serve.
func TestMountsPlacedEarlySocket(t *testing.T) {
	for _, backend := range backends {
		t.Run(string(backend), func(t *testing.T) {
			dir := setPodEnv(t)
			fake := earlyEnv(t, backend)
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
			if why := placedEarly(fake, earlyTarget, out.String()); why != "" {
				t.Errorf("the FUSE mount was not placed before it ran: %s", why)
			}
		})
	}
}
