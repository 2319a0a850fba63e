package flexvolume_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
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
	env := map[string]string{flexvolume.EnvRegistrationDir: "/env/r", "CONTAINER_RUNTIME_ENDPOINT": "unix:///env.sock"}
	s, err = flexvolume.LoadSettings(exe, func(k string) string { return env[k] })
	if err != nil || s.Plugin != "example.com/gluster" || s.RegistrationDir != "/env/r" || s.RuntimeEndpoint != "unix:///env.sock" || s.TimeoutDuration() != 5*time.Second {
		t.Fatalf("file + env: %+v %v", s, err)
	}
	if len(s.OldNames()) != 0 {
		t.Errorf("the current names read as old ones: %v", s.OldNames())
	}
	// The registration directory's old variable still gives it, after the
	// new one, and is reported for the log.
	env = map[string]string{"PLUGIN_CONTAINERS_DIR": "/old/r"}
	s, err = flexvolume.LoadSettings(exe, func(k string) string { return env[k] })
	if err != nil || s.RegistrationDir != "/old/r" || len(s.OldNames()) != 1 || s.OldNames()[0].Old != "PLUGIN_CONTAINERS_DIR" || s.OldNames()[0].New != flexvolume.EnvRegistrationDir {
		t.Fatalf("old name: %+v %v, old names %v", s, err, s.OldNames())
	}
	env[flexvolume.EnvRegistrationDir] = "/new/r"
	if s, err = flexvolume.LoadSettings(exe, func(k string) string { return env[k] }); err != nil || s.RegistrationDir != "/new/r" || len(s.OldNames()) != 0 {
		t.Fatalf("both names: %+v %v; want the new one's", s, err)
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
	if s.SharedMounts {
		t.Fatal("shared mounts on by default")
	}
	writeFile(t, exe+".json", `{"sharedMounts":true}`, 0o644)
	if s, err = flexvolume.LoadSettings(exe, noEnv); err != nil || !s.SharedMounts {
		t.Fatalf("shared mounts from the file: %+v %v", s, err)
	}
	env = map[string]string{flexvolume.EnvSharedMounts: "false"}
	if s, err = flexvolume.LoadSettings(exe, func(k string) string { return env[k] }); err != nil || s.SharedMounts {
		t.Fatalf("shared mounts off from the environment over the file's: %+v %v", s, err)
	}
	env[flexvolume.EnvSharedMounts] = "yes please"
	if _, err = flexvolume.LoadSettings(exe, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), flexvolume.EnvSharedMounts) {
		t.Fatalf("a bad %s: %v, want an error naming it", flexvolume.EnvSharedMounts, err)
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

// TestInstallRefusesUntrustedDirs: the plugin directory and the driver's
// directory must be directories of root's that no one else can write;
// the error names the one that is not, and nothing is installed.
func TestInstallRefusesUntrustedDirs(t *testing.T) {
	src := filepath.Join(t.TempDir(), "drv")
	writeFile(t, src, "x", 0o755)
	elsewhere := t.TempDir()
	for _, tc := range []struct {
		name string
		// setup prepares base and returns the plugin directory to install
		// into and the directory the error must name.
		setup func(t *testing.T, base string) (pluginDir, bad string)
		says  string
	}{
		{"plugin dir is a symbolic link", func(t *testing.T, base string) (string, string) {
			link := filepath.Join(base, "exec")
			mustSymlink(t, elsewhere, link)
			return link, link
		}, "symbolic link"},
		{"plugin dir group-writable", func(t *testing.T, base string) (string, string) {
			return mustMkdir(t, filepath.Join(base, "exec"), 0o775), filepath.Join(base, "exec")
		}, "writable by group or others"},
		{"plugin dir world-writable", func(t *testing.T, base string) (string, string) {
			return mustMkdir(t, filepath.Join(base, "exec"), 0o1777), filepath.Join(base, "exec")
		}, "writable by group or others"},
		{"plugin dir not root's", func(t *testing.T, base string) (string, string) {
			return chownedDir(t, filepath.Join(base, "exec")), filepath.Join(base, "exec")
		}, "owned by uid 65534"},
		{"driver dir is a symbolic link", func(t *testing.T, base string) (string, string) {
			mustSymlink(t, elsewhere, filepath.Join(base, flexvolume.DefaultDriver))
			return base, filepath.Join(base, flexvolume.DefaultDriver)
		}, "symbolic link"},
		{"driver dir world-writable", func(t *testing.T, base string) (string, string) {
			return base, mustMkdir(t, filepath.Join(base, flexvolume.DefaultDriver), 0o777)
		}, "writable by group or others"},
		{"driver dir not root's", func(t *testing.T, base string) (string, string) {
			return base, chownedDir(t, filepath.Join(base, flexvolume.DefaultDriver))
		}, "owned by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pluginDir, bad := tc.setup(t, t.TempDir())
			_, err := flexvolume.Install(flexvolume.InstallOptions{PluginDir: pluginDir, Source: src})
			if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err %v, want a refusal of %s saying %q", err, bad, tc.says)
			}
			if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
				t.Fatalf("installed through the link: %v", entries)
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// mustMkdir makes dir with exactly mode perm and returns it.
func mustMkdir(t *testing.T, dir string, perm os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	mode := perm.Perm()
	if perm&0o1000 != 0 {
		mode |= os.ModeSticky
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chownedDir makes dir owned by uid 65534 (nobody), mode 0755; it skips
// the test when it cannot.
func chownedDir(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory away")
	}
	mustMkdir(t, dir, 0o755)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNoSettingsFileRefusesServers: without a settings file no
// administrator chose the servers, so every server is refused (before any
// lookup) with a message saying why; the environment can still list them,
// and an empty list in a settings file keeps its documented meaning.
func TestNoSettingsFileRefusesServers(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "glusterfs")
	noEnv := func(string) string { return "" }
	ctx := context.Background()
	s, err := flexvolume.LoadSettings(exe, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, server := range []string{"10.0.0.7", "public.example"} {
		if got, err := s.ServerPolicy().Check(ctx, names, server); err == nil || !strings.Contains(err.Error(), "no settings file "+exe+".json") {
			t.Errorf("no settings file: %s allowed as %q (%v); want a refusal naming the missing file", server, got, err)
		}
	}
	if err := s.ServerPolicy().CheckAddr(netip.MustParseAddr("192.0.2.1")); err == nil {
		t.Error("no settings file: an address allowed")
	}
	_, err = glusterfs.FS{}.Mount(ctx, decode(t, `{"server":"10.0.0.7","volume":"v"}`), fs.Env{Servers: s.ServerPolicy()})
	if err == nil || !strings.Contains(err.Error(), "no settings file") {
		t.Errorf("mount without a settings file: %v, want a refusal", err)
	}

	s, err = flexvolume.LoadSettings(exe, func(k string) string {
		return map[string]string{flexvolume.EnvAllowedServers: "10.0.0.0/8"}[k]
	})
	if _, cerr := s.ServerPolicy().Check(ctx, names, "10.0.0.7"); err != nil || cerr != nil {
		t.Errorf("no settings file, servers from the environment: %v, %v", err, cerr)
	}

	writeFile(t, exe+".json", `{}`, 0o644)
	s, err = flexvolume.LoadSettings(exe, noEnv)
	if _, cerr := s.ServerPolicy().Check(ctx, names, "public.example"); err != nil || cerr != nil {
		t.Errorf("an empty list in the settings file: %v, %v; want any server that is not special", err, cerr)
	}
}

// TestBadAllowListRefuses: settings whose list does not parse, which
// LoadSettings reports, give a policy that refuses every server.
func TestBadAllowListRefuses(t *testing.T) {
	s := flexvolume.Settings{AllowedServers: []string{"10.0.0.0/33"}}
	if err := s.ServerPolicy().CheckAddr(netip.MustParseAddr("192.0.2.1")); err == nil || !strings.Contains(err.Error(), "invalid") {
		t.Fatalf("bad list: %v, want a refusal", err)
	}
}
