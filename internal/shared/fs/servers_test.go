package fs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
)

// names resolves the servers of the tests below.
var names = fstest.Names

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
			p, err := fs.ParseAllowedServers(tc.allowed)
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
	if _, err := fs.ParseAllowedServers([]string{" gluster.example.com ", "", "10.0.0.0/8", "192.0.2.1", "2001:db8::/32", "fe80::1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"10.0.0.0/33", "::ffff:127.0.0.1", "::ffff:10.0.0.0/104", "host:24007", "a;b", "fe80::1%eth0", "127.1", "-x"} {
		_, err := fs.ParseAllowedServers([]string{"ok.example", bad})
		if err == nil || !strings.Contains(err.Error(), "allowed server \""+bad+"\"") {
			t.Errorf("%q: %v, want an error naming the entry", bad, err)
		}
	}
}
