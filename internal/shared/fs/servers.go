package fs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// DefaultResolveTimeout bounds the lookup of one server name.
const DefaultResolveTimeout = 5 * time.Second

// Resolver looks up a host name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

// specialRanges are the addresses a client on the node (GlusterFS,
// ceph-fuse) must not be sent to unless an administrator lists them
// explicitly: the node itself (loopback, unspecified, "this network"),
// link-local addresses (among them the cloud metadata service
// 169.254.169.254) and multicast and broadcast addresses, which are
// nobody's server.
var specialRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (\"this host\") address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
}

// special returns the special range a is in, if any.
func special(a netip.Addr) (netip.Prefix, string, bool) {
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return r.prefix, r.what, true
		}
	}
	return netip.Prefix{}, "", false
}

// ServerPolicy is the administrator's allow-list of servers (GlusterFS
// servers, Ceph monitors; the Flexvolume driver's settings give it) as a
// driver applies it to the servers a volume names. Its zero value is the
// policy of an unset list. Build one with [ParseAllowedServers].
//
// The rule, for each server a volume names (GlusterFS's server, servers
// and backup-volfile-servers; Ceph's monitors):
//
//   - A host name listed in the allow-list is allowed as it is, whatever it
//     resolves to: the administrator vouches for the name.
//   - Any other host name is looked up on the node; it must resolve, and
//     every address it resolves to must be allowed by the rules below. The
//     mount then uses the first of those addresses instead of the name, so
//     that the GlusterFS client connects to the address that was checked
//     (a name whose DNS answer changes between the check and the client's
//     own lookup cannot redirect it).
//   - An address (IPv4-mapped IPv6 forms are taken as the IPv4 address
//     they map) that is loopback, unspecified, link-local, multicast or
//     broadcast is allowed only by an entry that lies within that special
//     range: "127.0.0.1" or "169.254.0.0/16" allow what they name, but
//     "0.0.0.0/0" does not allow 127.0.0.1.
//   - With an empty allow-list every other address is allowed. With a
//     non-empty one, an address must be in one of its addresses or CIDRs.
//
// The policy of [RefuseAllServers] allows no server at all.
type ServerPolicy struct {
	names    []string       // lower case, no trailing dot
	prefixes []netip.Prefix // addresses as /32 (IPv4) or /128 (IPv6)
	refusal  string         // when set, why every server is refused
}

// RefuseAllServers returns the policy that allows no server; every
// refusal gives reason, which should say what an administrator can do.
func RefuseAllServers(reason string) ServerPolicy {
	return ServerPolicy{refusal: reason}
}

// ParseAllowedServers parses the allow-list entries: host names, IPv4 or
// IPv6 addresses and CIDRs (such as 10.0.0.0/8). Empty entries are
// skipped. An entry in IPv4-mapped IPv6 form is an error: write it as the
// IPv4 address or CIDR it means.
func ParseAllowedServers(entries []string) (ServerPolicy, error) {
	var p ServerPolicy
	var errs []error
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if err := p.add(e); err != nil {
			errs = append(errs, fmt.Errorf("allowed server %q: %w", e, err))
		}
	}
	return p, errors.Join(errs...)
}

func (p *ServerPolicy) add(e string) error {
	if strings.Contains(e, "/") {
		pfx, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("not a CIDR such as 10.0.0.0/8: %w", err)
		}
		if pfx.Addr().Is4In6() {
			return errors.New("an IPv4-mapped IPv6 CIDR: write the IPv4 CIDR it means")
		}
		p.prefixes = append(p.prefixes, pfx.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(e); err == nil {
		switch {
		case a.Zone() != "":
			return errors.New("an address with a zone")
		case a.Is4In6():
			return errors.New("an IPv4-mapped IPv6 address: write the IPv4 address it means")
		}
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	if strings.Contains(e, ":") {
		return errors.New("not a host name, address or CIDR")
	}
	if err := CheckHostName(e); err != nil {
		return err
	}
	p.names = append(p.names, canonicalName(e))
	return nil
}

// Empty reports whether the allow-list has no entry (and so allows every
// address that is not special). A policy that refuses every server is
// not empty.
func (p ServerPolicy) Empty() bool {
	return len(p.names) == 0 && len(p.prefixes) == 0 && p.refusal == ""
}

// String lists the entries, for messages; "none" for a policy that
// refuses every server.
func (p ServerPolicy) String() string {
	if p.refusal != "" {
		return "none"
	}
	out := slices.Clone(p.names)
	for _, pfx := range p.prefixes {
		if pfx.IsSingleIP() {
			out = append(out, pfx.Addr().String())
		} else {
			out = append(out, pfx.String())
		}
	}
	return strings.Join(out, ", ")
}

func canonicalName(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) }

// listsName reports whether the allow-list names the host name h.
func (p ServerPolicy) listsName(h string) bool {
	return slices.Contains(p.names, canonicalName(h))
}

// CheckAddr reports why the policy does not allow a (nil if it does).
func (p ServerPolicy) CheckAddr(a netip.Addr) error {
	a = a.Unmap().WithZone("")
	if p.refusal != "" {
		return fmt.Errorf("address %s is refused: %s", a, p.refusal)
	}
	if r, what, ok := special(a); ok {
		for _, pfx := range p.prefixes {
			if pfx.Contains(a) && r.Contains(pfx.Addr()) && pfx.Bits() >= r.Bits() {
				return nil
			}
		}
		return fmt.Errorf("address %s is %s: refused unless the driver's allowed servers list it explicitly", a, what)
	}
	if p.Empty() {
		return nil
	}
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return nil
		}
	}
	return fmt.Errorf("address %s is not in the driver's allowed servers (%s)", a, p)
}

// Check returns the address to connect to for the server host (a host name
// or an IPv4 address, as [CheckHost] accepts them), or why the policy
// does not allow it. A listed name is returned as it is; another name is
// resolved with r and replaced by its first address.
func (p ServerPolicy) Check(ctx context.Context, r Resolver, host string) (string, error) {
	if p.refusal != "" {
		return "", fmt.Errorf("%s is refused: %s", host, p.refusal)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.CheckAddr(a); err != nil {
			return "", err
		}
		return a.Unmap().String(), nil
	}
	if p.listsName(host) {
		return host, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultResolveTimeout)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return "", fmt.Errorf("%s: cannot be resolved on the node (%v); an administrator may list the name in the driver's allowed servers", host, err)
	}
	var first netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if err := p.CheckAddr(a); err != nil {
			return "", fmt.Errorf("%s resolves to an address that is not allowed: %w", host, err)
		}
		if !first.IsValid() && a.Is4() {
			first = a
		}
	}
	if !first.IsValid() {
		return "", fmt.Errorf("%s resolves to no IPv4 address (%v); an administrator may list the name in the driver's allowed servers", host, addrs)
	}
	return first.String(), nil
}

var (
	labelRE = Pattern(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	// numericLabelRE matches what inet_aton(3) may take as a number.
	numericLabelRE = Pattern(`^([0-9]+|0[xX][0-9a-fA-F]*)$`)
)

// CheckHost accepts a host name (see [CheckHostName]) or an IPv4 address
// in dotted-quad form, as a volume names its servers. Anything with a
// ':' is refused: the glusterfs mount source is "host:/volume", backup
// servers are ':'-separated and a Ceph monitor's port follows a ':', so a
// ':' would change what the client parses, and an IPv4-mapped IPv6
// address (::ffff:127.0.0.1) would slip past checks made on IPv4
// addresses.
func CheckHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty server name")
	}
	if strings.ContainsAny(h, ":[]") {
		if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && a.Is4In6() {
			return fmt.Errorf("%q: IPv4-mapped IPv6 addresses are not supported; write the IPv4 address", h)
		} else if err == nil {
			return fmt.Errorf("%q: IPv6 addresses are not supported; use a host name or an IPv4 address", h)
		}
		return fmt.Errorf("%q: ':' is not allowed in a server name (no port, no IPv6 literal)", h)
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
		return nil
	}
	return CheckHostName(h)
}

// CheckHostName accepts a host name of RFC 1123 labels whose last label is
// not numeric: "127.1", "2130706433" and "0x7f.1" are not dotted-quad
// addresses, but the C library's resolver reads them as 127.0.0.1.
func CheckHostName(h string) error {
	if len(h) > 253 {
		return fmt.Errorf("%q: host name longer than 253 characters", h)
	}
	labels := strings.Split(strings.TrimSuffix(h, "."), ".")
	for _, l := range labels {
		if !labelRE().MatchString(l) {
			return fmt.Errorf("%q is not a host name or IPv4 address", h)
		}
	}
	if last := labels[len(labels)-1]; numericLabelRE().MatchString(last) {
		return fmt.Errorf("%q: a host name's last label cannot be numeric (an IPv4 address is written as four decimal numbers)", h)
	}
	return nil
}

// CheckRecordedServer checks host, a server a mount record names, as a
// volume's server is checked ([CheckHost], then [ServerPolicy.Check]),
// with one difference: the mount is made again with the name the record
// holds, so a host name must be one the allow-list names. A driver
// records a name only then (it replaces any other by the address it
// checked); an unlisted name would be looked up anew by the client, not
// by a check. So nothing is looked up. The mount pod's recovery asks
// before it makes a dead mount again (package known's
// CheckRecordedMount).
func (p ServerPolicy) CheckRecordedServer(ctx context.Context, host string) error {
	if err := CheckHost(host); err != nil {
		return err
	}
	if _, err := netip.ParseAddr(host); err != nil && p.refusal == "" && !p.listsName(host) {
		listed := ""
		if !p.Empty() {
			listed = " (" + p.String() + ")"
		}
		return fmt.Errorf("%s is a host name the driver's allowed servers do not list%s: it would be mounted again by that name, which the driver keeps only for a listed name", host, listed)
	}
	// An address, or a listed name: Check looks nothing up.
	_, err := p.Check(ctx, nil, host)
	return err
}
