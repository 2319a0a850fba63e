package hostinstall

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/node/shim"
)

func TestInstallConfig(t *testing.T) {
	bin := t.TempDir()
	for _, n := range []string{"flexvolume-driver", shim.BinaryName, shim.HelperName} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	flexDir, shimDir := filepath.Join(t.TempDir(), "exec"), filepath.Join(t.TempDir(), "bin")
	c := Config{
		FlexvolumeDir: flexDir, FlexvolumeSource: filepath.Join(bin, "flexvolume-driver"),
		ShimDir: shimDir, ShimSource: filepath.Join(bin, shim.BinaryName),
		HostRuntimeEndpoint: "unix:///run/bed/containerd.sock",
		FlexvolumeExecMode:  "cri", FlexvolumeLogFile: "/var/log/flexvolume-driver.log",
		FlexvolumeAllowedServers: []string{"gluster-1.example.com", "10.0.0.0/8"},
	}
	if err := c.Install([]string{"kubernetes.io/rbd", "kubernetes.io/glusterfs"}, "/k/plugin-containers", nil); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(flexDir, "mountcontainers.io~glusterfs", "glusterfs")
	s, err := flexvolume.LoadSettings(exe, func(string) string { return "" })
	if err != nil || s.Plugin != "kubernetes.io/glusterfs" || s.RegistrationDir != "/k/plugin-containers" || s.RuntimeEndpoint != "unix:///run/bed/containerd.sock" ||
		s.ExecMode != "cri" || s.LogFile != "/var/log/flexvolume-driver.log" ||
		!slices.Equal(s.AllowedServers, []string{"gluster-1.example.com", "10.0.0.0/8"}) {
		t.Fatalf("driver settings %+v, %v", s, err)
	}
	for _, n := range []string{shim.BinaryName, shim.HelperName} {
		if fi, err := os.Lstat(filepath.Join(shimDir, n)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s not installed as a regular file: %v", n, err)
		}
	}
	for _, tool := range []string{"mount.glusterfs", "rbd"} {
		if target, err := os.Readlink(filepath.Join(shimDir, tool)); err != nil || target != shim.BinaryName {
			t.Errorf("shim link %s: %q %v", tool, target, err)
		}
	}
}

func TestValidateAllowedServers(t *testing.T) {
	ok := Config{FlexvolumeDir: "/exec", FlexvolumeAllowedServers: []string{"gluster.example.com", "127.0.1.1", "10.0.0.0/8"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := Config{FlexvolumeDir: "/exec", FlexvolumeAllowedServers: []string{"gluster.example.com", "10.0.0.0/33"}}
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "--flexvolume-allowed-servers") || !strings.Contains(err.Error(), `"10.0.0.0/33"`) {
		t.Fatalf("Validate = %v, want an error naming the option and the entry", err)
	}
}

func TestInstallConfigPlugin(t *testing.T) {
	for _, tc := range []struct {
		chosen  string
		plugins []string
		want    string
	}{
		{"", []string{"kubernetes.io/glusterfs"}, "kubernetes.io/glusterfs"},
		{"", []string{"example.com/gluster"}, "example.com/gluster"},
		{"", []string{"a.io/x", "b.io/y"}, "error: choose"},
		{"a.io/x", []string{"a.io/x", "b.io/y"}, "a.io/x"},
		{"c.io/z", []string{"a.io/x"}, "error: not one this pod registers"},
	} {
		got, err := Config{FlexvolumePlugin: tc.chosen}.flexvolumePlugin(tc.plugins)
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tc.want) && !(strings.HasPrefix(tc.want, "error: ") && strings.Contains(got, strings.TrimPrefix(tc.want, "error: "))) {
			t.Errorf("%q of %v = %q, want %q", tc.chosen, tc.plugins, got, tc.want)
		}
	}
}

func TestFlexvolumeVolumeDriver(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{}, ""},
		{Config{FlexvolumeDriver: "example.com~nfs"}, ""},
		{Config{FlexvolumeDir: "/exec"}, "mountcontainers.io/glusterfs"},
		{Config{FlexvolumeDir: "/exec", FlexvolumeDriver: "example.com~nfs"}, "example.com/nfs"},
		{Config{FlexvolumeDir: "/exec", FlexvolumeDriver: "no-tilde"}, "error"},
	} {
		got, err := tc.c.FlexvolumeVolumeDriver()
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("%+v: %q (%v), want %q", tc.c, got, err, tc.want)
		}
	}
}
