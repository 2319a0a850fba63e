package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
)

// envAsDriver makes the test binary run as the driver.
const envAsDriver = "FLEXVOLUME_DRIVER_TEST_AS_DRIVER"

func TestMain(m *testing.M) {
	if os.Getenv(envAsDriver) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// cephKey is a cephx key as a Secret's entry "key" holds it.
const cephKey = "AQBh9xlmAAAAABAAx8Yd1u8TZ6lIbI6bQ1lCmA=="

// installDriver copies the test binary to a temporary plugin directory as
// the driver mountcontainers.io~cephfs/cephfs, with settings next to it,
// and returns its path.
func installDriver(t *testing.T, settings flexvolume.Settings) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	exe := filepath.Join(t.TempDir(), "mountcontainers.io~cephfs", "cephfs")
	if err := os.Mkdir(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(exe, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	settings.Filesystem = cephfs.FSType
	settings.RegistrationDir = filepath.Join(t.TempDir(), "plugin-containers")
	settings.RuntimeEndpoint = "unix://" + filepath.Join(t.TempDir(), "none.sock")
	data, _ := json.Marshal(settings)
	if err := os.WriteFile(exe+flexvolume.SettingsSuffix, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return exe
}

// runDriver runs the driver as the kubelet does (standard output and
// error read together) and returns its reply, the output and the exit
// code; a driver that does not answer within a minute (a hang guard)
// fails the test.
func runDriver(t *testing.T, exe string, args ...string) (flexvolume.Status, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = []string{envAsDriver + "=1", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("driver %q did not answer in time: %v, %q", args, err, out)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("driver %q: %v", args, err)
	}
	var s flexvolume.Status
	if err := json.Unmarshal(bytes.TrimSpace(out), &s); err != nil {
		t.Fatalf("driver %q: reply %q is not one JSON object: %v", args, out, err)
	}
	return s, string(out), cmd.ProcessState.ExitCode()
}

// TestFailureExitsZero: the driver binary replies Failure with exit 0
// wherever the call fails, in the driver or before it (its settings), so
// that the kubelet never logs the arguments and the secret in them; only
// Not supported exits 1. No reply quotes the key.
func TestFailureExitsZero(t *testing.T) {
	exe := installDriver(t, flexvolume.Settings{SecretsDir: t.TempDir(), AllowedServers: []string{"10.0.0.0/8"}})
	keyOpt := base64.StdEncoding.EncodeToString([]byte(cephKey + "\n"))
	opts := `{"monitors":"127.0.0.1","user":"web","kubernetes.io/secret/key":"` + keyOpt + `"}`
	target := filepath.Join(t.TempDir(), "v")

	s, out, code := runDriver(t, exe, "mount", target, opts)
	if s.Status != flexvolume.StatusFailure || code != 0 || !strings.Contains(s.Message, "loopback") {
		t.Errorf("refused mount: %q, exit %d; want a Failure about the monitor, exit 0", out, code)
	}
	if strings.Contains(out, cephKey[:20]) || strings.Contains(out, keyOpt[:20]) {
		t.Errorf("the reply quotes the key: %s", out)
	}
	if s, out, code := runDriver(t, exe, "attach", opts, "node-1"); s.Status != flexvolume.StatusNotSupported || code != 1 {
		t.Errorf("attach: %q, exit %d; want Not supported, exit 1", out, code)
	}

	if err := os.Chmod(exe+flexvolume.SettingsSuffix, 0o666); err != nil {
		t.Fatal(err)
	}
	if s, out, code := runDriver(t, exe, "mount", target, opts); s.Status != flexvolume.StatusFailure || code != 0 || !strings.Contains(s.Message, "writable") {
		t.Errorf("untrusted settings: %q, exit %d; want a Failure, exit 0", out, code)
	}
}

// TestBadLogFile: a log file that cannot be used neither hangs nor fails
// the call: the call is served, and its reply names the file.
func TestBadLogFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "driver.log")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "driver.log")
	if err := os.Symlink(filepath.Join(t.TempDir(), "real.log"), link); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"FIFO": fifo, "symbolic link": link} {
		t.Run(name, func(t *testing.T) {
			exe := installDriver(t, flexvolume.Settings{LogFile: path})
			s, out, code := runDriver(t, exe, "init")
			if s.Status != flexvolume.StatusSuccess || s.Capabilities == nil || code != 0 || !strings.Contains(s.Message, path) {
				t.Fatalf("init with log file %s: %q, exit %d; want Success naming the file", path, out, code)
			}
		})
	}
}
