package fs

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
)

// FuzzServerPolicy: an allow-list the parser accepts prints as entries
// that parse to the same list, also joined with commas as the environment
// gives them; a refusal names the entry. A special address is allowed only
// by an entry naming nothing but special addresses, an IPv4-mapped address
// exactly as the IPv4 address it maps, and with a non-empty list an
// ordinary address only by an entry that holds it.
func FuzzServerPolicy(f *testing.F) {
	for _, tc := range [][2]string{
		{"", "192.0.2.7"}, {"", "127.0.0.1"}, {"", "::ffff:127.0.0.1"}, {"", "169.254.169.254"},
		{"0.0.0.0/0", "127.0.0.1"}, {"0.0.0.0/0", "192.0.2.99"}, {"::/0", "::ffff:127.0.0.1"}, {"::/0", "::1"},
		{"127.0.0.0/8", "127.0.1.1"}, {"127.0.1.1", "127.0.0.1"}, {"169.254.0.0/16", "169.254.169.254"},
		{"128.0.0.0/1,0.0.0.0/1", "127.0.0.1"}, {"0.0.0.0/5", "0.1.2.3"}, {"fe80::/9", "fe80::1"},
		{"node-1, gluster.example.com.,10.0.0.0/8", "10.9.8.7"}, {"Node-1,192.0.2.1", "192.0.2.1"},
		{"10.0.0.1/8", "10.2.3.4"}, {"2001:db8::/32,fe80::1", "fe80::1"}, {"::ffff:0:0/96", "::ffff:1.2.3.4"},
		{"::ffff:127.0.0.1", "127.0.0.1"}, {"fe80::1%eth0", "fe80::1"}, {"host:24007", "1.2.3.4"},
		{"127.1", "127.0.0.1"}, {"-x", "1.2.3.4"}, {"a;b", "1.2.3.4"}, {"10.0.0.0/33", "10.0.0.1"},
		{"255.255.255.255", "255.255.255.255"}, {"224.0.0.0/3", "224.0.0.1"}, {"\xff", "1.2.3.4"},
		{"::/0", "::2%0"}, {"2001:db8::/32", "2001:db8::1%eth0"},
	} {
		f.Add(tc[0], tc[1])
	}
	f.Fuzz(func(t *testing.T, entries, addr string) {
		list := strings.Split(entries, ",")
		p, err := ParseAllowedServers(list)
		if err != nil {
			named := false
			for _, e := range list {
				named = named || strings.Contains(err.Error(), fmt.Sprintf("allowed server %q", strings.TrimSpace(e)))
			}
			if !named {
				t.Fatalf("ParseAllowedServers(%q): %v names no entry", list, err)
			}
			return
		}
		for _, again := range [][]string{strings.Split(p.String(), ", "), strings.Split(strings.ReplaceAll(p.String(), ", ", ","), ",")} {
			p2, err := ParseAllowedServers(again)
			if err != nil || !reflect.DeepEqual(p, p2) {
				t.Fatalf("ParseAllowedServers(%q) = %s; its entries %q parse to %s, %v", list, p, again, p2, err)
			}
		}
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return
		}
		aerr := p.CheckAddr(a)
		if unmapped := a.Unmap().WithZone(""); (aerr == nil) != (p.CheckAddr(unmapped) == nil) {
			t.Fatalf("policy %s: CheckAddr(%s) = %v, but CheckAddr(%s) = %v", p, a, aerr, unmapped, p.CheckAddr(unmapped))
		}
		if aerr != nil {
			return
		}
		u := a.Unmap().WithZone("") // a zone names a link, not another address
		var holder netip.Prefix
		for _, pfx := range p.prefixes {
			if pfx.Contains(u) && (!fstest.IsSpecial(u) || fstest.IsSpecial(pfx.Addr()) && fstest.IsSpecial(lastAddr(pfx))) {
				holder = pfx
			}
		}
		if !holder.IsValid() && (fstest.IsSpecial(u) || !p.Empty()) {
			t.Fatalf("policy %s allows %s: no entry holds it (special: %v)", p, a, fstest.IsSpecial(u))
		}
	})
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
