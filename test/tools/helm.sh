#!/usr/bin/env bash
# helm.sh: build helm from its Go module at the version pinned here, once,
# into a cache outside the clone, and print the binary's path:
#   ${MC_TOOLS_CACHE:-$HOME/.cache/mountcontainers/tools}/helm-<version>-<go version>/helm
# A second run with the same key prints the cached path at once. The unit
# tests (deploy/charts_test.go), `make chart` and the end-to-end suite's
# `helm install` use it. No root needed.
set -euo pipefail

version=v3.22.0
module=helm.sh/helm/v3
gov=$(go env GOVERSION)
cache=${MC_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mountcontainers/tools}
dir=$cache/helm-$version-$gov

mkdir -p "$cache"
# One build at a time: the unit tests and the suite may ask together.
exec 9>"$cache/.helm.lock"
flock 9
if [[ -x $dir/helm ]]; then
	echo "$dir/helm"
	exit 0
fi
echo "helm.sh: building helm $version with $gov into $dir" >&2
start=$(date +%s)
tmp=$dir.tmp.$$
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
# go install module@version builds with helm's own go.mod and go.sum,
# checked against the checksum database; outside any module of ours.
(cd "$cache" && GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN=$tmp \
	go install -trimpath -ldflags "-s -w -X $module/internal/version.version=$version" "$module/cmd/helm@$version")
[[ -x $tmp/helm ]] || { echo "helm.sh: the build of helm $version produced nothing" >&2; exit 1; }
"$tmp/helm" version --short >/dev/null
rm -rf "$dir"
mv "$tmp" "$dir"
echo "helm.sh: built helm $version in $(($(date +%s) - start)) s" >&2
echo "$dir/helm"
