#!/usr/bin/env bash
# build-kube.sh: build kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet and kubectl from the k8s.io/kubernetes version pinned in
# test/cluster/go.mod, into a cache outside the clone:
#   $KUBE_CACHE_DIR/<version>-<go version>/bin
# A second run with the same key does nothing. Prints the bin directory on stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

cluster_dir="$REPO_ROOT/test/cluster"
version=$(kube_version)
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "bad kubernetes version '$version' in $cluster_dir/go.mod"
minor=${BASH_REMATCH[1]}
bin_dir=$(kube_bin_dir)
cmds=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

have_all() {
	local c
	for c in "${cmds[@]}"; do [[ -x $bin_dir/$c ]] || return 1; done
}

if have_all; then
	log "kubernetes $version binaries cached in $bin_dir"
	echo "$bin_dir"
	exit 0
fi

log "building kubernetes $version into $bin_dir (cold: ~5-10 min on 2 cores)"
start=$(date +%s)
tmp="$bin_dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

pkg=k8s.io/component-base/version
cgo=k8s.io/client-go/pkg/version
ldflags="-s -w"
for p in "$pkg" "$cgo"; do
	ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
targets=()
for c in "${cmds[@]}"; do targets+=("k8s.io/kubernetes/cmd/$c"); done

(
	cd "$cluster_dir"
	# -mod=mod: the module has no packages of its own, so `go mod tidy` cannot
	# write go.sum; `go build` does. go.sum is committed, so this only verifies.
	GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off \
		go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${targets[@]}"
)
have_all_tmp=1
for c in "${cmds[@]}"; do [[ -x $tmp/$c ]] || have_all_tmp=0; done
((have_all_tmp)) || die "kubernetes build did not produce all of ${cmds[*]}"
mkdir -p "$(dirname "$bin_dir")"
rm -rf "$bin_dir"
mv "$tmp" "$bin_dir"
trap - EXIT
log "built kubernetes $version in $(($(date +%s) - start)) s"
echo "$bin_dir"
