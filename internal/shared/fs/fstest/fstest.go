// Package fstest helps the tests of the file system packages (fs, each
// file system's below it, and the Flexvolume driver that uses them):
// resolvers of host names for tests (one from a map, one whose answers mix
// ordinary and special addresses), and the test of a special address,
// written apart from the table package fs checks against. Only tests link
// it.
package fstest

import (
	"context"
	"errors"
	"hash/fnv"
	"net/netip"
	"strings"
)

// HashResolver resolves every name, to addresses picked by its hash among
// ordinary and special ones (mapped and IPv6 forms too); one name in 17
// does not resolve. The same name always gets the same answer.
type HashResolver struct{}

var resolvable = []string{
	"192.0.2.10", "198.51.100.7", "10.1.2.3", "127.0.0.1", "127.3.4.5", "::ffff:127.0.0.1", "169.254.169.254",
	"::ffff:169.254.169.254", "0.0.0.0", "0.1.2.3", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1",
	"ff02::1", "2001:db8::1", "::ffff:192.0.2.99",
}

// LookupNetIP returns the addresses of host.
func (HashResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(host)))
	sum := h.Sum64()
	if sum%17 == 0 {
		return nil, errors.New("no such host")
	}
	var out []netip.Addr
	for n := 1 + sum%3; n > 0; n-- {
		out = append(out, netip.MustParseAddr(resolvable[sum%uint64(len(resolvable))]))
		sum /= uint64(len(resolvable))
	}
	return out, nil
}

// IsSpecial reports, by netip's own predicates rather than package fs's
// table, whether a is an address no volume may name unless an
// administrator lists it: loopback, unspecified ("this network" too),
// link-local, multicast or broadcast.
func IsSpecial(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() ||
		(a.Is4() && (a.As4()[0] == 0 || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})))
}

// MapResolver answers from a map of host names to addresses; a missing
// name is an error.
type MapResolver map[string][]string

// LookupNetIP returns the addresses of host.
func (f MapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
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
