#!/usr/bin/env bash
# check-clean.sh [SYSCTL_SNAPSHOT]: assert that no test bed is left on this
# machine: no bed process, no mount under $BED_DIR, no loop device backed by a
# file under it, no CNI bridge nor iptables rule naming it, no kubepods cgroup
# nor scope cgroup of the mounts,
# and (given a snapshot made with `sysctl-snapshot.sh` before up.sh) the sysctls
# as they were. Exit status 1 lists what is left.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

problems=()
pids=$(bed_pids own)
[[ -z $pids ]] || problems+=("processes: $(echo "$pids" | while read -r p; do printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done)")
mounts=$(bed_mounts)
[[ -z $mounts ]] || problems+=("mounts: $(echo "$mounts" | tr '\n' ' ')")
loops=$(bed_loops)
[[ -z $loops ]] || problems+=("loop devices: $(echo "$loops" | tr '\n' ' ')")
for br in "$BED_BRIDGE" "$BED_NODE_BRIDGE"; do
	! ip link show "$br" >/dev/null 2>&1 || problems+=("bridge $br")
done
rules=$(for t in nat filter mangle; do iptables -t "$t" -S 2>/dev/null; done | grep -E -- "$BED_BRIDGE|$BED_CNI_NETWORK" || true)
[[ -z $rules ]] || problems+=("iptables rules: $rules")
for cg in $(kubepods_cgroups); do
	if [[ -e $cg ]]; then problems+=("cgroup $cg"); fi
done
for cg in $(node_cgroups); do problems+=("node cgroup $cg"); done
for cg in $(scope_cgroups); do
	if [[ -e $cg ]]; then problems+=("scope cgroup $cg (processes: $(scope_pids | tr '\n' ' '))"); fi
done
if [[ -d $BED_DIR ]]; then
	left=$(find "$BED_DIR" -mindepth 1 -maxdepth 1 ! -name logs)
	[[ -z $left ]] || problems+=("files in $BED_DIR: $(echo "$left" | tr '\n' ' ')")
fi
if [[ -n ${1:-} ]]; then
	while IFS='=' read -r key value; do
		now=$(sysctl -n "$key")
		[[ $now == "$value" ]] || problems+=("sysctl $key is $now, was $value")
	done <"$1"
	if [[ -f $1.paths ]]; then
		while IFS= read -r p; do
			[[ -e $p ]] && problems+=("host path $p created by the bed")
		done <"$1.paths"
	fi
fi

if ((${#problems[@]} > 0)); then
	for p in "${problems[@]}"; do log "LEFT BEHIND: $p"; done
	exit 1
fi
log "clean: no bed processes, mounts, loop devices, bridge, iptables rules or cgroups; sysctls restored"
