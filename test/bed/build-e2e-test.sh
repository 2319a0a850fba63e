#!/usr/bin/env bash
# build-e2e-test.sh: build Kubernetes' own end-to-end suite with its External
# Storage part only (e2e.test, from test/cluster/e2e-storage: the TestMain and
# RunE2ETests of k8s.io/kubernetes/test/e2e at the version pinned in
# test/cluster/go.mod, with test/e2e/storage/external's specs) and the agnhost
# test binary its storage tests run in pods, into a cache outside the clone:
#   $KUBE_CACHE_DIR/<version>-<go version>/e2e-storage/{e2e.test,agnhost/agnhost}
# (agnhost/ is the build context of test/images/e2e-agnhost).
# A second run with the same key does nothing. Prints the directory on stdout.
# test/conformance runs the External Storage part of e2e.test against the CSI
# drivers (test/README.md, "Conformance").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

cluster_dir="$REPO_ROOT/test/cluster"
version=$(kube_version)
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "bad kubernetes version '$version' in $cluster_dir/go.mod"
minor=${BASH_REMATCH[1]}
dir="$(dirname "$(kube_bin_dir)")/e2e-storage"

# One build at a time (a build takes minutes of CPU); a second caller waits
# and then finds the binaries cached.
mkdir -p "$(dirname "$dir")"
exec 9>"$(dirname "$dir")/.e2e.lock"
if ! flock -n 9; then
	log "another build-e2e-test.sh is building; waiting for it"
	flock 9
fi
if [[ -x $dir/e2e.test && -x $dir/agnhost/agnhost ]]; then
	log "e2e.test and agnhost $version cached in $dir"
	echo "$dir"
	exit 0
fi

log "building e2e.test and agnhost $version into $dir (cold: ~4-8 min on 2 cores)"
start=$(date +%s)
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/agnhost"
trap 'rm -rf "$tmp"' EXIT

ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
(
	cd "$cluster_dir"
	# -mod=mod as in build-kube.sh: go.sum is committed, so this only verifies.
	export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off
	go test -c -trimpath -ldflags "$ldflags" -o "$tmp/e2e.test" ./e2e-storage
	go build -trimpath -ldflags "$ldflags" -o "$tmp/agnhost/agnhost" k8s.io/kubernetes/test/images/agnhost
)
[[ -x $tmp/e2e.test && -x $tmp/agnhost/agnhost ]] || die "the build did not produce e2e.test and agnhost"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "built e2e.test and agnhost $version in $(($(date +%s) - start)) s"
echo "$dir"
