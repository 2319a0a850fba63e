package flexvolume_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/flexvolume"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestInstall(t *testing.T) {
	src := filepath.Join(t.TempDir(), "flexvolume-driver")
	writeFile(t, src, "v1", 0o755)
	pluginDir := filepath.Join(t.TempDir(), "exec")
	settings := flexvolume.Settings{Plugin: "kubernetes.io/glusterfs", RegistrationDir: "/k/plugin-containers", RuntimeEndpoint: "unix:///run/c.sock", Timeout: "30s",
		AllowedServers: []string{"node-1", "127.0.1.1", "10.0.0.0/8"}}
	exe, err := flexvolume.Install(flexvolume.InstallOptions{PluginDir: pluginDir, Source: src, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(pluginDir, "mountcontainers.io~glusterfs", "glusterfs"); exe != want {
		t.Fatalf("installed at %s, want %s", exe, want)
	}
	fi, err := os.Stat(exe)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("executable: %v %v", fi, err)
	}
	got, err := flexvolume.LoadSettings(exe, func(string) string { return "" })
	if want := settings.WithDefaults(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("settings %+v (%v), want %+v", got, err, want)
	}

	// Over an older copy: replaced by rename (a new inode), no dotfile left.
	before, _ := os.Stat(exe)
	writeFile(t, src, "v2", 0o755)
	if _, err := flexvolume.Install(flexvolume.InstallOptions{PluginDir: pluginDir, Source: src, Settings: settings}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(exe)
	if data, _ := os.ReadFile(exe); string(data) != "v2" || os.SameFile(before, after) {
		t.Fatalf("not replaced atomically: %q, same inode %t", data, os.SameFile(before, after))
	}
	entries, _ := os.ReadDir(filepath.Dir(exe))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

func TestInstallRefuses(t *testing.T) {
	src := filepath.Join(t.TempDir(), "drv")
	writeFile(t, src, "x", 0o755)
	for _, tc := range []struct {
		name string
		opts func(dir string) flexvolume.InstallOptions
	}{
		{"bad driver", func(d string) flexvolume.InstallOptions {
			return flexvolume.InstallOptions{PluginDir: d, Driver: "noTilde", Source: src}
		}},
		{"upper case", func(d string) flexvolume.InstallOptions {
			return flexvolume.InstallOptions{PluginDir: d, Driver: "Vendor~x", Source: src}
		}},
		{"relative dir", func(string) flexvolume.InstallOptions {
			return flexvolume.InstallOptions{PluginDir: "rel", Source: src}
		}},
		{"bad plugin", func(d string) flexvolume.InstallOptions {
			return flexvolume.InstallOptions{PluginDir: d, Source: src, Settings: flexvolume.Settings{Plugin: "no slash"}}
		}},
		{"missing source", func(d string) flexvolume.InstallOptions {
			return flexvolume.InstallOptions{PluginDir: d, Source: src + ".missing"}
		}},
		{"directory in the way", func(d string) flexvolume.InstallOptions {
			os.MkdirAll(filepath.Join(d, "a~b", "b"), 0o755)
			return flexvolume.InstallOptions{PluginDir: d, Driver: "a~b", Source: src}
		}},
		{"symlink in the way", func(d string) flexvolume.InstallOptions {
			os.MkdirAll(filepath.Join(d, "a~b"), 0o755)
			os.Symlink("/bin/sh", filepath.Join(d, "a~b", "b"))
			return flexvolume.InstallOptions{PluginDir: d, Driver: "a~b", Source: src}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := flexvolume.Install(tc.opts(t.TempDir())); err == nil {
				t.Fatal("installed")
			}
		})
	}
}

func TestLoadSettings(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "glusterfs")
	noEnv := func(string) string { return "" }

	s, err := flexvolume.LoadSettings(exe, noEnv)
	if err != nil || s.Plugin != flexvolume.DefaultPlugin || s.RegistrationDir != "/var/lib/kubelet/plugin-containers" || s.TimeoutDuration() != time.Minute {
		t.Fatalf("defaults: %+v %v", s, err)
	}

	writeFile(t, exe+".json", `{"plugin":"example.com/gluster","registrationDir":"/r","runtimeEndpoint":"/run/x.sock","timeout":"5s"}`, 0o644)
	env := map[string]string{"PLUGIN_CONTAINERS_DIR": "/env/r", "CONTAINER_RUNTIME_ENDPOINT": "unix:///env.sock"}
	s, err = flexvolume.LoadSettings(exe, func(k string) string { return env[k] })
	if err != nil || s.Plugin != "example.com/gluster" || s.RegistrationDir != "/env/r" || s.RuntimeEndpoint != "unix:///env.sock" || s.TimeoutDuration() != 5*time.Second {
		t.Fatalf("file + env: %+v %v", s, err)
	}
	if s.Mode() != mcexec.ModeAuto || s.LogFile != "" {
		t.Fatalf("exec mode %q, log file %q; want auto and none by default", s.Mode(), s.LogFile)
	}
	writeFile(t, exe+".json", `{"execMode":"socket","logFile":"/var/log/a.log"}`, 0o644)
	s, err = flexvolume.LoadSettings(exe, noEnv)
	if err != nil || s.Mode() != mcexec.ModeSocket || s.LogFile != "/var/log/a.log" {
		t.Fatalf("exec mode and log file from the file: %+v %v", s, err)
	}
	writeFile(t, exe+".json", `{"allowedServers":["node-1","127.0.1.1"]}`, 0o644)
	s, err = flexvolume.LoadSettings(exe, noEnv)
	if err != nil || s.ServerPolicy().String() != "node-1, 127.0.1.1" {
		t.Fatalf("allowed servers from the file: %+v %v", s, err)
	}
	s, err = flexvolume.LoadSettings(exe, func(k string) string {
		return map[string]string{"MOUNTCONTAINERS_FLEXVOLUME_ALLOWED_SERVERS": "a.example, 10.0.0.0/8"}[k]
	})
	if err != nil || s.ServerPolicy().String() != "a.example, 10.0.0.0/8" {
		t.Fatalf("allowed servers from the environment: %+v %v", s, err)
	}
	env = map[string]string{"MOUNTCONTAINERS_FLEXVOLUME_EXEC_MODE": "cri", "MOUNTCONTAINERS_FLEXVOLUME_LOG_FILE": "/env.log"}
	s, err = flexvolume.LoadSettings(exe, func(k string) string { return env[k] })
	if err != nil || s.Mode() != mcexec.ModeCRI || s.LogFile != "/env.log" {
		t.Fatalf("exec mode and log file from the environment: %+v %v", s, err)
	}

	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"group writable", `{}`, 0o664, "writable"},
		{"bad JSON", `{`, 0o644, "decode"},
		{"bad timeout", `{"timeout":"soon"}`, 0o644, "timeout"},
		{"bad endpoint", `{"runtimeEndpoint":"tcp://x"}`, 0o644, "unix"},
		{"bad exec mode", `{"execMode":"fast"}`, 0o644, "exec mode"},
		{"relative log file", `{"logFile":"driver.log"}`, 0o644, "log file"},
		// A misspelt key would leave the allow-list unset (found by
		// FuzzDecodeSettings).
		{"misspelt key", `{"allowedServer":["node-1"]}`, 0o644, `unknown field "allowedServer"`},
		{"trailing data", `{"timeout":"5s"} {}`, 0o644, "trailing data"},
		{"bad allowed server", `{"allowedServers":["ok.example","::ffff:127.0.0.1"]}`, 0o644, `allowed server "::ffff:127.0.0.1": an IPv4-mapped IPv6 address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe := filepath.Join(t.TempDir(), "glusterfs")
			writeFile(t, exe+".json", tc.content, tc.mode)
			os.Chmod(exe+".json", tc.mode)
			if _, err := flexvolume.LoadSettings(exe, noEnv); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		exe := filepath.Join(t.TempDir(), "glusterfs")
		target := filepath.Join(t.TempDir(), "s.json")
		writeFile(t, target, `{}`, 0o644)
		os.Symlink(target, exe+".json")
		if _, err := flexvolume.LoadSettings(exe, noEnv); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("err %v", err)
		}
	})
}

func ExampleSplitDriver() {
	exe, volumeDriver, _ := flexvolume.SplitDriver("mountcontainers.io~glusterfs")
	fmt.Println(exe, volumeDriver)
	// Output: glusterfs mountcontainers.io/glusterfs
}
