#!/usr/bin/env bash
# build-sidecars.sh: build the Kubernetes CSI sidecars the end-to-end tests
# run next to the CSI driver (today csi-provisioner, the external-provisioner)
# from their Go modules at the versions test/cluster/go.mod pins, into a
# cache outside the clone:
#   $KUBE_CACHE_DIR/sidecars/<name>-<version>-kube<kubernetes version>-<go version>/<command>
# A second run with the same key does nothing. Prints the directory on stdout.
#
# Built in test/cluster's module with build-kube.sh's flags, against the
# libraries of the bed's Kubernetes (gen-go-mod.sh pins them): right after
# build-kube.sh, Go's build cache holds nearly every package, and a cold
# build takes seconds, not the four minutes of the provisioner's own module.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

cluster_dir="$REPO_ROOT/test/cluster"
provisioner_module=github.com/kubernetes-csi/external-provisioner/v6
provisioner_version=$(awk -v m="$provisioner_module" '$1 == "require" && $2 == m {print $3}' "$cluster_dir/go.mod")
[[ -n $provisioner_version ]] || die "no require $provisioner_module in $cluster_dir/go.mod (gen-go-mod.sh writes it)"
kube=$(kube_version)

gov=$(go env GOVERSION)
dir="$KUBE_CACHE_DIR/sidecars/external-provisioner-$provisioner_version-kube$kube-$gov"
# One build at a time: e2e.sh builds them after Kubernetes, and a test that
# needs a binary runs this again (a narrowed run may not have), which waits
# here for a build in progress and then finds the binary cached.
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

log "building csi-provisioner $provisioner_version against kubernetes $kube into $dir"
start=$(date +%s)
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
(
	cd "$cluster_dir"
	GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off \
		go build -trimpath -ldflags "-s -w -X main.version=$provisioner_version" -o "$tmp/csi-provisioner" "$provisioner_module/cmd/csi-provisioner"
)
[[ -x $tmp/csi-provisioner ]] || die "the build of csi-provisioner produced nothing"
mkdir -p "$dir"
mv "$tmp/csi-provisioner" "$dir/"
log "built csi-provisioner $provisioner_version in $(($(date +%s) - start)) s"
echo "$dir"
