package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

var pod = registration.Registration{PodNamespace: "kube-system", PodName: "mount-x7k2p", PodUID: "0c9f6a2e-1111-4222-8333-444455556666", ContainerName: "mount"}

// shortTempDir returns a new directory whose path is short enough for the
// exec socket under it: t.TempDir's paths, named after the test, are not.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// setPodEnv sets the downward-API environment of pod and returns a fresh
// registration directory, also set in the environment. Its path is short
// enough for the exec socket, which serve therefore serves.
func setPodEnv(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(shortTempDir(t), "plugin-containers")
	// The old names unset (this machine's environment may have one, such
	// as CONTAINER_NAME): TestOldNames sets them.
	for _, r := range envRenames {
		t.Setenv(r.Old, "")
		os.Unsetenv(r.Old)
	}
	t.Setenv("MOUNTPOD_POD_NAMESPACE", pod.PodNamespace)
	t.Setenv("MOUNTPOD_POD_NAME", pod.PodName)
	t.Setenv("MOUNTPOD_POD_UID", pod.PodUID)
	t.Setenv("MOUNTPOD_CONTAINER_NAME", pod.ContainerName)
	t.Setenv("MOUNTPOD_REGISTRATION_DIR", dir)
	t.Setenv("MOUNTPOD_PLUGINS", "kubernetes.io/rbd, kubernetes.io/glusterfs")
	t.Setenv("MOUNTPOD_REQUIRE_TOOLS", "")
	// Metrics on a free port of the loopback: never the node's 9641.
	t.Setenv("MOUNTPOD_METRICS_ADDRESS", "127.0.0.1:0")
	return dir
}

func runApp(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, append([]string{"mountpod"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestServeRegistersFromEnvAndUnregistersOnCancel(t *testing.T) {
	dir := setPodEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr string
	go func() {
		var code int
		code, _, stderr = runApp(ctx, "serve")
		done <- code
	}()
	// The registrations advertise the exec socket (serve runs it) and
	// this binary as the batch program.
	want := withBatch(t, pod)
	want.ExecSocket = execclient.SocketName(pod.PodUID)
	// Poll the files, not "mountpod check": urfave/cli keeps global state
	// (the help and version flags) that two apps running at once race on.
	registered := func() bool {
		for _, p := range []string{"kubernetes.io/rbd", "kubernetes.io/glusterfs"} {
			if r, ok, err := registration.Read(dir, p); err != nil || !ok || r != want {
				return false
			}
		}
		return true
	}
	for deadline := time.Now().Add(5 * time.Second); !registered(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not registered with the exec socket 5s after serve started")
		}
	}
	if _, err := execclient.CheckSocket(dir, want.ExecSocket); err != nil {
		t.Errorf("the exec socket is not served: %v", err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d after cancel, want 0; stderr:\n%s", code, stderr)
	}
	if entries, err := registration.List(dir); err != nil || len(entries) != 0 {
		t.Errorf("registrations left after serve stopped: %v, %v", entries, err)
	}
}

// withBatch is r advertising this binary as its batch program, as serve's
// registrations do by default (--exec-batch auto).
func withBatch(t *testing.T, r registration.Registration) registration.Registration {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r.ExecBatch = self
	return r
}

// TestExecBatch: `mountpod exec-batch REQUEST...` prints the results of
// its requests as JSON, in order; no request is a usage error.
func TestExecBatch(t *testing.T) {
	args, err := wire.EncodeRequests([]wire.Request{
		{Argv: []string{"sh", "-c", "echo one"}, TimeoutMs: 30_000},
		{Argv: []string{"sh", "-c", "exit 4"}, TimeoutMs: 30_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runApp(context.Background(), append([]string{"exec-batch"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	rs, err := wire.DecodeResults([]byte(stdout), 2)
	if err != nil || string(rs[0].Stdout) != "one\n" || rs[1].ExitCode != 4 {
		t.Fatalf("results %+v, %v (stdout %q)", rs, err, stdout)
	}
	if code, _, stderr := runApp(context.Background(), "exec-batch"); code != exitUsage || !strings.Contains(stderr, "requests") {
		t.Fatalf("no request: exit %d, stderr %q; want %d saying why", code, stderr, exitUsage)
	}
}

func TestCheckReady(t *testing.T) {
	dir := setPodEnv(t)
	for _, p := range []string{"kubernetes.io/rbd", "kubernetes.io/glusterfs"} {
		if err := registration.Write(dir, p, pod); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := runApp(context.Background(), "check")
	want := "ready: kubernetes.io/rbd, kubernetes.io/glusterfs registered to kube-system/mount-x7k2p (uid 0c9f6a2e-1111-4222-8333-444455556666, container mount)\n"
	if code != 0 || out != want || stderr != "" {
		t.Errorf("check = %d, %q, %q; want 0, %q and nothing on stderr", code, out, stderr, want)
	}
}

func TestFlagsOverrideEnv(t *testing.T) {
	setPodEnv(t)
	other := filepath.Join(shortTempDir(t), "other")
	t.Setenv("MOUNTPOD_PLUGINS", "kubernetes.io/nope")
	if err := registration.Write(other, "example.com/a", pod); err != nil {
		t.Fatal(err)
	}
	if err := registration.Write(other, "example.com/b", pod); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runApp(context.Background(), "check", "--registration-dir", other, "--plugins", "example.com/a", "--plugins", "example.com/b")
	if code != 0 {
		t.Errorf("check with flags = %d, %q, %q; want 0", code, out, stderr)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", nil, []string{"--version"}, 0, "mountpod version dev", ""},
		{"help lists the exit codes", nil, []string{"--help"}, 0, "Exit codes: 0 done; 1 serve failed", ""},
		{"check not registered", nil, []string{"check"}, 1, "not ready:\n  plugin kubernetes.io/glusterfs: not registered", ""},
		{"check missing tool", map[string]string{"MOUNTPOD_REQUIRE_TOOLS": "sh,no-such-tool-here"}, []string{"check"}, 1, "not ready:\n  missing required tools: no-such-tool-here", ""},
		{"serve missing tools", map[string]string{"MOUNTPOD_REQUIRE_TOOLS": "no-such-tool-here,sh,nor-this"}, []string{"serve"}, 1, "", "missing required tools: no-such-tool-here, nor-this"},
		{"serve without pod UID", map[string]string{"MOUNTPOD_POD_UID": ""}, []string{"serve"}, 2, "", "podUID is missing"},
		{"serve without plugins", map[string]string{"MOUNTPOD_PLUGINS": ""}, []string{"serve"}, 2, "", "no plugin to register"},
		{"serve with an argument", nil, []string{"serve", "extra"}, 2, "", "serve takes no arguments"},
		{"serve with bad command slots", map[string]string{"MOUNTPOD_COMMAND_SLOTS": "many", "MOUNTPOD_EXEC_SOCKET": "none"}, []string{"serve"}, 2, "", `MOUNTPOD_COMMAND_SLOTS: want a whole number from 0 to 1024, got "many"`},
		{"unknown flag", nil, []string{"serve", "--bogus"}, 2, "", "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := setPodEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			// A hang guard: a serve that should have refused to start
			// serves until the context ends, and then exits 0.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, stdout, stderr := runApp(ctx, tt.args...)
			if code != tt.wantCode || !strings.Contains(stdout, tt.wantStdout) || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("mountpod %q = %d\nstdout: %s\nstderr: %s\nwant %d, stdout containing %q, stderr containing %q",
					tt.args, code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if tt.args[0] == "serve" {
				if entries, _ := registration.List(dir); len(entries) != 0 {
					t.Errorf("serve that failed left registrations: %v", entries)
				}
			}
		})
	}
}

func TestMain(m *testing.M) {
	// The process's PATH must hold sh for the tool tests.
	if _, err := os.Stat("/bin/sh"); err != nil {
		os.Setenv("PATH", os.Getenv("PATH")+":/bin")
	}
	os.Exit(m.Run())
}

// TestShortHelp: the usage line of the binary and of each command, hidden
// ones included, is one short line; the details are the command's
// description (`mountpod COMMAND --help`).
func TestShortHelp(t *testing.T) {
	const most = 100
	app := newApp(io.Discard, io.Discard)
	if u := app.Usage; len(u) > most || strings.Contains(u, "\n") {
		t.Errorf("mountpod's usage is %d bytes, want one line of at most %d: %q", len(u), most, u)
	}
	for _, c := range app.Commands {
		if len(c.Usage) > most || strings.Contains(c.Usage, "\n") {
			t.Errorf("mountpod %s: usage of %d bytes, want one line of at most %d (the rest in its description): %q", c.Name, len(c.Usage), most, c.Usage)
		}
	}
	code, out, _ := runApp(context.Background(), "serve", "--help")
	if code != 0 || !strings.Contains(out, "DESCRIPTION:") || !strings.Contains(out, "MOUNTPOD_RECOVERY=false turns that off") {
		t.Errorf("serve --help = %d, %q; want the long description", code, out)
	}
}

// TestOldNames: the variables and flags mountpod had before each was named
// after its flag with mountpod's prefix still work, each warned of once;
// where both names are set, the new one wins.
func TestOldNames(t *testing.T) {
	dir := setPodEnv(t)
	for _, r := range envRenames {
		if v, ok := os.LookupEnv(r.New); ok {
			t.Setenv(r.Old, v)
		}
		t.Setenv(r.New, "") // restored at the end,
		os.Unsetenv(r.New)  // unset until then
	}
	// The registration matches the pod the old variables name, in the
	// directory the old variable names: check finds it.
	if err := registration.Write(dir, "example.com/a", pod); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runApp(context.Background(), "check", "--plugin", "example.com/a", "--require-tool=sh")
	if code != 0 {
		t.Fatalf("check with the old names = %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, w := range []string{
		"POD_NAMESPACE is deprecated: set MOUNTPOD_POD_NAMESPACE", "POD_NAME is deprecated: set MOUNTPOD_POD_NAME",
		"POD_UID is deprecated: set MOUNTPOD_POD_UID", "CONTAINER_NAME is deprecated: set MOUNTPOD_CONTAINER_NAME",
		"PLUGIN_CONTAINERS_DIR is deprecated: set MOUNTPOD_REGISTRATION_DIR",
		"--plugin is deprecated: use --plugins", "--require-tool is deprecated: use --require-tools",
	} {
		if strings.Count(stderr, w) != 1 {
			t.Errorf("stderr does not say once %q:\n%s", w, stderr)
		}
	}

	// Both names: the new one wins, the old one is said to be ignored.
	t.Setenv("POD_UID", "not-this-pod")
	t.Setenv("MOUNTPOD_POD_UID", pod.PodUID)
	code, _, stderr = runApp(context.Background(), "check", "--plugins", "example.com/a")
	if code != 0 || !strings.Contains(stderr, "POD_UID is deprecated and ignored: MOUNTPOD_POD_UID is set") {
		t.Errorf("check with both names = %d, stderr %q; want 0 and the old name ignored", code, stderr)
	}
	t.Setenv("MOUNTPOD_POD_UID", "")
	os.Unsetenv("MOUNTPOD_POD_UID")
	if code, _, _ = runApp(context.Background(), "check", "--plugins", "example.com/a"); code == 0 {
		t.Error("check with POD_UID naming another pod found it registered: the old name was not read")
	}
}
