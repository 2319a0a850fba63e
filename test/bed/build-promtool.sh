#!/usr/bin/env bash
# build-promtool.sh: build the Prometheus project's promtool, at the version
# pinned below, into a cache outside the clone:
#   $CACHE_DIR/promtool/<version>-<go version>/promtool
# TestMetrics runs `promtool check metrics` on the mount pod's scraped text.
# A cold `go run .../promtool@<version>` downloads and compiles the
# Prometheus module's dependencies (docs/metrics.md has the time measured),
# too long to pay at every run. A second run with the same key does nothing.
# Prints the executable's path on stdout.
#
# -tags remove_all_sd leaves out the service-discovery plugins (promtool's
# check commands do not need them): their cloud SDKs are most of the build,
# and some of their module versions are not on every module proxy.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

PROMTOOL_VERSION=v0.316.0
dir="$CACHE_DIR/promtool/$PROMTOOL_VERSION-$(go env GOVERSION)"
bin="$dir/promtool"

if [[ -x $bin ]]; then
	log "promtool $PROMTOOL_VERSION cached in $dir"
	echo "$bin"
	exit 0
fi

log "building promtool $PROMTOOL_VERSION into $dir"
start=$(date +%s)
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# Outside any module: GOFLAGS and GOWORK of the caller must not apply. The
# build flags are `go run`'s, so that a build cache warmed by
# `go run -tags remove_all_sd .../promtool@$PROMTOOL_VERSION` serves.
(cd "$tmp" && GOFLAGS= GOWORK=off GOBIN="$tmp" \
	go install -tags remove_all_sd "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION")
[[ -x $tmp/promtool ]] || die "promtool build produced no executable"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
log "built promtool $PROMTOOL_VERSION in $(($(date +%s) - start)) s"
echo "$bin"
