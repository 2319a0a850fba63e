#!/usr/bin/env bash
# down.sh: tear the test bed down and leave nothing behind: every process of the
# bed (components, containerd shims, containers and what they started), every
# mount under $BED_DIR (deepest first, lazily, so dead FUSE mounts go too), loop
# devices backed by files under $BED_DIR, the kubepods cgroups, the cgroup
# roots of the nodes after the first and the mounts' scopes, the CNI bridge,
# the nodes' bridge and
# any iptables rule naming it, the sysctls the kubelet changed, and the host paths
# the kubelet, containerd and CNI created. Then $BED_DIR is removed, except its
# logs/ (BED_KEEP_LOGS=0 removes those too). Idempotent: safe to run twice.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

[[ $EUID -eq 0 ]] || die "down.sh must run as root"
# One teardown at a time (the suite and e2e.sh may both run one on a signal).
# The lock is on lib.sh itself, so that no lock file is left behind.
exec 9<"$here/lib.sh"
flock 9
STATE=$BED_DIR/state
errors=0

# any_alive PID...: whether any of the processes still exists.
any_alive() {
	local pid
	for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done
	return 1
}

# stop_pids PID...: SIGTERM, then SIGKILL after $grace seconds.
grace=10
stop_pids() {
	local pid alive
	(($# > 0)) || return 0
	kill -TERM "$@" 2>/dev/null
	for _ in $(seq 1 "$((grace * 5))"); do
		alive=()
		for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
		((${#alive[@]} > 0)) || return 0
		sleep 0.2
	done
	kill -KILL "${alive[@]}" 2>/dev/null
	sleep 0.5
}

# 1. The kubelet first, so that nothing restarts what follows; then the rest of
#    the components in reverse start order; then everything else of the bed.
component_pid() {
	local f=$STATE/pids/$1.pid pid
	[[ -f $f ]] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$BED_DIR"; then
		echo "$pid"
	fi
}
# component_names PREFIX: the components whose pid files start with PREFIX
# (kubelet, kubelet-2, ... on a bed of several nodes).
component_names() {
	local f
	for f in "$STATE/pids/$1".pid "$STATE/pids/$1"-[0-9]*.pid; do
		[[ -f $f ]] && basename "$f" .pid
	done
	return 0
}
# A systemd node (BED_FLAVOR=systemd) powers off: nspawn takes SIGTERM as
# the node's shutdown, in which its systemd stops the kubelet, the pods,
# the mounts' scopes and containerd, and unmounts.
mapfile -t pids < <(component_pid node)
if ((${#pids[@]} > 0)); then
	log "powering the systemd node off"
	grace=90 stop_pids "${pids[@]}"
fi
mapfile -t pids < <(for c in $(component_names kubelet); do component_pid "$c"; done)
stop_pids "${pids[@]}"
# The API server shuts down slowly once etcd is gone: stop it before etcd.
mapfile -t pids < <(for c in kube-scheduler kube-controller-manager kube-apiserver; do component_pid "$c"; done)
stop_pids "${pids[@]}"
mapfile -t pids < <(for c in etcd $(component_names containerd); do component_pid "$c"; done)
stop_pids "${pids[@]}"
# What is left (containers, shims, their daemons) is killed outright.
mode=own
[[ -s $STATE/absent-cgroups ]] && mode=kubepods
for round in 1 2 3; do
	mapfile -t pids < <(bed_pids "$mode")
	((${#pids[@]} > 0)) || break
	log "killing ${#pids[@]} bed processes (round $round)"
	kill -KILL "${pids[@]}" 2>/dev/null
	for _ in $(seq 1 20); do
		any_alive "${pids[@]}" || break
		sleep 0.1
	done
done
# FUSE daemons in the mounts' scopes outlive their mount pods by design:
# whatever is left there goes too.
for round in 1 2 3; do
	mapfile -t pids < <(scope_pids)
	((${#pids[@]} > 0)) || break
	log "killing ${#pids[@]} processes left in the mounts' scopes (round $round)"
	kill -KILL "${pids[@]}" 2>/dev/null
	for _ in $(seq 1 20); do
		any_alive "${pids[@]}" || break
		sleep 0.1
	done
done
mapfile -t pids < <(bed_pids "$mode"; scope_pids)
if ((${#pids[@]} > 0)); then
	log "ERROR: bed processes survived: ${pids[*]}"
	errors=$((errors + 1))
fi

# 2. Mounts under $BED_DIR (kubelet root, container rootfs, netns, shm, ...).
for round in 1 2 3 4 5; do
	mapfile -t mps < <(bed_mounts)
	((${#mps[@]} > 0)) || break
	for mp in "${mps[@]}"; do
		umount -l -- "$mp" 2>/dev/null || umount -f -l -- "$mp" 2>/dev/null || true
	done
done
mapfile -t mps < <(bed_mounts)
if ((${#mps[@]} > 0)); then
	log "ERROR: mounts under $BED_DIR survived: ${mps[*]}"
	errors=$((errors + 1))
fi

# 3. Loop devices backed by files under $BED_DIR.
for dev in $(bed_loops); do
	losetup -d "$dev" 2>/dev/null || log "WARNING: cannot detach $dev"
done

# 4. Cgroups the kubelet created (cgroupfs driver), deepest first.
if [[ -f $STATE/absent-cgroups ]]; then
	while IFS= read -r cg; do
		[[ -d $cg ]] || continue
		find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
		[[ -d $cg ]] && { log "ERROR: cannot remove cgroup $cg"; errors=$((errors + 1)); }
	done <"$STATE/absent-cgroups"
fi

# 4a. The cgroup roots of the nodes after the first, deepest first.
for cg in $(node_cgroups); do
	find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
	[[ -d $cg ]] && { log "ERROR: cannot remove node cgroup $cg"; errors=$((errors + 1)); }
done

# 4b. The mounts' scopes, deepest first.
for cg in $(scope_cgroups); do
	[[ -d $cg ]] || continue
	find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
	[[ -d $cg ]] && { log "ERROR: cannot remove scope cgroup $cg"; errors=$((errors + 1)); }
done

# 5. The CNI bridge and the nodes' one, and any iptables rule that names the
#    CNI bridge or network.
for br in "$BED_BRIDGE" "$BED_NODE_BRIDGE"; do
	if ip link show "$br" >/dev/null 2>&1; then
		ip link delete "$br" || { log "ERROR: cannot delete bridge $br"; errors=$((errors + 1)); }
	fi
done
for table in nat filter mangle; do
	iptables -t "$table" -S 2>/dev/null | grep -E -- "$BED_BRIDGE|$BED_CNI_NETWORK" | grep '^-A ' |
		while IFS= read -r rule; do
			# shellcheck disable=SC2086 # the rule is a word list as iptables -S printed it.
			eval "iptables -t $table -D ${rule#-A }" || log "WARNING: cannot delete iptables rule: $rule"
		done
done

# 6. Sysctls, as they were before up.sh.
if [[ -f $STATE/sysctl ]]; then
	while IFS='=' read -r key value; do
		[[ $(sysctl -n "$key" 2>/dev/null) == "$value" ]] && continue
		sysctl -q -w "$key=$value" || { log "ERROR: cannot restore $key=$value"; errors=$((errors + 1)); }
	done <"$STATE/sysctl"
fi

# 7. Host paths that did not exist before up.sh (listed deepest first).
if [[ -f $STATE/absent-paths ]]; then
	while IFS= read -r p; do
		[[ -e $p ]] || continue
		if grep -qF " $p " /proc/self/mountinfo || grep -qF " $p/" /proc/self/mountinfo; then
			log "ERROR: $p is (or holds) a mount point; not removing it"
			errors=$((errors + 1))
			continue
		fi
		rm -rf --one-file-system -- "$p"
	done <"$STATE/absent-paths"
fi

# 8. Sockets of the bed's containerd shims in /run/containerd/s (containerd 1.6
#    puts them there whatever its state dir): sha256("<address>/<ns>/<id>").
for task in "$BED_DIR"/containerd/state/io.containerd.runtime.v2.task/*/* \
	"$BED_DIR"/n/*/containerd/state/io.containerd.runtime.v2.task/*/*; do
	[[ -d $task ]] || continue
	id=$(basename "$task")
	ns=$(basename "$(dirname "$task")")
	ctrd=${task%/state/io.containerd.runtime.v2.task/*}
	sock=/run/containerd/s/$(printf '%s' "$ctrd/containerd.sock/$ns/$id" | sha256sum | cut -d' ' -f1)
	rm -f "$sock"
done

# 9. The bed directory itself, unless something is still mounted in it.
if [[ -d $BED_DIR ]]; then
	if [[ -n $(bed_mounts) ]]; then
		log "ERROR: not removing $BED_DIR: mounts remain"
		errors=$((errors + 1))
	else
		find "$BED_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf --one-file-system {} +
		[[ ${BED_KEEP_LOGS:-1} == 1 ]] || rm -rf "$BED_DIR"
	fi
fi

if ((errors > 0)); then
	die "teardown left $errors problem(s) behind"
fi
log "bed torn down"
