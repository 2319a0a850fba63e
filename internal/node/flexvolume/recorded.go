package flexvolume

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"unicode"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// Mount options of a record that name servers, besides
// backup-volfile-servers: mount.glusterfs's older single backup server,
// and the Ceph monitors of a ceph-fuse mount ([CephFS]).
const (
	backupServerOption = "backupvolfile-server"
	cephMonHostOption  = "ceph.mon_host"
)

// CheckRecordedMount reports why p does not allow a server that rec, the
// record of a mount made through the mount pod, connects to (nil when it
// allows them all). The mount pod asks before it makes a dead mount again
// (package recovery), so that a server the administrator removed from the
// allow-list since the mount was made is not connected to again; a later
// call, once the server is allowed again, passes.
//
// The servers are, for GlusterFS, the hosts of the source (host:/volume,
// or host1,host2:/volume) and of backup-volfile-servers and
// backupvolfile-server; for ceph-fuse (type fuse.ceph, as [CephFS] mounts
// it), the monitors of ceph.mon_host, which such a record must have.
// Records of other types name no server this package knows how to read,
// and pass.
//
// Each server is checked by [ServerPolicy.Check], with one difference: the
// mount is made again with the name the record holds, so a host name must
// be one the allow-list names. The driver records a name only then (it
// replaces any other by the address it checked); an unlisted name would be
// looked up anew by the client, not by a check. So nothing is looked up.
func (p ServerPolicy) CheckRecordedMount(ctx context.Context, rec mountrecord.Record) error {
	switch rec.FSType {
	case FSType:
		hosts, _, ok := strings.Cut(rec.Source, ":")
		if !ok {
			return fmt.Errorf("source %q: want server:/volume", rec.Source)
		}
		for _, h := range strings.Split(hosts, ",") {
			if err := p.checkRecordedServer(ctx, h); err != nil {
				return fmt.Errorf("server %s of the source %s: %w", h, rec.Source, err)
			}
		}
		for _, o := range rec.Options {
			name, v, _ := strings.Cut(o, "=")
			if name != backupServersOption && name != backupServerOption {
				continue
			}
			for _, h := range strings.Split(v, ":") {
				if err := p.checkRecordedServer(ctx, h); err != nil {
					return fmt.Errorf("server %s of %s: %w", h, name, err)
				}
			}
		}
	case cephFuseType:
		monitors := 0
		for _, o := range rec.Options {
			v, ok := strings.CutPrefix(o, cephMonHostOption+"=")
			if !ok {
				continue
			}
			// The driver writes ADDRESS:PORT;...; Ceph also splits on
			// commas and spaces.
			for _, m := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' || unicode.IsSpace(r) }) {
				h, _, _ := strings.Cut(m, ":")
				if err := p.checkRecordedServer(ctx, h); err != nil {
					return fmt.Errorf("monitor %s of %s: %w", h, cephMonHostOption, err)
				}
				monitors++
			}
		}
		if monitors == 0 {
			return fmt.Errorf("no monitors in %s: they cannot be checked", cephMonHostOption)
		}
	}
	return nil
}

// checkRecordedServer checks host as a volume's server is checked
// ([checkHost], then [ServerPolicy.Check]), and refuses a host name the
// allow-list does not name (see [ServerPolicy.CheckRecordedMount]).
func (p ServerPolicy) checkRecordedServer(ctx context.Context, host string) error {
	if err := checkHost(host); err != nil {
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
