package cephfs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
)

// elsewhere reports whether s is part of a key of vals, or of a value
// other than the secret's: an error or option quoting that holds s without
// holding the secret.
func elsewhere(vals map[string]string, s string) bool {
	for k, v := range vals {
		if strings.Contains(k, s) || (k != KeySecretKey && strings.Contains(v, s)) {
			return true
		}
	}
	return false
}

var cephSeeds = []string{
	"{\"00000000000\xc5\":\"\",\"kubernetes.io/secret/key\":\"00000000\"}",
	`{"monitors":"10.0.0.7","user":"AAAAAAAAAAAAAAAA","kubernetes.io/secret/key":"QUFBQUFBQUFBQUFBQUFBQQ=="}`,
	`{"monitors":"10.0.0.7:6789,mon.example","user":"web","fs":"cephfs","path":"/volumes/web","mountOptions":"noatime,ro","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQo="}`,
	`{"monitors":"10.0.0.7","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQ==","kubernetes.io/readwrite":"ro"}`,
	`{"monitors":"127.0.0.1:6789","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQ=="}`,
	`{"monitors":"10.0.0.7","path":"/a/../b","user":"a,b","kubernetes.io/secret/key":"eA=="}`,
	`{"monitors":"[::1]:6789","mountOptions":"ceph.keyring=/x"}`,
	`{"monitors":"10.0.0.7:65536;x"}`,
	`{"monitors":"10.0.0.7","mountOptions":"noatime,noatime,rw","kubernetes.io/readwrite":"ro","kubernetes.io/secret/key":"QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQ=="}`,
}

// FuzzCephFSOptions: the CephFS option parser is deterministic; a refusal
// names one of the object's keys (or a required key it lacks) and never
// quotes the secret; an accepted volume gives mount(8) options that hold
// no comma, no NUL and no part of the key, name no file other than the
// key file the driver adds, connect only to allowed monitors, and carry
// the key as the base64 text of a cephx key.
func FuzzCephFSOptions(f *testing.F) {
	for _, s := range cephSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		vals, err := fs.DecodeOptions(raw)
		if err != nil {
			return // DecodeOptions is glusterfs.FuzzParseOptions' subject
		}
		ctx := context.Background()
		m, err := FS{}.Mount(ctx, vals, fs.Env{Resolver: fstest.HashResolver{}})
		m2, err2 := FS{}.Mount(ctx, vals, fs.Env{Resolver: fstest.HashResolver{}})
		if !reflect.DeepEqual(m, m2) || errString(err) != errString(err2) {
			t.Fatalf("Mount(%q) = %+v, %v, then %+v, %v", raw, m, err, m2, err2)
		}
		if err != nil {
			var oe *fs.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("Mount(%q): %v, not an OptionError", raw, err)
			}
			if _, ok := vals[oe.Field]; !ok && oe.Field != KeyMonitors && oe.Field != KeySecretKey {
				t.Fatalf("Mount(%q): error names %q, which it does not have", raw, oe.Field)
			}
			if k := vals[KeySecretKey]; len(k) >= 8 && strings.Contains(err.Error(), k) && !elsewhere(vals, k) {
				t.Fatalf("Mount(%q): the error quotes the secret: %v", raw, err)
			}
			return
		}
		if m.FSType != "fuse.ceph" || m.Source != "none" || m.Secret == nil || m.Secret.Option != "ceph.keyfile" {
			t.Fatalf("Mount(%q) = %+v", raw, m)
		}
		if !cephKeyRE().Match(m.Secret.Data) {
			t.Fatalf("Mount(%q): key %q is not a cephx key", raw, m.Secret.Data)
		}
		seen := map[string]bool{}
		for _, o := range m.Options {
			name, value, _ := strings.Cut(o, "=")
			if o == "" || strings.ContainsAny(o, ",\x00 \t\n") || seen[name] {
				t.Fatalf("Mount(%q): option %q (all: %q)", raw, o, m.Options)
			}
			seen[name] = true
			if strings.Contains(o, string(m.Secret.Data)) && !elsewhere(vals, string(m.Secret.Data)) {
				t.Fatalf("Mount(%q): option %q holds the key", raw, o)
			}
			switch name {
			case "ceph.id", "ceph.client_fs", "ceph.client_mountpoint":
			case "ceph.conf":
				if value != "/dev/null" {
					t.Fatalf("Mount(%q): ceph.conf=%q", raw, value)
				}
			case "ceph.mon_host":
				for _, mon := range strings.Split(value, ";") {
					host, _, _ := strings.Cut(mon, ":")
					a, err := netip.ParseAddr(host)
					if err != nil || !a.Is4() || fstest.IsSpecial(a) {
						t.Fatalf("Mount(%q): monitor %q with an empty allow-list", raw, mon)
					}
				}
			default:
				if !slices.Contains(cephMountOptions, o) {
					t.Fatalf("Mount(%q): option %q is not allowed", raw, o)
				}
			}
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzCephAdmin: a volume ID the controller accepts names monitors, a
// file system, a group and a subvolume that the ceph tool cannot take for
// anything but those (no argument starts with '-' or holds a space), and
// it is the ID the controller would make for them again; the parameters
// it names are checked as a StorageClass's (an allowed monitor, a key),
// the key never in an argument or an error; a path the tool prints is
// taken only when clean and below /volumes/.
func FuzzCephAdmin(f *testing.F) {
	f.Add("10.0.0.7:6789/cephfs/csi/pvc-1", "AQBh9xlmAAAAABAAx8Yd1u8TZ6lIbI6bQ1lCmA==", "admin", "/volumes/csi/pvc-1/0f1e")
	f.Add("10.0.0.7,mon-b.example/fs.x/grp_1/v-0123", "AQBh9xlmAAAAABAAx8Yd1u8TZ6lIbI6bQ1lCmA==", "client.prov", "/volumes/../etc")
	f.Add("127.0.0.1/cephfs/csi/pvc-1", "--keyring=/x", "-n", "/volumes/a\n/b")
	f.Add("10.0.0.7/-fs/--size/pvc", "x", "", "")
	f.Fuzz(func(t *testing.T, id, key, user, path string) {
		env := fs.Env{Servers: fstest.Must(fs.ParseAllowedServers(fstest.CephAllowed)), Resolver: fstest.HashResolver{}}
		if p, err := ParsePath([]byte(path)); err == nil {
			if !strings.HasPrefix(p, "/volumes/") || !pathOK(p) {
				t.Fatalf("ParsePath(%q) = %q", path, p)
			}
		}
		params, name, ok := ParseVolumeID(id)
		if !ok {
			return
		}
		secrets := map[string]string{SecretKey: key}
		if user != "" {
			secrets[SecretUser] = user
		}
		a, err := ParseAdmin(context.Background(), params, secrets, env)
		if err != nil {
			var oe *fs.OptionError
			// The key must not be quoted: a key that is part of what the
			// error may quote (the ID's parts and the user, as they are
			// and as %q writes them) proves nothing.
			visible := id + " " + user + " " + fmt.Sprintf("%q", user)
			for _, v := range params {
				visible += fmt.Sprintf(" %q", v)
			}
			quoted := strings.Contains(err.Error(), key) && !strings.Contains(visible, key)
			if !errors.As(err, &oe) || (len(key) > 3 && quoted) {
				t.Fatalf("ParseAdmin(%v): %v", params, err)
			}
			return
		}
		if got := a.VolumeID(name); got != id {
			t.Fatalf("ParseVolumeID(%q) then VolumeID: %q", id, got)
		}
		for _, cmd := range [][]string{a.GroupCreate(), a.Create(name, 1), a.GetPath(name), a.Info(name), a.Remove(name)} {
			for _, arg := range cmd {
				if arg == "" || strings.ContainsAny(arg, " \t\n=") || (strings.HasPrefix(arg, "-") && arg != "--group_name" && arg != "--size" && arg != "--mode") {
					t.Fatalf("command %q of ID %q: argument %q", cmd, id, arg)
				}
			}
			for _, arg := range a.Args("/run/k", cmd...) {
				if strings.Contains(arg, key) {
					t.Fatalf("the key %q is in argument %q", key, arg)
				}
			}
		}
	})
}
