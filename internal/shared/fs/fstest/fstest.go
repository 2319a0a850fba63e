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

// Names resolves the servers the tests' volumes name: public ones, and
// ones that are loopback, link-local, mapped or mixed.
var Names = MapResolver{
	"public.example":   {"192.0.2.10", "192.0.2.11"},
	"local.example":    {"127.0.1.1"},
	"metadata.example": {"169.254.169.254"},
	"mapped.example":   {"::ffff:127.0.0.1"},
	"mixed.example":    {"192.0.2.10", "127.0.0.1"},
	"v6only.example":   {"2001:db8::1"},
	"node-1":           {"127.0.1.1"},
}

// CephKey is the tests' cephx key, and CephKeyOption the same as the
// kubelet hands it to a driver (kubernetes.io/secret/key: base64 of the
// Secret's value, which ends in a newline).
const (
	CephKey       = "AQBh9xlmAAAAABAAx8Yd1u8TZ6lIbI6bQ1lCmA=="
	CephKeyOption = "QVFCaDl4bG1BQUFBQUJBQXg4WWQxdThUWjZsSWJJNmJRMWxDbUE9PQo="
)

// CephAllowed is the allow-list that admits the monitors of CephOptions.
var CephAllowed = []string{"mon-b.example", "10.0.0.0/8"}

// CephOptions returns a CephFS volume's options as the kubelet hands them
// to a driver (two monitors, a user, a file system and path, the key, the
// pod), with the JSON members extra added.
func CephOptions(extra string) string {
	o := `{"monitors":"10.0.0.7:6789,mon-b.example","user":"web","fs":"cephfs","path":"/volumes/web",` +
		`"kubernetes.io/secret/key":"` + CephKeyOption + `","kubernetes.io/pod.namespace":"default","kubernetes.io/pod.name":"web","kubernetes.io/pod.uid":"0f1e"`
	if extra != "" {
		o += "," + extra
	}
	return o + "}"
}

// Must returns v, and panics with err when there is one: for the tests'
// fixed data, as regexp.MustCompile.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

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
