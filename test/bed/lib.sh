#!/usr/bin/env bash
# lib.sh: shared settings and helpers for the test-bed scripts. Source it.
# shellcheck disable=SC2034 # variables are used by the scripts that source this.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BED_DIR=${BED_DIR:-/var/tmp/mountcontainers-bed}
CACHE_DIR=${MC_CACHE_DIR:-/var/cache/mountcontainers}
KUBE_CACHE_DIR=${KUBE_CACHE_DIR:-$CACHE_DIR/kube}
IMAGE_CACHE_DIR=${IMAGE_CACHE_DIR:-$CACHE_DIR/images}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
	log "ERROR: $*"
	exit 1
}

# kube_version prints the k8s.io/kubernetes version pinned in test/cluster/go.mod
# (the one place it is pinned).
kube_version() {
	awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$REPO_ROOT/test/cluster/go.mod"
}

# kube_bin_dir prints the cache directory of the binaries for the pinned version
# built with the current Go toolchain.
kube_bin_dir() {
	local gov
	gov=$(go env GOVERSION)
	echo "$KUBE_CACHE_DIR/$(kube_version)-$gov/bin"
}

# wait_for DESCRIPTION TIMEOUT_SECONDS COMMAND...: run COMMAND every second until
# it succeeds; fail after TIMEOUT_SECONDS.
wait_for() {
	local what=$1 timeout=$2 start
	shift 2
	start=$(date +%s)
	until "$@" >/dev/null 2>&1; do
		if (($(date +%s) - start >= timeout)); then
			log "timed out after ${timeout}s waiting for $what"
			return 1
		fi
		sleep 1
	done
}

# What the bed changes on the host outside $BED_DIR; up.sh saves, down.sh restores.
BED_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Paths the kubelet, containerd, CNI and systemd-nspawn (the systemd bed)
# create whatever their configured roots;
# down.sh removes those that did not exist before up.sh (deepest first).
BED_HOST_PATHS=(/var/lib/kubelet/device-plugins /var/lib/kubelet/pod-resources /var/lib/kubelet
	/var/log/containers /var/log/pods /var/lib/cni /run/containerd /run/netns /var/run/kubernetes
	/usr/libexec/kubernetes /opt/containerd /etc/cni /run/systemd/nspawn)
BED_BRIDGE=mcbed0
# Nodes after the first (BED_NODES>1, up.sh): node i's address
# $BED_NODE_NET.i on the bridge $BED_NODE_BRIDGE, its cgroup root
# $BED_NODE_CGROUP_PREFIX<i> in every hierarchy.
BED_NODE_BRIDGE=mcbednodes
BED_NODE_NET=10.244.251
BED_NODE_CGROUP_PREFIX=mcbed-node
BED_CNI_NETWORK=mountcontainers-bed
BED_POD_CIDR=10.244.250.0/24
# The cgroup parent of the scopes the bed's mount pods make for FUSE mounts
# (docs/scopes.md), in every hierarchy; down.sh kills what is left in it and
# removes it. With more nodes, node <name>'s mount pods use
# $BED_SCOPE_PARENT-<name>.
BED_SCOPE_PARENT=mountcontainers-bed

# bed_pids own|kubepods prints the PIDs of every process that belongs to the
# bed: those whose command lines name $BED_DIR (its components and containerd
# shims) and all their descendants (containers, and what they daemonized: the
# shims are child subreapers); with "kubepods" also every process in a kubepods
# cgroup, which is right only when the bed's kubelet created those cgroups. It
# never prints the calling shell or its ancestors.
bed_pids() {
	local skip=" " a=$$ seeds
	while [[ $a -gt 1 ]]; do
		skip+="$a "
		a=$(awk '{sub(/.*\) /, ""); print $2}' "/proc/$a/stat" 2>/dev/null || echo 1)
	done
	seeds=$(
		grep -laF -- "$BED_DIR" /proc/[0-9]*/cmdline 2>/dev/null || true
		if [[ $1 == kubepods ]]; then
			grep -lE ":/($BED_NODE_CGROUP_PREFIX[0-9]+/)?kubepods(/|\$)" /proc/[0-9]*/cgroup 2>/dev/null || true
		fi
	)
	seeds=$(awk -F/ '{print $3}' <<<"$seeds")
	# Through cat: a process that exits between the glob and the read is
	# skipped (mawk, Debian's awk, gives up on a file it cannot open).
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v seeds="$seeds" -v skip="$skip" '
		{
			p = $1
			line = $0; sub(/.*\) /, "", line); split(line, f, " ")
			parent[p] = f[2]
		}
		END {
			n = split(seeds, s, "\n")
			for (i = 1; i <= n; i++)
				if (s[i] in parent && index(skip, " " s[i] " ") == 0) mark[s[i]] = 1
			do {
				changed = 0
				for (p in parent)
					if (!(p in mark) && (parent[p] in mark) && index(skip, " " p " ") == 0) { mark[p] = 1; changed = 1 }
			} while (changed)
			for (p in mark) print p
		}' || true
	return 0
}

# bed_mounts prints the mount points under $BED_DIR, deepest first.
bed_mounts() {
	local mp
	awk '{print $5}' /proc/self/mountinfo | while IFS= read -r mp; do
		mp=$(printf '%b' "$mp") # mountinfo escapes blanks as \040
		if [[ $mp == "$BED_DIR" || $mp == "$BED_DIR"/* ]]; then echo "$mp"; fi
	done | awk '{print length($0) "\t" $0}' | sort -rn | cut -f2- | uniq
}

# bed_loops prints the loop devices backed by files under $BED_DIR.
bed_loops() {
	losetup -l -n -O NAME,BACK-FILE 2>/dev/null | awk -v d="$BED_DIR/" 'index($2, d) == 1 {print $1}' || true
}

# kubepods_cgroups prints the kubelet's top cgroup in every v1 hierarchy.
kubepods_cgroups() {
	local c
	for c in /sys/fs/cgroup/*/; do
		[[ -f ${c}cgroup.procs ]] && echo "${c}kubepods"
	done
	return 0
}

# node_cgroups prints the cgroup roots of the nodes after the first that
# exist, in every hierarchy.
node_cgroups() {
	local c
	for c in /sys/fs/cgroup/*/"$BED_NODE_CGROUP_PREFIX"[0-9]*; do
		[[ -d $c ]] && echo "$c"
	done
	return 0
}

# scope_cgroups prints the bed's scope parents (one per node) that exist, in
# every hierarchy (cgroup v1 controllers, and the cgroup2 one: the root
# itself or "unified" on a hybrid host).
scope_cgroups() {
	local c
	for c in /sys/fs/cgroup/"$BED_SCOPE_PARENT" /sys/fs/cgroup/"$BED_SCOPE_PARENT"-* \
		/sys/fs/cgroup/*/"$BED_SCOPE_PARENT" /sys/fs/cgroup/*/"$BED_SCOPE_PARENT"-*; do
		[[ -d $c ]] && echo "$c"
	done
	return 0
}

# scope_pids prints the PIDs of every process in the bed's scopes.
scope_pids() {
	local cg
	for cg in $(scope_cgroups); do
		[[ -d $cg ]] && find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -un
	return 0
}

# bed_leftovers succeeds when anything of a bed is still there.
bed_leftovers() {
	[[ -n $(bed_pids own) || -n $(bed_mounts) || -n $(bed_loops) || -n $(node_cgroups) ]] ||
		ip link show "$BED_BRIDGE" >/dev/null 2>&1 || ip link show "$BED_NODE_BRIDGE" >/dev/null 2>&1
}

# make_node_cgroup NAME: the cgroup NAME in every hierarchy of the machine,
# its v1 cpuset given its parent's CPUs and memory nodes (an empty cpuset
# takes no process): a node's cgroup root.
make_node_cgroup() {
	local h
	for h in /sys/fs/cgroup/*/; do
		[[ -f ${h}cgroup.procs ]] || continue
		mkdir -p "$h$1"
		if [[ -f ${h}cpuset.cpus ]]; then
			cat "${h}cpuset.cpus" >"$h$1/cpuset.cpus"
			cat "${h}cpuset.mems" >"$h$1/cpuset.mems"
		fi
	done
}

# apt_mirror prints the URI of the host's apt source that carries $SUITE, from
# one-line sources (sources.list, *.list) or deb822 ones (*.sources).
apt_mirror() {
	local f uri
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f $f ]] || continue
		uri=$(awk -v suite="$SUITE" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) { print $i; exit }
			}' "$f")
		[[ -n $uri ]] && { echo "${uri%/}"; return 0; }
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		uri=$(awk -v suite="$SUITE" '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " suite " ")) {
					split(uris, u, " "); print u[1]; found = 1; exit
				}
				types = ""; uris = ""; suites = ""; enabled = ""
			}
			/^#/ { next }
			/^[ \t]*$/ { flush(); next }
			{
				key = tolower($1); sub(/:$/, "", key)
				val = $0; sub(/^[^:]*:[ \t]*/, "", val)
				if (key == "types") types = val
				else if (key == "uris") uris = val
				else if (key == "suites") suites = val
				else if (key == "enabled") enabled = tolower(val)
			}
			END { if (!found) flush() }' "$f")
		[[ -n $uri ]] && { echo "${uri%/}"; return 0; }
	done
	return 1
}
