#!/usr/bin/env bash
# setup.sh: install, as root, the Debian packages the test bed needs (only the
# missing ones; `apt-get update` once first). Never installs GlusterFS on the host.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

[[ $EUID -eq 0 ]] || die "setup.sh must run as root"
packages=(containerd runc containernetworking-plugins etcd-server buildah debootstrap openssl
	iptables iproute2 kmod util-linux mount e2fsprogs curl ca-certificates gzip tar jq systemd-container)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
	log "all test-bed packages installed"
	exit 0
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
# Debian's packages may start their daemons where an init system exists; the bed
# runs private instances and needs none of them.
command -v go >/dev/null || die "the Go toolchain is required (go not in PATH)"
log "installed ${missing[*]}"
