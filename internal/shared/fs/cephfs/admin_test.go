package cephfs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
)

func TestParseAdmin(t *testing.T) {
	env := fs.Env{Servers: cephServers(t), Resolver: fstest.Names}
	params := map[string]string{"monitors": "10.0.0.7, mon-b.example:3300", "fs": "cephfs", "subvolumeGroup": "k8s", "user": "web"}
	a, err := cephfs.ParseAdmin(context.Background(), params, map[string]string{"key": cephKey + "\n", "user": "client.prov"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Monitors, []string{"10.0.0.7", "mon-b.example:3300"}) || a.FS != "cephfs" || a.Group != "k8s" || a.User != "prov" || string(a.Key) != cephKey {
		t.Errorf("ParseAdmin: %+v", a)
	}
	args := a.Args("/run/k", a.Create("pvc-1", 1<<30)...)
	want := []string{"--conf=/dev/null", "--id=prov", "--keyfile=/run/k", "fs", "subvolume", "create", "cephfs", "pvc-1", "--group_name", "k8s", "--mode", "777", "--size", "1073741824"}
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("Args %q lack %q", args, w)
		}
	}
	if i := slices.IndexFunc(args, func(s string) bool { return strings.HasPrefix(s, "--mon_host=") }); i < 0 || !strings.HasPrefix(args[i], "--mon_host=10.0.0.7:6789,") {
		t.Errorf("Args %q: want --mon_host with the checked monitors, port 6789 added", args)
	}
	if slices.ContainsFunc(args, func(s string) bool { return strings.Contains(s, cephKey) }) {
		t.Errorf("Args %q hold the key", args)
	}
	if got := a.Args("/k", a.Create("pvc-1", 0)...); slices.Contains(got, "--size") {
		t.Errorf("Create without a capacity: %q, want no --size", got)
	}
	if id := a.VolumeID("pvc-1"); id != "10.0.0.7,mon-b.example:3300/cephfs/k8s/pvc-1" {
		t.Errorf("VolumeID: %q", id)
	}
	p, name, ok := cephfs.ParseVolumeID(a.VolumeID("pvc-1"))
	if !ok || name != "pvc-1" || p["monitors"] != "10.0.0.7,mon-b.example:3300" || p["fs"] != "cephfs" || p["subvolumeGroup"] != "k8s" {
		t.Errorf("ParseVolumeID(VolumeID): %v %q %v", p, name, ok)
	}
	// The user defaults to admin and the group to csi.
	a, err = cephfs.ParseAdmin(context.Background(), map[string]string{"monitors": "10.0.0.7", "fs": "cephfs"}, map[string]string{"key": cephKey}, env)
	if err != nil || a.User != "admin" || a.Group != cephfs.DefaultSubvolumeGroup {
		t.Errorf("defaults: %+v, %v", a, err)
	}

	for _, tc := range []struct {
		what            string
		params, secrets map[string]string
		field           string
	}{
		{"no monitors", map[string]string{"fs": "cephfs"}, map[string]string{"key": cephKey}, "monitors"},
		{"a monitor not allowed", map[string]string{"monitors": "192.168.1.1", "fs": "cephfs"}, map[string]string{"key": cephKey}, "monitors"},
		{"no fs", map[string]string{"monitors": "10.0.0.7"}, map[string]string{"key": cephKey}, "fs"},
		{"an fs with a slash", map[string]string{"monitors": "10.0.0.7", "fs": "a/b"}, map[string]string{"key": cephKey}, "fs"},
		{"a group with a slash", map[string]string{"monitors": "10.0.0.7", "fs": "cephfs", "subvolumeGroup": "../x"}, map[string]string{"key": cephKey}, "subvolumeGroup"},
		{"an option as the group", map[string]string{"monitors": "10.0.0.7", "fs": "cephfs", "subvolumeGroup": "--size"}, map[string]string{"key": cephKey}, "subvolumeGroup"},
		{"no key", map[string]string{"monitors": "10.0.0.7", "fs": "cephfs"}, nil, "secret key"},
		{"an option as the key", map[string]string{"monitors": "10.0.0.7", "fs": "cephfs"}, map[string]string{"key": "--keyring=/etc/ceph/x"}, "secret key"},
		{"an option as the user", map[string]string{"monitors": "10.0.0.7", "fs": "cephfs"}, map[string]string{"key": cephKey, "user": "--name=x"}, "secret user"},
		{"another entry", map[string]string{"monitors": "10.0.0.7", "fs": "cephfs"}, map[string]string{"key": cephKey, "keyring": "x"}, "secret keyring"},
	} {
		_, err := cephfs.ParseAdmin(context.Background(), tc.params, tc.secrets, env)
		var oe *fs.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field || strings.Contains(err.Error(), cephKey) {
			t.Errorf("%s: %v; want an error of field %q, without the key", tc.what, err, tc.field)
		}
	}
}

func TestParseVolumeIDRefuses(t *testing.T) {
	for _, id := range []string{
		"", "a/b/c", "m/fs/g/n/x", "m//g/n", "m/fs/g/", "m/fs/g/-n", "m/fs/g/_deleting", "m /fs/g/n",
		"10.0.0.1:6789/cephfs/csi/" + strings.Repeat("n", 65),
		"gluster-1/gv0/pvc-1", // a GlusterFS volume's
	} {
		if p, n, ok := cephfs.ParseVolumeID(id); ok {
			t.Errorf("ParseVolumeID(%q) = %v, %q: want it refused", id, p, n)
		}
	}
}

func TestParsePathAndQuota(t *testing.T) {
	if p, err := cephfs.ParsePath([]byte("/volumes/csi/pvc-1/0f1e2d3c-aaaa\n")); err != nil || p != "/volumes/csi/pvc-1/0f1e2d3c-aaaa" {
		t.Errorf("ParsePath: %q, %v", p, err)
	}
	for _, out := range []string{"", "/", "/etc", "/volumes/../etc", "/volumes/a\n/volumes/b", "/volumes/a b", "Error: x"} {
		if p, err := cephfs.ParsePath([]byte(out)); err == nil {
			t.Errorf("ParsePath(%q) = %q, want an error", out, p)
		}
	}
	for out, want := range map[string]int64{`{"bytes_quota": "infinite"}`: 0, `{"bytes_quota": 1073741824, "uid": 0}`: 1 << 30} {
		if got, err := cephfs.ParseQuota([]byte(out)); err != nil || got != want {
			t.Errorf("ParseQuota(%s) = %d, %v; want %d", out, got, err, want)
		}
	}
	for _, out := range []string{``, `{}`, `{"bytes_quota": -1}`, `{"bytes_quota": "lots"}`, `[1]`} {
		if got, err := cephfs.ParseQuota([]byte(out)); err == nil {
			t.Errorf("ParseQuota(%s) = %d, want an error", out, got)
		}
	}
}
