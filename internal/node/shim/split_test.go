package shim_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/node/shim/shimtest"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// TestShimDoesNotLinkTheRuntimeClient keeps the host fallback's start-up
// small (BENCHMARKS.md): kubelet-exec-shim must not link gRPC, the protobuf
// runtime or the CRI API; kubelet-exec-shim-cri does. Of protobuf, the shim
// links only the wire encoding (protowire, for package execclient) and what
// it imports.
func TestShimDoesNotLinkTheRuntimeClient(t *testing.T) {
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", "-tags", shimtest.ReleaseTags, pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	wire := deps("google.golang.org/protobuf/encoding/protowire")
	heavy := func(dep string) bool {
		if slices.Contains(wire, dep) {
			return false
		}
		for _, prefix := range []string{
			"google.golang.org/grpc", "google.golang.org/protobuf", "k8s.io/cri-api",
			"github.com/mountcontainers/mountcontainers/pkg/exec", "github.com/mountcontainers/mountcontainers/pkg/cri",
		} {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				return true
			}
		}
		return false
	}
	for _, d := range deps("github.com/mountcontainers/mountcontainers/cmd/kubelet-exec-shim") {
		if heavy(d) {
			t.Errorf("kubelet-exec-shim links %s", d)
		}
	}
	n := 0
	for _, d := range deps("github.com/mountcontainers/mountcontainers/cmd/kubelet-exec-shim-cri") {
		if heavy(d) {
			n++
		}
	}
	if n == 0 {
		t.Error("kubelet-exec-shim-cri links none of the runtime client's packages: the check above proves nothing")
	}
}

// shimAlone copies the shim, without its helper, into a directory of its own.
func shimAlone(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(shimBin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), shim.BinaryName)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestHostFallbackNeedsNoHelper(t *testing.T) {
	bin := shimAlone(t)
	r := run(t, noRuntime(t), "", bin, "--verbose", "--registration-dir", t.TempDir(), "run", "--plugin", "kubernetes.io/rbd", "--", "sh", "-c", "echo ok; exit 5")
	if r.code != 5 || r.stdout != "ok\n" || !strings.Contains(r.stderr, `decision.plugin=kubernetes.io/rbd decision.where=host decision.reason="not registered"`) {
		t.Fatalf("code %d, stdout %q, stderr %q; want 5, ok and the decision logged", r.code, r.stdout, r.stderr)
	}
}

// An empty exec mode (say, a variable set to nothing in a manifest) is the
// default, as it always was; a wrong one is refused.
func TestEmptyExecModeIsTheDefault(t *testing.T) {
	for _, env := range [][]string{{shim.EnvExecMode + "="}, nil} {
		args := []string{"--registration-dir", t.TempDir(), "run", "--plugin", "kubernetes.io/rbd", "--", "true"}
		if env == nil {
			args = append([]string{"--exec-mode", ""}, args...)
		}
		if r := run(t, append(noRuntime(t), env...), "", shimBin, args...); r.code != 0 {
			t.Errorf("empty exec mode (env %v): code %d, stderr %q; want the default", env, r.code, r.stderr)
		}
	}
	r := run(t, noRuntime(t), "", shimBin, "--exec-mode", "fast", "--registration-dir", t.TempDir(), "run", "--plugin", "kubernetes.io/rbd", "--", "true")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "want auto, cri or socket") {
		t.Errorf("--exec-mode fast: code %d, stderr %q; want 125", r.code, r.stderr)
	}
}

func TestMissingOrUntrustedHelper(t *testing.T) {
	reg := t.TempDir()
	if err := registration.Write(reg, "kubernetes.io/glusterfs", validRegistration()); err != nil {
		t.Fatal(err)
	}
	runArgs := []string{"--registration-dir", reg, "run", "--plugin", "kubernetes.io/glusterfs", "--", "true"}

	bin := shimAlone(t)
	helper := filepath.Join(filepath.Dir(bin), shim.HelperName)
	for _, args := range [][]string{
		runArgs,
		{"--registration-dir", reg, "status"},
		{"--host-mode", "nsenter", "--registration-dir", t.TempDir(), "run", "--plugin", "kubernetes.io/rbd", "--", "true"},
	} {
		r := run(t, noRuntime(t), "", bin, args...)
		if r.code != 125 || !strings.Contains(r.stderr, helper) || !strings.HasPrefix(r.stderr, shim.BinaryName+": ") {
			t.Errorf("%v without the helper: code %d, stderr %q; want 125 naming %s", args, r.code, r.stderr, helper)
		}
	}

	data, err := os.ReadFile(filepath.Join(filepath.Dir(shimBin), shim.HelperName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(helper, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(helper, 0o775); err != nil {
		t.Fatal(err)
	}
	r := run(t, noRuntime(t), "", bin, runArgs...)
	if r.code != 125 || !strings.Contains(r.stderr, "writable by group or others") {
		t.Errorf("group-writable helper: code %d, stderr %q; want 125, refused", r.code, r.stderr)
	}
	if err := os.Rename(helper, helper+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(helper+".real", helper); err != nil {
		t.Fatal(err)
	}
	r = run(t, noRuntime(t), "", bin, runArgs...)
	if r.code != 125 || !strings.Contains(r.stderr, "not a regular file") {
		t.Errorf("helper as a symlink: code %d, stderr %q; want 125, refused", r.code, r.stderr)
	}
}

// TestHelperInAWritableDirectoryIsRefused checks that the helper's
// directory is trusted too: whoever can write it could swap the helper.
func TestHelperInAWritableDirectoryIsRefused(t *testing.T) {
	reg := t.TempDir()
	if err := registration.Write(reg, "kubernetes.io/glusterfs", validRegistration()); err != nil {
		t.Fatal(err)
	}
	bin := shimAlone(t)
	dir := filepath.Dir(bin)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(shimBin), shim.HelperName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, shim.HelperName), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	r := run(t, noRuntime(t), "", bin, "--registration-dir", reg, "status")
	if r.code != 125 || !strings.Contains(r.stderr, dir+" is writable by group or others") {
		t.Errorf("helper in a world-writable directory: code %d, stderr %q; want 125, refused naming %s", r.code, r.stderr, dir)
	}
}

// TestMultiCallThroughTheHelper runs an installed tool whose plugin is
// registered but whose container is not running: the helper decides
// (through a fake runtime) and runs the host's tool, never the shim.
func TestMultiCallThroughTheHelper(t *testing.T) {
	root := t.TempDir()
	bin, hostBin, reg := filepath.Join(root, "bin"), filepath.Join(root, "host"), filepath.Join(root, "reg")
	if err := os.Mkdir(hostBin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{
		"rbd":      "#!/bin/sh\necho host-rbd \"$@\"\nexit 3\n",
		"slowtool": "#!/bin/sh\nsleep 10\n",
	} {
		if err := os.WriteFile(filepath.Join(hostBin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if r := run(t, nil, "", shimBin, "--registration-dir", reg, "install", "--dir", bin, "--plugin", "kubernetes.io/rbd", "rbd", "slowtool"); r.code != 0 {
		t.Fatalf("install: code %d, %s", r.code, r.stderr)
	}
	if fi, err := os.Lstat(filepath.Join(bin, shim.HelperName)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("install did not place %s: %v", shim.HelperName, err)
	}
	if err := registration.Write(reg, "kubernetes.io/rbd", validRegistration()); err != nil {
		t.Fatal(err)
	}
	rt := crifake.NewFakeRuntime()
	endpoint := rt.Serve(t)
	r0 := validRegistration()
	rt.SetContainers(crifake.Container("abc", r0.PodNamespace, r0.PodName, r0.PodUID, r0.ContainerName, runtimeapi.ContainerState_CONTAINER_EXITED))
	env := []string{shim.EnvRuntimeEndpoint + "=" + endpoint, "PATH=" + strings.Join([]string{bin, hostBin, os.Getenv("PATH")}, ":"), shim.EnvVerbose + "=1"}

	r := run(t, env, "", filepath.Join(bin, "rbd"), "map", "x")
	if r.code != 3 || r.stdout != "host-rbd map x\n" || !strings.Contains(r.stderr, "registered container is not running") {
		t.Fatalf("rbd, registered but stopped: code %d, stdout %q, stderr %q; want the host's rbd after the runtime said not running", r.code, r.stdout, r.stderr)
	}
	r = run(t, append(env, shim.EnvTimeout+"=300ms"), "", filepath.Join(bin, "slowtool"))
	if r.code != shim.ExitTimeout {
		t.Fatalf("slowtool with %s=300ms: code %d, stderr %q; want %d", shim.EnvTimeout, r.code, r.stderr, shim.ExitTimeout)
	}
	r = run(t, append(env, shim.EnvTimeout+"=soon"), "", filepath.Join(bin, "slowtool"))
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, shim.EnvTimeout) {
		t.Fatalf("slowtool with %s=soon: code %d, stderr %q; want 125 naming the variable", shim.EnvTimeout, r.code, r.stderr)
	}
}

// TestInstallFromTheHelper: the helper run as `install` places the shim
// under the shim's name, not itself.
func TestInstallFromTheHelper(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(filepath.Dir(shimBin), shim.HelperName)
	if r := run(t, nil, "", helper, "install", "--dir", dir, "--plugin", "kubernetes.io/rbd", "rbd"); r.code != 0 {
		t.Fatalf("install: code %d, %s", r.code, r.stderr)
	}
	for name, src := range map[string]string{shim.BinaryName: shimBin, shim.HelperName: helper} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in %s is not a copy of %s (%v)", name, dir, src, err)
		}
	}
}
