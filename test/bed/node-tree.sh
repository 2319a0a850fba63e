#!/usr/bin/env bash
# node-tree.sh: build, as root, the root file system of the systemd-flavored
# bed's node (BED_FLAVOR=systemd, up.sh) and print its path. A Debian
# bookworm tree with systemd as init, D-Bus, containerd, runc and the CNI
# plugins: what a node's operating system holds. No storage client (no
# GlusterFS, no Ceph): the mount pod brings them.
#
# Cached by its inputs (the package list, the suite and the mirror) under
# $CACHE_DIR/node-tree/<key>; up.sh copies it for every bed, so a bed never
# changes the cache. Older trees are removed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

[[ $EUID -eq 0 ]] || die "node-tree.sh must run as root"
SUITE=bookworm
packages=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,iproute2,kmod,util-linux,mount,procps
mirror=$(apt_mirror) || die "no apt source for suite $SUITE in /etc/apt/sources.list{,.d/*}"
key=$(printf 'node-tree-v1 %s %s %s\n' "$mirror" "$SUITE" "$packages" | sha256sum | cut -c1-16)
cache=$CACHE_DIR/node-tree
tree=$cache/$key
if [[ -f $tree/.complete ]]; then
	echo "$tree/root"
	exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT
log "debootstrap $SUITE from $mirror with $packages (the systemd node's tree)"
start=$(date +%s)
debootstrap --variant=minbase --include="$packages" "$SUITE" "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
	{ tail -20 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
# No login prompt on the console (the bed reads the console as a log) and
# no periodic apt or dpkg jobs on a node that lives for one test run.
for unit in console-getty.service getty@.service apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer; do
	ln -sf /dev/null "$tmp/root/etc/systemd/system/$unit"
done
rm -rf "$tmp/root/var/cache/apt/archives/"*.deb
mv "$tmp/debootstrap.log" "$tmp/root/var/log/bed-debootstrap.log"
for old in "$cache"/*/; do
	[[ ${old%/} == "$tree" ]] || rm -rf --one-file-system "${old%/}"
done
rm -rf --one-file-system "$tree"
mv "$tmp" "$tree"
trap - EXIT
touch "$tree/.complete"
log "node tree built in $(($(date +%s) - start))s: $tree/root"
echo "$tree/root"
