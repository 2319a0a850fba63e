#!/usr/bin/env bash
# sysctl-snapshot.sh FILE: record the sysctls the bed changes (FILE) and which
# host paths it may create are absent (FILE.paths), for check-clean.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

out=${1:?usage: sysctl-snapshot.sh FILE}
for k in "${BED_SYSCTLS[@]}"; do echo "$k=$(sysctl -n "$k")"; done >"$out"
for p in "${BED_HOST_PATHS[@]}"; do [[ -e $p ]] || echo "$p"; done >"$out.paths"
