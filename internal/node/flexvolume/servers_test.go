package flexvolume_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
)

// names resolves the servers of the tests' volumes.
var names = fstest.Names

// TestMountRefusesServers: the driver applies the settings' allow-list
// before anything runs, and mounts the checked address.
func TestMountRefusesServers(t *testing.T) {
	tools := newFakeTools(t)
	d := hostDriver(t)
	d.Servers = fs.ServerPolicy{}
	d.Resolver = names
	for _, tc := range []struct{ name, opts, field string }{
		{"loopback", `{"server":"127.0.0.1","volume":"v"}`, `invalid option "server": address 127.0.0.1 is a loopback address`},
		{"metadata", `{"server":"169.254.169.254","volume":"v"}`, `invalid option "server": address 169.254.169.254 is a link-local address`},
		{"name to loopback", `{"server":"local.example","volume":"v"}`, `invalid option "server": local.example resolves to`},
		{"backup in servers", `{"servers":"public.example,127.0.0.1","volume":"v"}`, `invalid option "servers": address 127.0.0.1`},
		{"backup option", `{"server":"public.example","volume":"v","mountOptions":"backup-volfile-servers=192.0.2.3:0.0.0.0"}`, `invalid option "mountOptions": backup-volfile-servers: address 0.0.0.0`},
		{"mapped", `{"server":"::ffff:127.0.0.1","volume":"v"}`, `invalid option "server": "::ffff:127.0.0.1": IPv4-mapped`},
		{"bracketed mapped", `{"server":"[::ffff:10.0.0.1]","volume":"v"}`, `IPv4-mapped`},
		{"ipv6", `{"server":"[2001:db8::1]","volume":"v"}`, `IPv6 addresses are not supported`},
		{"port", `{"server":"public.example:24007","volume":"v"}`, `':' is not allowed`},
		{"inet_aton short form", `{"server":"127.1","volume":"v"}`, `last label cannot be numeric`},
		{"inet_aton number", `{"server":"2130706433","volume":"v"}`, `last label cannot be numeric`},
		{"inet_aton hex", `{"server":"0x7f.1","volume":"v"}`, `last label cannot be numeric`},
		{"leading zero", `{"server":"0127.0.0.1","volume":"v"}`, `last label cannot be numeric`},
		{"log-level TRACE", `{"server":"public.example","volume":"v","mountOptions":"log-level=TRACE"}`, `invalid option "mountOptions": mount option log-level="TRACE"`},
		{"log-level DEBUG", `{"server":"public.example","volume":"v","mountOptions":"log-level=DEBUG"}`, `log-level="DEBUG"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := call(t, d, "mount", filepath.Join(t.TempDir(), "v"), tc.opts)
			if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, tc.field) {
				t.Fatalf("reply %+v, want a Failure with %s", s, tc.field)
			}
		})
	}
	if c := tools.calls(t); len(c) != 0 {
		t.Fatalf("refused servers ran %q", c)
	}

	dir := filepath.Join(t.TempDir(), "v")
	s, _, _ := call(t, d, "mount", dir, `{"servers":"public.example,192.0.2.20","volume":"v","mountOptions":"log-level=ERROR"}`)
	if s.Status != flexvolume.StatusSuccess {
		t.Fatalf("mount: %+v", s)
	}
	want := "mount -t glusterfs -o log-level=ERROR,backup-volfile-servers=192.0.2.20 192.0.2.10:/v " + dir
	if c := tools.calls(t); len(c) != 1 || c[0] != want {
		t.Fatalf("ran %q, want %q (the checked address, not the name)", c, want)
	}
	o, err := glusterfs.ParseOptions([]byte(`{"server":"192.0.2.20","volume":"v","mountOptions":"backup-volfile-servers=public.example:192.0.2.21"}`))
	if err != nil {
		t.Fatal(err)
	}
	o, err = o.CheckServers(context.Background(), fs.ServerPolicy{}, names)
	if got, want := strings.Join(o.MountArgs("D"), " "), "-t glusterfs -o backup-volfile-servers=192.0.2.10:192.0.2.21 192.0.2.20:/v D"; err != nil || got != want {
		t.Fatalf("backup option: %q %v, want %q", got, err, want)
	}
}
