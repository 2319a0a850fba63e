package cephfs_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
)

const cephKey = fstest.CephKey

var cephKeyOpt = fstest.CephKeyOption

func cephOpts(extra string) string { return fstest.CephOptions(extra) }

func cephServers(*testing.T) fs.ServerPolicy {
	return fstest.Must(fs.ParseAllowedServers(fstest.CephAllowed))
}

func TestCephFSMount(t *testing.T) {
	env := fs.Env{Servers: cephServers(t)}
	for _, tc := range []struct {
		name, opts string
		want       []string
	}{
		{"full", cephOpts(`"mountOptions":"noatime, nosuid"`),
			[]string{"ceph.conf=/dev/null", "ceph.id=web", "ceph.mon_host=10.0.0.7:6789;mon-b.example:6789", "ceph.client_fs=cephfs", "ceph.client_mountpoint=/volumes/web", "noatime", "nosuid"}},
		{"read-only", cephOpts(`"kubernetes.io/readwrite":"ro","mountOptions":"rw"`),
			[]string{"ceph.conf=/dev/null", "ceph.id=web", "ceph.mon_host=10.0.0.7:6789;mon-b.example:6789", "ceph.client_fs=cephfs", "ceph.client_mountpoint=/volumes/web", "ro"}},
		{"defaults", `{"monitors":"10.1.2.3","kubernetes.io/fsType":"cephfs","kubernetes.io/secret/key":"` + cephKeyOpt + `"}`,
			[]string{"ceph.conf=/dev/null", "ceph.id=admin", "ceph.mon_host=10.1.2.3:6789"}},
		{"client. prefix, root path", `{"monitors":"10.1.2.3:3300","user":"client.admin","path":"/","kubernetes.io/secret/key":"` + cephKeyOpt + `"}`,
			[]string{"ceph.conf=/dev/null", "ceph.id=admin", "ceph.mon_host=10.1.2.3:3300"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := cephfs.FS{}.Mount(context.Background(), decode(t, tc.opts), env)
			if err != nil {
				t.Fatal(err)
			}
			if m.FSType != "fuse.ceph" || m.Source != "none" || !slices.Equal(m.Options, tc.want) {
				t.Fatalf("mount -t %s %s -o %q, want -t fuse.ceph none -o %q", m.FSType, m.Source, m.Options, tc.want)
			}
			if m.Secret == nil || m.Secret.Option != "ceph.keyfile" || string(m.Secret.Data) != cephKey {
				t.Fatalf("secret %+v, want the key (trimmed) for ceph.keyfile", m.Secret)
			}
			for _, o := range m.Options {
				if strings.Contains(o, cephKey[:20]) {
					t.Fatalf("option %q holds the key", o)
				}
			}
		})
	}
}

func decode(t *testing.T, opts string) map[string]string {
	t.Helper()
	var vals map[string]string
	if err := json.Unmarshal([]byte(opts), &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

func TestCephFSBadOptions(t *testing.T) {
	env := fs.Env{Servers: cephServers(t)}
	key := `"kubernetes.io/secret/key":"` + cephKeyOpt + `"`
	for _, tc := range []struct{ opts, field, says string }{
		{`{` + key + `}`, "monitors", "missing"},
		{`{"monitors":"10.0.0.7"}`, "kubernetes.io/secret/key", "secretRef"},
		{`{"monitors":"10.0.0.7","kubernetes.io/secret/key":"%%%"}`, "kubernetes.io/secret/key", "base64"},
		{`{"monitors":"10.0.0.7","kubernetes.io/secret/key":"` + base64.StdEncoding.EncodeToString([]byte("not a key, with spaces")) + `"}`, "kubernetes.io/secret/key", "not a cephx key"},
		{`{"monitors":"127.0.0.1",` + key + `}`, "monitors", "loopback"},
		{`{"monitors":"169.254.169.254:80",` + key + `}`, "monitors", "link-local"},
		{`{"monitors":"192.168.1.1",` + key + `}`, "monitors", "not in the driver's allowed servers"},
		{`{"monitors":"10.0.0.7:0",` + key + `}`, "monitors", "port"},
		{`{"monitors":"10.0.0.7:99999",` + key + `}`, "monitors", "port"},
		{`{"monitors":"[::1]:6789",` + key + `}`, "monitors", "port"},
		{`{"monitors":"10.0.0.7;touch /x",` + key + `}`, "monitors", "not a host name"},
		{`{"monitors":"10.0.0.7","user":"a,ceph.keyring=/etc/shadow",` + key + `}`, "user", "cephx user"},
		{`{"monitors":"10.0.0.7","fs":"x y",` + key + `}`, "fs", "file system name"},
		{`{"monitors":"10.0.0.7","path":"/a/../../etc",` + key + `}`, "path", "clean absolute path"},
		{`{"monitors":"10.0.0.7","path":"rel",` + key + `}`, "path", "clean absolute path"},
		{`{"monitors":"10.0.0.7","path":"/a,ceph.admin_socket=/x",` + key + `}`, "path", "clean absolute path"},
		{`{"monitors":"10.0.0.7","mountOptions":"ceph.keyring=/etc/ceph/admin.keyring",` + key + `}`, "mountOptions", "not allowed"},
		{`{"monitors":"10.0.0.7","mountOptions":"allow_other",` + key + `}`, "mountOptions", "not allowed"},
		{`{"monitors":"10.0.0.7","volume":"v",` + key + `}`, "volume", "unknown option"},
		{`{"monitors":"10.0.0.7","kubernetes.io/fsType":"glusterfs",` + key + `}`, "kubernetes.io/fsType", "only cephfs"},
	} {
		_, err := cephfs.FS{}.Mount(context.Background(), decode(t, tc.opts), env)
		var oe *fs.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: error %v, want an OptionError on %q saying %q", tc.opts, err, tc.field, tc.says)
		}
		if err != nil && strings.Contains(err.Error(), cephKey[:20]) {
			t.Errorf("%s: the error quotes the key: %v", tc.opts, err)
		}
	}
}
