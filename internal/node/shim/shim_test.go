package shim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/node/shim/shimtest"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// shimBin is the real binary, built once for every test.
var shimBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if fuzzingOnly() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "shim-test-")
	if err != nil {
		panic(err)
	}
	shimBin, err = shimtest.Build(dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fuzzingOnly reports whether this process only fuzzes (a fuzz worker, or
// -fuzz with -run '^$', as `make fuzz` runs it): then nothing uses the
// binaries, and building them in every worker would take most of a short
// fuzz run.
func fuzzingOnly() bool {
	get := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return get("test.fuzzworker") == "true" || get("test.fuzz") != "" && get("test.run") == "^$"
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the shim binary (or a tool link) with a bounded time: the shim
// must never hang.
func run(t *testing.T, env []string, stdin string, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v hung", bin, args)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// noRuntime points the shim at a runtime socket that does not exist.
func noRuntime(t *testing.T) []string {
	return []string{"CONTAINER_RUNTIME_ENDPOINT=unix://" + filepath.Join(t.TempDir(), "none.sock")}
}

func TestFallbackExitCodesAndStreams(t *testing.T) {
	reg := t.TempDir()
	for _, code := range []int{0, 1, 2, 32, 37, 255} {
		r := run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "run", "--plugin", "kubernetes.io/glusterfs", "--",
			"sh", "-c", "echo to-stdout; echo to-stderr >&2; exit "+strconv.Itoa(code))
		if r.code != code || r.stdout != "to-stdout\n" || r.stderr != "to-stderr\n" {
			t.Errorf("exit %d: got code %d, stdout %q, stderr %q", code, r.code, r.stdout, r.stderr)
		}
	}
}

func TestOwnExitCodes(t *testing.T) {
	reg := t.TempDir()
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--registration-dir", reg}
	tests := []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"missing command", []string{"run", "--plugin", "kubernetes.io/rbd", "--", "no-such-tool-xyz"}, 127, "no-such-tool-xyz"},
		{"missing absolute path", []string{"run", "--plugin", "kubernetes.io/rbd", "--", "/nonexistent/tool"}, 127, "/nonexistent/tool"},
		{"not executable", []string{"run", "--plugin", "kubernetes.io/rbd", "--", notExec}, 126, "permission denied"},
		{"timeout", []string{"--timeout", "300ms", "run", "--plugin", "kubernetes.io/rbd", "--", "sleep", "10"}, 124, "timed out"},
		{"bad plugin name", []string{"run", "--plugin", "../../etc", "--", "true"}, 125, `"../../etc"`},
		{"no command", []string{"run", "--plugin", "kubernetes.io/rbd"}, 125, "no command"},
		{"unknown flag", []string{"--bogus", "run"}, 125, "bogus"},
		{"bad host mode", []string{"--host-mode", "chroot", "run", "--plugin", "x", "--", "true"}, 125, "host-mode"},
		{"missing plugin flag", []string{"run", "--", "true"}, 125, "plugin"},
	}
	if r := run(t, noRuntime(t), "", shimBin, "--help"); r.code != 0 || !strings.Contains(r.stdout, "124 it did not end within its timeout; 125 the shim failed") {
		t.Fatalf("--help: code %d, stdout %q; want 0 and the exit codes listed", r.code, r.stdout)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, noRuntime(t), "", shimBin, append(append([]string{}, base...), tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.message) {
				t.Fatalf("code %d, stderr %q; want %d and a message containing %q", r.code, r.stderr, tc.code, tc.message)
			}
			if tc.code == 125 && !strings.HasPrefix(r.stderr, shim.BinaryName+": ") {
				t.Fatalf("diagnostic %q is not prefixed with the program name", r.stderr)
			}
		})
	}
}

func TestStdinOnHost(t *testing.T) {
	r := run(t, noRuntime(t), "round trip\n", shimBin, "--registration-dir", t.TempDir(), "run", "--plugin", "kubernetes.io/rbd", "--", "cat")
	if r.code != 0 || r.stdout != "round trip\n" {
		t.Fatalf("cat through the shim: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func validRegistration() registration.Registration {
	return registration.Registration{PodNamespace: "kube-system", PodName: "glusterfs-mountpod-abcde", PodUID: "9d1c7a52-2f0e-4c59-8a51-7f3e0c1b2a11", ContainerName: "mount"}
}

func TestRegisteredButRuntimeUnreachableFailsClosed(t *testing.T) {
	reg := t.TempDir()
	if err := registration.Write(reg, "kubernetes.io/glusterfs", validRegistration()); err != nil {
		t.Fatal(err)
	}
	env := noRuntime(t)
	r := run(t, env, "", shimBin, "--registration-dir", reg, "run", "--plugin", "kubernetes.io/glusterfs", "--", "true")
	endpoint := strings.TrimPrefix(env[0], "CONTAINER_RUNTIME_ENDPOINT=")
	if r.code != 125 || !strings.Contains(r.stderr, "kubernetes.io/glusterfs") || !strings.Contains(r.stderr, strings.TrimPrefix(endpoint, "unix://")) {
		t.Fatalf("code %d, stderr %q; want 125 naming the plugin and %s", r.code, r.stderr, endpoint)
	}
}

func TestUntrustedRegistrations(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, path string)
		reason string
	}{
		{"group writable", func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o664); err != nil {
				t.Fatal(err)
			}
		}, "writable by group or others"},
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(path), ".target")
			if err := os.Rename(path, target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
		{"fifo", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "FIFO"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := t.TempDir()
			if err := registration.Write(reg, "kubernetes.io/glusterfs", validRegistration()); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, filepath.Join(reg, "kubernetes.io~glusterfs.json"))
			r := run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "run", "--plugin", "kubernetes.io/glusterfs", "--", "true")
			if r.code != 125 || !strings.Contains(r.stderr, tc.reason) {
				t.Fatalf("code %d, stderr %q; want 125 with %q", r.code, r.stderr, tc.reason)
			}
			r = run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "status", "-o", "json")
			var sts []shim.Status
			if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || r.code != 0 {
				t.Fatalf("status -o json: code %d, %v, output %q", r.code, err, r.stdout)
			}
			if len(sts) != 1 || sts[0].Reason != shim.StatusUntrusted || sts[0].Live {
				t.Fatalf("status = %+v, want one untrusted entry", sts)
			}
		})
	}
}

func TestStatusJSONNamesEveryRegistration(t *testing.T) {
	reg := t.TempDir()
	for _, p := range []string{"kubernetes.io/glusterfs", "kubernetes.io/rbd"} {
		if err := registration.Write(reg, p, validRegistration()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(reg, "example.com~broken.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "status", "-o", "json")
	var sts []shim.Status
	if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || r.code != 0 {
		t.Fatalf("status -o json: code %d, %v, output %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	got := map[string]shim.Status{}
	for _, s := range sts {
		got[s.Plugin] = s
	}
	want := validRegistration()
	for _, p := range []string{"kubernetes.io/glusterfs", "kubernetes.io/rbd"} {
		s := got[p]
		if s.PodName != want.PodName || s.PodUID != want.PodUID || s.Live || s.Reason != shim.StatusUnreachable {
			t.Errorf("%s: %+v; want the registration, not live, runtime unreachable", p, s)
		}
	}
	if s := got["example.com/broken"]; s.Reason != shim.StatusInvalid || s.Error == "" {
		t.Errorf("broken: %+v; want invalid with an error", s)
	}
	r = run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "status")
	if r.code != 0 || !strings.Contains(r.stdout, "kubernetes.io/rbd") || !strings.Contains(r.stdout, "runtime unreachable") || r.stderr != "" {
		t.Fatalf("status table: code %d, %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// -o text is the table; -o table, its old name, still is, and warns.
	text := run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "status", "-o", "text")
	table := run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "status", "-o", "table")
	if text.code != 0 || text.stdout != r.stdout || text.stderr != "" {
		t.Errorf("status -o text: code %d, %q, stderr %q; want the table, no warning", text.code, text.stdout, text.stderr)
	}
	if table.code != 0 || table.stdout != r.stdout || strings.Count(table.stderr, "status -o table is deprecated: use -o text") != 1 {
		t.Errorf("status -o table: code %d, %q, stderr %q; want the table and one warning", table.code, table.stdout, table.stderr)
	}
	if bad := run(t, noRuntime(t), "", shimBin, "--registration-dir", reg, "status", "-o", "yaml"); bad.code == 0 || !strings.Contains(bad.stderr, `-o "yaml": want text or json`) {
		t.Errorf("status -o yaml: code %d, stderr %q; want a failure naming the choices", bad.code, bad.stderr)
	}
	r = run(t, noRuntime(t), "", shimBin, "--registration-dir", t.TempDir(), "status", "--plugin", "kubernetes.io/rbd", "-o", "json")
	if !strings.Contains(r.stdout, `"reason": "no file"`) {
		t.Fatalf("status of an unregistered plugin: %q", r.stdout)
	}
}

func TestMultiCallNeverRecurses(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	hostBin := filepath.Join(root, "host")
	if err := os.Mkdir(hostBin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hostBin, "rbd"), []byte("#!/bin/sh\necho host-rbd \"$@\"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(root, "reg")
	r := run(t, nil, "", shimBin, "--registration-dir", reg, "install", "--dir", bin, "--plugin", "kubernetes.io/rbd", "rbd", "mount.glusterfs")
	if r.code != 0 {
		t.Fatalf("install: code %d, %s", r.code, r.stderr)
	}
	// The shim's directory comes first on PATH, twice and through an
	// alias, so a naive lookup would find the shim again.
	alias := filepath.Join(root, "alias")
	if err := os.Symlink(bin, alias); err != nil {
		t.Fatal(err)
	}
	env := append(noRuntime(t), "PATH="+strings.Join([]string{bin, alias, bin, hostBin, os.Getenv("PATH")}, ":"))

	r = run(t, env, "", filepath.Join(bin, "rbd"), "map", "x")
	if r.code != 3 || r.stdout != "host-rbd map x\n" {
		t.Fatalf("rbd via the shim, not registered: code %d, stdout %q, stderr %q; want the host's rbd", r.code, r.stdout, r.stderr)
	}
	r = run(t, env, "", filepath.Join(bin, "mount.glusterfs"), "-V")
	if r.code != 127 {
		t.Fatalf("mount.glusterfs with no host binary: code %d, stderr %q; want 127", r.code, r.stderr)
	}

	// Links and mapping are in place; a foreign file is never replaced.
	if target, err := os.Readlink(filepath.Join(bin, "rbd")); err != nil || target != shim.BinaryName {
		t.Fatalf("rbd link: %q, %v", target, err)
	}
	foreign := filepath.Join(bin, "mkfs.ext4")
	if err := os.WriteFile(foreign, []byte("mine"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = run(t, nil, "", shimBin, "install", "--dir", bin, "--plugin", "kubernetes.io/rbd", "fsck.ext4", "mkfs.ext4")
	if r.code != 125 || !strings.Contains(r.stderr, foreign) {
		t.Fatalf("install over a foreign file: code %d, %q", r.code, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(bin, "fsck.ext4")); err == nil {
		t.Fatal("a refused install changed the directory")
	}
	if b, _ := os.ReadFile(foreign); string(b) != "mine" {
		t.Fatal("foreign file was changed")
	}

	// Uninstall removes only what is ours.
	r = run(t, nil, "", shimBin, "uninstall", "--dir", bin)
	if r.code != 0 {
		t.Fatalf("uninstall: code %d, %s", r.code, r.stderr)
	}
	des, _ := os.ReadDir(bin)
	if len(des) != 1 || des[0].Name() != "mkfs.ext4" {
		names := []string{}
		for _, de := range des {
			names = append(names, de.Name())
		}
		t.Fatalf("after uninstall %s holds %v, want only the foreign mkfs.ext4", bin, names)
	}
}

func TestInstallRefusesForeignShim(t *testing.T) {
	for _, name := range []string{shim.BinaryName, shim.HelperName} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("someone else's"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := run(t, nil, "", shimBin, "install", "--dir", dir, "--plugin", "kubernetes.io/rbd", "rbd")
		if r.code != 125 || !strings.Contains(r.stderr, "not installed by") || !strings.Contains(r.stderr, name) {
			t.Fatalf("foreign %s: code %d, %q", name, r.code, r.stderr)
		}
		if _, err := os.Lstat(filepath.Join(dir, "rbd")); err == nil {
			t.Fatalf("foreign %s: a refused install changed the directory", name)
		}
	}
	alone := shimAlone(t)
	r := run(t, nil, "", alone, "install", "--dir", t.TempDir(), "--plugin", "kubernetes.io/rbd", "rbd")
	if r.code != 125 || !strings.Contains(r.stderr, shim.HelperName) {
		t.Fatalf("install without the helper next to the shim: code %d, %q", r.code, r.stderr)
	}
	for _, bad := range []string{"../x", ".hidden", shim.MappingFile, shim.HelperName} {
		r := run(t, nil, "", shimBin, "install", "--dir", t.TempDir(), "--plugin", "kubernetes.io/rbd", bad)
		if r.code != 125 || !strings.Contains(r.stderr, "invalid tool name") {
			t.Errorf("tool %q: code %d, %q", bad, r.code, r.stderr)
		}
	}
}

func TestWatchPrintsOneLinePerChange(t *testing.T) {
	reg := filepath.Join(t.TempDir(), "plugin-containers")
	cmd := exec.Command(shimBin, "--registration-dir", reg, "watch")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func(want string) {
		t.Helper()
		select {
		case l := <-lines:
			if !strings.Contains(l, want) {
				t.Fatalf("watch printed %q, want a line with %q", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch printed nothing for %q; stderr %q", want, stderr.String())
		}
	}
	// The directory does not exist yet: the watch must see it appear.
	time.Sleep(200 * time.Millisecond)
	r := validRegistration()
	if err := registration.Write(reg, "kubernetes.io/rbd", r); err != nil {
		t.Fatal(err)
	}
	next("kubernetes.io/rbd registered kube-system/" + r.PodName)
	if err := os.Remove(filepath.Join(reg, "kubernetes.io~rbd.json")); err != nil {
		t.Fatal(err)
	}
	next("kubernetes.io/rbd removed")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch after SIGINT: %v (want exit 0); stderr %q", err, stderr.String())
	}
}

// TestUntrustedMappingIsRefused checks that a tool link trusts the mapping
// file, which decides what root runs, only as it trusts a registration.
func TestUntrustedMappingIsRefused(t *testing.T) {
	tests := []struct {
		name    string
		spoil   func(t *testing.T, dir, mapping string)
		wantErr string // "" for a trusted mapping
		names   string // the path the error must name
	}{
		{"trusted", func(*testing.T, string, string) {}, "", ""},
		{"group-writable file", func(t *testing.T, _, mapping string) {
			mustChmod(t, mapping, 0o664)
		}, "writable by group or others", "mapping"},
		{"world-writable file", func(t *testing.T, _, mapping string) {
			mustChmod(t, mapping, 0o646)
		}, "writable by group or others", "mapping"},
		{"foreign owner", func(t *testing.T, _, mapping string) {
			if err := os.Lchown(mapping, 4242, 4242); err != nil {
				t.Skipf("cannot chown: %v", err)
			}
		}, "owned by uid 4242", "mapping"},
		{"symlink", func(t *testing.T, dir, mapping string) {
			moved := filepath.Join(dir, ".moved.json")
			if err := os.Rename(mapping, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, mapping); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link", "mapping"},
		{"world-writable directory", func(t *testing.T, dir, _ string) {
			mustChmod(t, dir, 0o777)
		}, "writable by group or others", "dir"},
		{"group-writable directory", func(t *testing.T, dir, _ string) {
			mustChmod(t, dir, 0o775)
		}, "writable by group or others", "dir"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bin")
			r := run(t, nil, "", shimBin, "--registration-dir", filepath.Join(t.TempDir(), "reg"), "install", "--dir", dir, "--plugin", "kubernetes.io/rbd", "rbd")
			if r.code != 0 {
				t.Fatalf("install: code %d, %s", r.code, r.stderr)
			}
			mapping := filepath.Join(dir, shim.MappingFile)
			tc.spoil(t, dir, mapping)
			env := append(noRuntime(t), "PATH="+t.TempDir())
			r = run(t, env, "", filepath.Join(dir, "rbd"), "map", "x")
			if tc.wantErr == "" {
				if r.code != 127 {
					t.Fatalf("trusted mapping: code %d, stderr %q; want 127 (no rbd on the host)", r.code, r.stderr)
				}
				return
			}
			named := mapping
			if tc.names == "dir" {
				named = dir
			}
			if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, tc.wantErr) || !strings.Contains(r.stderr, named+":") {
				t.Fatalf("code %d, stderr %q; want %d and an error naming %s and saying %q", r.code, r.stderr, shim.ExitShimFailed, named, tc.wantErr)
			}
		})
	}
}

func mustChmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
