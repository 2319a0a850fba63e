#!/usr/bin/env bash
# tool.sh NAME: build the tool NAME from its Go module at the version pinned
# here, once, into a cache outside the clone, and print the binary's path:
#   ${MC_TOOLS_CACHE:-$HOME/.cache/mountcontainers/tools}/NAME-<version>-<go version>/NAME
# A second run with the same key prints the cached path at once. No root
# needed.
#   helm   the unit tests (deploy/charts_test.go), `make chart`, the suite's
#          helm install and the quickstart's
#   crane  the quickstart's registry stand-in (`crane registry serve`)
set -euo pipefail

name=${1:?usage: tool.sh helm|crane}
case $name in
helm)
	module=helm.sh/helm/v3 pkg=helm.sh/helm/v3/cmd/helm version=v3.22.0
	ldflags="-s -w -X $module/internal/version.version=$version"
	;;
crane)
	module=github.com/google/go-containerregistry pkg=$module/cmd/crane version=v0.22.1
	ldflags="-s -w -X $module/cmd/crane/cmd.Version=$version"
	;;
*)
	echo "tool.sh: no tool $name (helm or crane)" >&2
	exit 2
	;;
esac
gov=$(go env GOVERSION)
cache=${MC_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mountcontainers/tools}
dir=$cache/$name-$version-$gov

mkdir -p "$cache"
# One build at a time: the unit tests and the suite may ask together.
exec 9>"$cache/.$name.lock"
flock 9
if [[ -x $dir/$name ]]; then
	echo "$dir/$name"
	exit 0
fi
echo "tool.sh: building $name $version with $gov into $dir" >&2
start=$(date +%s)
tmp=$dir.tmp.$$
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
# go install module@version builds with the tool's own go.mod and go.sum,
# checked against the checksum database; outside any module of ours.
(cd "$cache" && GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN=$tmp \
	go install -trimpath -ldflags "$ldflags" "$pkg@$version")
[[ -x $tmp/$name ]] || { echo "tool.sh: the build of $name $version produced nothing" >&2; exit 1; }
"$tmp/$name" version >/dev/null
rm -rf "$dir"
mv "$tmp" "$dir"
echo "tool.sh: built $name $version in $(($(date +%s) - start)) s" >&2
echo "$dir/$name"
