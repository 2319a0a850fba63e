package shim_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// TestExecSocket runs the shim against a registration whose container the
// (fake) runtime lists as running and whose exec service answers: stdin is
// streamed, exit codes kept, and status and --exec-mode show the path.
func TestExecSocket(t *testing.T) {
	const plugin = "kubernetes.io/glusterfs"
	reg, env, stop := liveRegistration(t, plugin)

	r := run(t, env, "hello\nworld\n", shimBin, "--verbose", "run", "--plugin", plugin, "--", "sh", "-c", "cat; echo err >&2; exit 7")
	if r.code != 7 || r.stdout != "hello\nworld\n" || !strings.HasPrefix(r.stderr, "err\n") && !strings.Contains(r.stderr, "\nerr\n") {
		t.Fatalf("run via socket: %+v", r)
	}
	if !strings.Contains(r.stderr, "via=exec-socket") {
		t.Errorf("--verbose does not say the exec socket was used: %q", r.stderr)
	}
	// Through ExecSync stdin is refused, as before.
	r = run(t, env, "hello\n", shimBin, "--exec-mode", "cri", "run", "--plugin", plugin, "--", "cat")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "standard input") {
		t.Fatalf("run via ExecSync with stdin: %+v", r)
	}
	r = run(t, append(env, shim.EnvExecMode+"=bogus"), "", shimBin, "status")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "want auto, cri or socket") {
		t.Fatalf("bad exec mode: %+v", r)
	}
	for _, tc := range []struct{ mode, via, reason string }{
		{"auto", "exec-socket", "exec socket answers"},
		{"cri", "cri-exec-sync", "exec mode cri"},
	} {
		r = run(t, env, "", shimBin, "--exec-mode", tc.mode, "status", "-o", "json")
		var sts []shim.Status
		if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || len(sts) != 1 {
			t.Fatalf("status: %v, %+v", err, r)
		}
		if s := sts[0]; !s.Live || s.Via != tc.via || !strings.Contains(s.ViaReason, tc.reason) || s.ExecSocket != reg.ExecSocket {
			t.Errorf("status with --exec-mode %s: %+v", tc.mode, s)
		}
	}
	r = run(t, env, "", shimBin, "status")
	if id := ownContainerID(t); !strings.Contains(r.stdout, "yes: container "+id[:min(12, len(id))]) || !strings.Contains(r.stdout, " via exec socket") {
		t.Errorf("status table: %q", r.stdout)
	}
	// The service goes away: auto falls back to ExecSync, socket mode fails.
	stop()
	r = run(t, env, "", shimBin, "run", "--plugin", plugin, "--", "echo", "hi")
	if r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("run after the service stopped: %+v", r)
	}
	r = run(t, env, "", shimBin, "--exec-mode", "socket", "run", "--plugin", plugin, "--", "echo", "hi")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "exec socket unavailable") {
		t.Fatalf("socket mode without the service: %+v", r)
	}
}

// liveRegistration registers plugin in a new directory for a container
// that a fake runtime lists as running, whose ExecSync runs commands here,
// and whose exec service answers. It returns the registration, the shim's
// environment and a function that stops the exec service.
func liveRegistration(t *testing.T, plugin string) (registration.Registration, []string, func()) {
	base, err := os.MkdirTemp("", "mcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "pc")
	reg := validRegistration()
	reg.ExecSocket = execclient.SocketName(reg.PodUID)
	if err := registration.Write(dir, plugin, reg); err != nil {
		t.Fatal(err)
	}
	rt := crifake.NewFakeRuntime()
	endpoint := rt.Serve(t)
	// The exec service runs in this process: the container the runtime
	// lists is named after this process's own cgroup, so that the shim's
	// check of the serving process (its cgroup must name the container)
	// holds on the real process table.
	rt.SetContainers(crifake.Container(ownContainerID(t), reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	rt.SetExec(crifake.RunLocally)
	stop := execservertest.Serve(t, filepath.Join(dir, reg.ExecSocket), execserver.Config{Identity: execserver.Identity{
		PodNamespace: reg.PodNamespace, PodName: reg.PodName, PodUID: reg.PodUID, ContainerName: reg.ContainerName,
	}})
	return reg, []string{"CONTAINER_RUNTIME_ENDPOINT=" + endpoint, shim.EnvRegistrationDir + "=" + dir}, stop
}

// TestStatusListsTheMountsInThePluginsScopes checks that status asks a
// live plugin's container for its mounts (`mountpod status -o json`), on
// each path, and keeps those in the plugin's scopes; and that a container
// that cannot answer is named, not taken for one without mounts.
func TestStatusListsTheMountsInThePluginsScopes(t *testing.T) {
	const plugin = "kubernetes.io/glusterfs"
	_, env, _ := liveRegistration(t, plugin)
	// The stand-in for the image's mountpod: ExecSync and the exec service
	// both run commands in this process's environment.
	bin := t.TempDir()
	report := `{"mounts": [
		{"target": "/k/pods/a/volumes/v1", "source": "s:/v1", "fstype": "fuse.glusterfs", "daemons": [41], "plugin": "kubernetes.io/glusterfs", "scope": "mount-1", "scoped": true, "healthy": true},
		{"target": "/k/pods/b/volumes/v2", "source": "s:/v2", "fstype": "fuse.glusterfs", "daemons": [42], "plugin": "kubernetes.io/glusterfs", "scope": "mount-2", "scoped": true, "healthy": false, "error": "transport endpoint is not connected"},
		{"target": "/k/pods/c/volumes/v3", "source": "m:/", "fstype": "fuse.ceph-fuse", "daemons": [43], "plugin": "kubernetes.io/cephfs", "scope": "mount-3", "scoped": true, "healthy": true},
		{"target": "/k/pods/d/volumes/v4", "source": "s:/v4", "fstype": "fuse.glusterfs", "daemons": [44], "scoped": false, "healthy": true}
	], "orphanScopes": []}`
	script := "#!/bin/sh\n[ \"$*\" = \"status -o json --plugins " + plugin + "\" ] || { echo \"unexpected arguments: $*\" >&2; exit 2; }\ncat <<'EOF'\n" + report + "\nEOF\n"
	if err := os.WriteFile(filepath.Join(bin, "mountpod"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))

	for _, tc := range []struct{ mode, via string }{{"socket", "exec-socket"}, {"cri", "cri-exec-sync"}} {
		t.Run(tc.mode, func(t *testing.T) {
			r := run(t, env, "", shimBin, "--exec-mode", tc.mode, "status", "-o", "json")
			var sts []shim.Status
			if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || len(sts) != 1 {
				t.Fatalf("status: %v, %+v", err, r)
			}
			s := sts[0]
			if !s.Live || s.Via != tc.via || s.MountsError != "" {
				t.Fatalf("status = %+v; want live via %s, mounts asked", s, tc.via)
			}
			var targets []string
			for _, m := range s.Mounts {
				targets = append(targets, m.Target)
			}
			if want := []string{"/k/pods/a/volumes/v1", "/k/pods/b/volumes/v2"}; !slices.Equal(targets, want) {
				t.Errorf("mounts = %v, want %v (the plugin's scoped mounts only)", targets, want)
			}
			if len(s.Mounts) == 2 && (!s.Mounts[0].Scoped || !s.Mounts[0].Healthy || s.Mounts[1].Healthy || s.Mounts[1].Error == "" || s.Mounts[0].Daemons[0] != 41) {
				t.Errorf("mounts = %+v; want the report's fields kept", s.Mounts)
			}
			r = run(t, env, "", shimBin, "--exec-mode", tc.mode, "status")
			if !strings.Contains(r.stdout, "2 (1 not answering)") {
				t.Errorf("status table does not count the mounts: %q", r.stdout)
			}
		})
	}

	// A container without mountpod (not a mount pod image) is named.
	if err := os.Remove(filepath.Join(bin, "mountpod")); err != nil {
		t.Fatal(err)
	}
	r := run(t, env, "", shimBin, "status", "-o", "json")
	var sts []shim.Status
	if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || len(sts) != 1 {
		t.Fatalf("status: %v, %+v", err, r)
	}
	if s := sts[0]; !s.Live || s.Mounts != nil || !strings.Contains(s.MountsError, "registered container of "+plugin) {
		t.Errorf("status without mountpod in the container = %+v; want live, no mounts, an error naming the plugin", s)
	}
	if r := run(t, env, "", shimBin, "status"); !strings.Contains(r.stdout, "mounts unknown") {
		t.Errorf("status table does not say the mounts are unknown: %q", r.stdout)
	}
}

// ownContainerID returns the last element of this process's first cgroup
// path other than "/", which that path therefore contains, or "abc" when
// every path is "/" (the check cannot tell then).
func ownContainerID(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[2] != "/" {
			return filepath.Base(parts[2])
		}
	}
	return "abc"
}

// TestOldRegistrationDirName: PLUGIN_CONTAINERS_DIR, the registration
// directory's variable before the shim's variables had its prefix, still
// leads the shim to the registration, and is warned of once.
func TestOldRegistrationDirName(t *testing.T) {
	const plugin = "kubernetes.io/rbd"
	_, env, _ := liveRegistration(t, plugin)
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, shim.EnvRegistrationDir+"="); ok {
			env[i] = "PLUGIN_CONTAINERS_DIR=" + v
		}
	}
	r := run(t, env, "", shimBin, "--verbose", "--exec-mode", "socket", "run", "--plugin", plugin, "--", "echo", "hi")
	if r.code != 0 || r.stdout != "hi\n" || !strings.Contains(r.stderr, "decision.via=exec-socket") {
		t.Fatalf("run with the old variable: %+v; want it through the registration's exec socket", r)
	}
	if w := "PLUGIN_CONTAINERS_DIR is deprecated: set " + shim.EnvRegistrationDir; strings.Count(r.stderr, w) != 1 {
		t.Errorf("stderr %q does not say once %q", r.stderr, w)
	}
}
