#!/usr/bin/env bash
# build-sidecars.sh: build the Kubernetes CSI sidecars the end-to-end tests
# run next to the CSI driver (today csi-provisioner, the external-provisioner)
# from their Go modules at the pinned versions, into a cache outside the
# clone:
#   $KUBE_CACHE_DIR/sidecars/<module version>-<go version>/<command>
# A second run with the same key does nothing. Prints the directory on stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

# The one place the sidecars' versions are pinned.
provisioner_module=github.com/kubernetes-csi/external-provisioner/v6
provisioner_version=v6.4.0

gov=$(go env GOVERSION)
dir="$KUBE_CACHE_DIR/sidecars/external-provisioner-$provisioner_version-$gov"
# One build at a time: e2e.sh starts one in the background when the suite
# starts, and the test that needs the binary runs this again, which waits
# here for that build and then finds the binary cached.
mkdir -p "$KUBE_CACHE_DIR/sidecars"
exec 9>"$KUBE_CACHE_DIR/sidecars/.lock"
if ! flock -n 9; then
	log "another build-sidecars.sh is building; waiting for it"
	flock 9
fi
if [[ -x $dir/csi-provisioner ]]; then
	log "csi-provisioner $provisioner_version cached in $dir"
	echo "$dir"
	exit 0
fi

log "building csi-provisioner $provisioner_version into $dir (cold: ~4 min on 2 cores)"
start=$(date +%s)
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/src"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
# Its go.mod has replace directives, so `go install module@version` refuses
# it: build it as the main module, from the module cache's verified copy.
src=$(GOFLAGS=-mod=mod go mod download -json "$provisioner_module@$provisioner_version" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[[ -d $src ]] || die "cannot download $provisioner_module@$provisioner_version"
cp -r "$src/." "$tmp/src/"
chmod -R u+w "$tmp/src"
(
	cd "$tmp/src"
	GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off \
		go build -trimpath -ldflags "-s -w -X main.version=$provisioner_version" -o "$tmp/csi-provisioner" ./cmd/csi-provisioner
)
[[ -x $tmp/csi-provisioner ]] || die "the build of csi-provisioner produced nothing"
mkdir -p "$dir"
mv "$tmp/csi-provisioner" "$dir/"
log "built csi-provisioner $provisioner_version in $(($(date +%s) - start)) s"
echo "$dir"
