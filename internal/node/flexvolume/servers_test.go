package flexvolume_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
)

// fakeResolver answers from a map; a missing name is an error.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

var names = fakeResolver{
	"public.example":   {"192.0.2.10", "192.0.2.11"},
	"local.example":    {"127.0.1.1"},
	"metadata.example": {"169.254.169.254"},
	"mapped.example":   {"::ffff:127.0.0.1"},
	"mixed.example":    {"192.0.2.10", "127.0.0.1"},
	"v6only.example":   {"2001:db8::1"},
	"node-1":           {"127.0.1.1"},
}

func TestServerPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed []string
		server  string
		want    string // the address connected to, or "error: <part of the message>"
	}{
		// An unset list: anything but the special addresses.
		{"unset public address", nil, "192.0.2.7", "192.0.2.7"},
		{"unset loopback", nil, "127.0.0.1", "error: loopback"},
		{"unset other loopback", nil, "127.3.4.5", "error: loopback"},
		{"unset unspecified", nil, "0.0.0.0", "error: unspecified"},
		{"unset this network", nil, "0.1.2.3", "error: unspecified"},
		{"unset metadata", nil, "169.254.169.254", "error: link-local"},
		{"unset multicast", nil, "224.0.0.1", "error: multicast"},
		{"unset broadcast", nil, "255.255.255.255", "error: broadcast"},
		{"unset name pinned to its address", nil, "public.example", "192.0.2.10"},
		{"unset name to loopback", nil, "local.example", "error: local.example resolves to an address that is not allowed: address 127.0.1.1 is a loopback"},
		{"unset name to metadata", nil, "metadata.example", "error: link-local"},
		{"unset name to mapped loopback", nil, "mapped.example", "error: loopback"},
		{"unset name with one bad address", nil, "mixed.example", "error: 127.0.0.1"},
		{"unset name unresolvable", nil, "nowhere.example", "error: cannot be resolved"},
		{"unset name IPv6 only", nil, "v6only.example", "error: no IPv4 address"},

		// A list.
		{"listed name", []string{"node-1"}, "node-1", "node-1"},
		{"listed name, other case and dot", []string{"Node-1."}, "NODE-1", "NODE-1"},
		{"listed loopback address", []string{"127.0.1.1"}, "127.0.1.1", "127.0.1.1"},
		{"listed loopback CIDR", []string{"127.0.0.0/8"}, "local.example", "127.0.1.1"},
		{"everything does not cover loopback", []string{"0.0.0.0/0"}, "127.0.0.1", "error: loopback"},
		{"everything does not cover metadata", []string{"0.0.0.0/0"}, "169.254.169.254", "error: link-local"},
		{"everything covers public", []string{"0.0.0.0/0"}, "192.0.2.99", "192.0.2.99"},
		{"CIDR", []string{"192.0.2.0/24"}, "public.example", "192.0.2.10"},
		{"not in the list", []string{"192.0.2.0/28"}, "198.51.100.1", "error: not in the driver's allowed servers (192.0.2.0/28)"},
		{"name not listed, address not listed", []string{"node-1"}, "public.example", "error: not in the driver's allowed servers"},
		{"other loopback address not listed", []string{"127.0.1.1"}, "127.0.0.1", "error: loopback"},
		{"link-local CIDR listed", []string{"169.254.0.0/16"}, "169.254.169.254", "169.254.169.254"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := flexvolume.ParseAllowedServers(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Check(context.Background(), names, tc.server)
			if err != nil {
				got = "error: " + err.Error()
			}
			if got != tc.want && !(strings.HasPrefix(tc.want, "error: ") && strings.HasPrefix(got, "error: ") && strings.Contains(got, strings.TrimPrefix(tc.want, "error: "))) {
				t.Fatalf("Check(%q) with %q = %q, want %q", tc.server, tc.allowed, got, tc.want)
			}
		})
	}
}

func TestParseAllowedServers(t *testing.T) {
	if _, err := flexvolume.ParseAllowedServers([]string{" gluster.example.com ", "", "10.0.0.0/8", "192.0.2.1", "2001:db8::/32", "fe80::1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"10.0.0.0/33", "::ffff:127.0.0.1", "::ffff:10.0.0.0/104", "host:24007", "a;b", "fe80::1%eth0", "127.1", "-x"} {
		_, err := flexvolume.ParseAllowedServers([]string{"ok.example", bad})
		if err == nil || !strings.Contains(err.Error(), "allowed server \""+bad+"\"") {
			t.Errorf("%q: %v, want an error naming the entry", bad, err)
		}
	}
}

// TestMountRefusesServers: the driver applies the settings' allow-list
// before anything runs, and mounts the checked address.
func TestMountRefusesServers(t *testing.T) {
	tools := newFakeTools(t)
	d := hostDriver(t)
	d.Servers = flexvolume.ServerPolicy{}
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
	o, err := flexvolume.ParseOptions([]byte(`{"server":"192.0.2.20","volume":"v","mountOptions":"backup-volfile-servers=public.example:192.0.2.21"}`))
	if err != nil {
		t.Fatal(err)
	}
	o, err = o.CheckServers(context.Background(), flexvolume.ServerPolicy{}, names)
	if got, want := strings.Join(o.MountArgs("D"), " "), "-t glusterfs -o backup-volfile-servers=192.0.2.10:192.0.2.21 192.0.2.20:/v D"; err != nil || got != want {
		t.Fatalf("backup option: %q %v, want %q", got, err, want)
	}
}
