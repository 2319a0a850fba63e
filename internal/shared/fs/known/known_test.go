package known_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/known"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// TestCheckRecordedMount: before a dead mount is made again, every server
// its record names is checked against the allow-list as it is now.
func TestCheckRecordedMount(t *testing.T) {
	gluster := func(source string, opts ...string) mountrecord.Record {
		return mountrecord.Record{FSType: "glusterfs", Source: source, Options: opts}
	}
	ceph := func(opts ...string) mountrecord.Record {
		return mountrecord.Record{FSType: "fuse.ceph", Source: "none", Options: append([]string{"ceph.conf=/dev/null", "ceph.id=web"}, opts...)}
	}
	for _, tc := range []struct {
		name    string
		allowed []string
		rec     mountrecord.Record
		want    string // "" or part of the error
	}{
		{"allowed", []string{"10.0.0.1", "10.0.0.2"}, gluster("10.0.0.1:/vol", "ro", "backup-volfile-servers=10.0.0.2"), ""},
		{"allowed by CIDR", []string{"10.0.0.0/24"}, gluster("10.0.0.9:/vol"), ""},
		{"unset list, public address", nil, gluster("192.0.2.7:/vol"), ""},
		{"listed name", []string{"gluster-1.example", "10.0.0.2"}, gluster("gluster-1.example:/vol", "backup-volfile-servers=10.0.0.2"), ""},
		{"primary removed", []string{"10.0.0.1"}, gluster("10.0.0.9:/vol"),
			"server 10.0.0.9 of the source 10.0.0.9:/vol: address 10.0.0.9 is not in the driver's allowed servers (10.0.0.1)"},
		{"backup removed", []string{"10.0.0.1", "10.0.0.2"}, gluster("10.0.0.1:/vol", "backup-volfile-servers=10.0.0.2:10.0.0.3"),
			"server 10.0.0.3 of backup-volfile-servers: address 10.0.0.3 is not in the driver's allowed servers"},
		{"older backup option", []string{"10.0.0.1"}, gluster("10.0.0.1:/vol", "backupvolfile-server=10.0.0.4"),
			"server 10.0.0.4 of backupvolfile-server"},
		{"second server of the source", []string{"10.0.0.1"}, gluster("10.0.0.1,10.0.0.5:/vol"), "server 10.0.0.5 of the source"},
		{"name no longer listed", []string{"10.0.0.1"}, gluster("gluster-1.example:/vol"),
			"server gluster-1.example of the source gluster-1.example:/vol: gluster-1.example is a host name the driver's allowed servers do not list (10.0.0.1)"},
		{"name, unset list", nil, gluster("gluster-1.example:/vol"), "gluster-1.example is a host name the driver's allowed servers do not list:"},
		{"loopback, unset list", nil, gluster("127.0.0.1:/vol"), "loopback"},
		{"metadata, everything listed", []string{"0.0.0.0/0"}, gluster("169.254.169.254:/vol"), "link-local"},
		{"numeric form", []string{"127.0.0.0/8"}, gluster("127.1:/vol"), "last label cannot be numeric"},
		{"no volume", nil, gluster("10.0.0.1"), `source "10.0.0.1": want server:/volume`},
		{"refuse all", nil, gluster("10.0.0.1:/vol"), "10.0.0.1 is refused: no settings"},

		{"ceph allowed", []string{"10.0.0.0/8", "mon-b.example"}, ceph("ceph.mon_host=10.0.0.7:6789;mon-b.example:6789"), ""},
		{"ceph monitor removed", []string{"10.0.0.7"}, ceph("ceph.mon_host=10.0.0.7:6789;10.0.0.8:6789"),
			"monitor 10.0.0.8 of ceph.mon_host: address 10.0.0.8 is not in the driver's allowed servers (10.0.0.7)"},
		{"ceph monitors split by spaces", []string{"10.0.0.7"}, ceph("ceph.mon_host=10.0.0.7:6789 10.0.0.8"), "monitor 10.0.0.8"},
		{"ceph monitor in another form", []string{"10.0.0.0/8"}, ceph("ceph.mon_host=[v2:10.0.0.7:3300/0]"), "monitor [v2"},
		{"ceph without monitors", []string{"10.0.0.0/8"}, ceph(), "no monitors in ceph.mon_host"},

		{"other file system", []string{"10.0.0.1"}, mountrecord.Record{FSType: "fuse.sshfs", Source: "user@10.9.9.9:/data"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := fs.ParseAllowedServers(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "refuse all" {
				p = fs.RefuseAllServers("no settings")
			}
			err = known.CheckRecordedMount(context.Background(), p, tc.rec)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestRecordedMountsPass: what the driver records passes the allow-list it
// was made under (a name it had to look up is recorded as the address it
// checked), and is refused once its server is no longer listed.
func TestRecordedMountsPass(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		fs      fs.Filesystem
		opts    string
		allowed []string
		later   []string // the list after the administrator's change
	}{
		{"glusterfs, address", glusterfs.FS{}, `{"servers":"192.0.2.20,192.0.2.21","volume":"v"}`, []string{"192.0.2.0/24"}, []string{"192.0.2.20"}},
		{"glusterfs, looked-up name", glusterfs.FS{}, `{"server":"public.example","volume":"v","mountOptions":"backup-volfile-servers=192.0.2.21"}`, nil, []string{"192.0.2.21"}},
		{"glusterfs, listed name", glusterfs.FS{}, `{"server":"node-1","volume":"v"}`, []string{"node-1"}, []string{"127.0.1.1"}},
		{"cephfs", cephfs.FS{}, cephVolume, []string{"mon-b.example", "10.0.0.0/8"}, []string{"10.0.0.0/8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := fs.ParseAllowedServers(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			m, err := tc.fs.Mount(ctx, decode(t, tc.opts), fs.Env{Servers: p, Resolver: names})
			if err != nil {
				t.Fatal(err)
			}
			rec := mountrecord.Record{Plugin: "kubernetes.io/x", Source: m.Source, Target: "/t", FSType: m.FSType, Options: m.Options}
			if err := known.CheckRecordedMount(ctx, p, rec); err != nil {
				t.Fatalf("the record of a mount the same list allowed (%s %q) is refused: %v", rec.Source, rec.Options, err)
			}
			later, err := fs.ParseAllowedServers(tc.later)
			if err != nil {
				t.Fatal(err)
			}
			if err := known.CheckRecordedMount(ctx, later, rec); err == nil {
				t.Fatalf("%s %q passes the list %q, which no longer allows one of its servers", rec.Source, rec.Options, tc.later)
			}
		})
	}
}

// names answers the lookups of the volumes above; a missing name is an
// error.
var names = fstest.MapResolver{
	"public.example": {"192.0.2.10", "192.0.2.11"},
	"node-1":         {"127.0.1.1"},
}

const cephKey = "AQBh9xlmAAAAABAAx8Yd1u8TZ6lIbI6bQ1lCmA=="

// cephVolume are a CephFS volume's options, as the kubelet passes them.
var cephVolume = `{"monitors":"10.0.0.7:6789,mon-b.example","user":"web","fs":"cephfs","path":"/volumes/web",` +
	`"kubernetes.io/secret/key":"` + base64.StdEncoding.EncodeToString([]byte(cephKey+"\n")) +
	`","kubernetes.io/pod.namespace":"default","kubernetes.io/pod.name":"web","kubernetes.io/pod.uid":"0f1e"}`

func decode(t *testing.T, opts string) map[string]string {
	t.Helper()
	var vals map[string]string
	if err := json.Unmarshal([]byte(opts), &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}
