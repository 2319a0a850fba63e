#!/usr/bin/env bash
# diagnose.sh: print what a reader needs to find why an end-to-end run
# failed once the machine is gone: the load, memory and disk; the bed's
# components, alive or not; per node the tails of the kubelet's and
# containerd's logs; those of the API server, controller-manager, scheduler
# and etcd; the nodes, every pod, the recent events of every namespace;
# every mount pod's log (pods whose name contains "mountpod", from the
# nodes' pod log directories, else kubectl logs); the FUSE clients' logs
# (glusterfs, ceph-fuse); the kernel's last messages. Then a summary of a
# screenful: what is down, the pods that do not run, the last warnings and
# errors.
# Every section is bounded, the whole to DIAGNOSE_LINES lines (default
# 1500) before the summary; every command has a timeout. It reads only, it
# makes do with what is left when the bed is down (the logs outlive it), and
# it always exits 0. The framework (test/framework, RunSuite) runs it when a
# suite failed, before tearing the bed down; e2e.sh when a suite ended
# without (a timeout, a crash). DIAGNOSE_SUMMARY=FILE also writes the
# summary to FILE.
set -uo pipefail # not -e: best effort, section by section

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

LOGS=$BED_DIR/logs
max_lines=${DIAGNOSE_LINES:-1500}
width=400 # characters of a line at most
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mc-diagnose.XXXXXX") || exit 0
trap 'rm -rf "$tmp"' EXIT

# t COMMAND...: COMMAND bounded to 20 seconds.
t() { timeout -k 5 "${DIAGNOSE_TIMEOUT:-20}" "$@"; }
section() { printf '\n=== diagnose: %s\n' "$*"; }
# tail_file N FILE: FILE's last N lines, each cut to $width characters.
tail_file() {
	if [[ -r $2 ]]; then
		t tail -n "$1" "$2" | cut -c "1-$width"
	else
		echo "($2: not there)"
	fi
}
# last_error FILE: the last error of a component's log (klog E/F lines,
# containerd's and etcd's level=error, a panic), but the kubelet's on every
# closed exec stream.
last_error() {
	t grep -aE '^[EF][0-9]{4} |level=(error|fatal)|"level":"(error|fatal)"|^panic: ' "$1" 2>/dev/null |
		grep -av '"Error on socket receive"' | tail -n 1 | cut -c 1-220
}

# The bed's env file, if it is still up: kubectl and the nodes' directories.
kubectl_ok=0
if [[ -r $BED_DIR/env ]]; then
	# shellcheck source=/dev/null
	source "$BED_DIR/env"
	k() { t "$KUBECTL" --kubeconfig "$KUBECONFIG" --request-timeout=15s "$@"; }
	if [[ -x ${KUBECTL:-} ]] && k get --raw /readyz >/dev/null 2>&1; then kubectl_ok=1; fi
fi
# How many nodes: the env file says, else the kubelets' logs (a bed torn
# down keeps its logs: kubelet.log, kubelet-2.log, ...).
nodes=${BED_NODES:-$(find "$LOGS" -maxdepth 1 -name 'kubelet*.log' 2>/dev/null | wc -l)}
((nodes >= 1)) || nodes=1
# Node i's tree (pod logs) and its component logs' suffix ("" for node 1).
node_dir() {
	local d
	d=$(eval "echo \"\${NODE_${1}_DIR:-}\"")
	[[ -n $d ]] || d=$BED_DIR
	echo "$d"
}
sfx() { (($1 == 1)) || echo "-$1"; }
node_name() { eval "echo \"\${NODE_${1}_NAME:-node $1}\""; }

# --- the sections, into $tmp/full ----------------------------------------------
{
	section "host $(hostname) at $(date -u '+%F %T UTC'), bed $BED_DIR"
	echo "load average: $(cat /proc/loadavg) on $(nproc) CPUs; up $(cut -d' ' -f1 /proc/uptime)s"
	t free -m
	t df -h / "$BED_DIR" 2>/dev/null | awk '!seen[$0]++'
	[[ -d $BED_DIR ]] || echo "(no bed directory: nothing to show but the kernel's messages)"

	if [[ -d $BED_DIR ]]; then
		section "components"
		if [[ -d $BED_DIR/state/pids ]]; then
			for f in "$BED_DIR"/state/pids/*.pid; do
				pid=$(cat "$f" 2>/dev/null)
				if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
					echo "$(basename "$f" .pid): running (pid $pid)"
				else
					echo "$(basename "$f" .pid): NOT RUNNING (pid ${pid:-?})"
					basename "$f" .pid >>"$tmp/down"
				fi
			done
		else
			echo "(the bed is down: its components' logs only)"
		fi

		per_kubelet=60 per_containerd=40
		if ((nodes > 1)); then per_kubelet=35 per_containerd=20; fi
		for ((i = 1; i <= nodes; i++)); do
			for c in kubelet containerd; do
				n=$per_kubelet
				[[ $c == containerd ]] && n=$per_containerd
				section "$c$(sfx "$i") ($(node_name "$i")): last $n lines of $LOGS/$c$(sfx "$i").log"
				tail_file "$n" "$LOGS/$c$(sfx "$i").log"
			done
		done
		for c in kube-apiserver:50 kube-controller-manager:50 kube-scheduler:20 etcd:20; do
			section "${c%:*}: last ${c#*:} lines of $LOGS/${c%:*}.log"
			tail_file "${c#*:}" "$LOGS/${c%:*}.log"
		done

		if ((kubectl_ok)); then
			section "kubectl get nodes -o wide"
			k get nodes -o wide 2>&1 | head -n 15 | cut -c "1-$width"
			section "kubectl get pods -A -o wide"
			k get pods -A -o wide >"$tmp/pods" 2>&1
			head -n 80 "$tmp/pods" | cut -c "1-$width"
			(($(wc -l <"$tmp/pods") <= 80)) || echo "[$(($(wc -l <"$tmp/pods") - 80)) more pods]"
			section "kubectl get events -A, the last 60"
			k get events -A --sort-by=.lastTimestamp >"$tmp/events" 2>&1
			tail -n 60 "$tmp/events" | cut -c "1-$width"
		else
			section "kubectl"
			echo "(no API server to ask: the bed is down or not answering)"
		fi

		# Mount pods' logs, newest first: from the nodes' pod log directories
		# (<ns>_<pod>_<uid>/<container>/<restart>.log, what the runtime wrote,
		# restarts included), else through the API server.
		section "mount pods' logs (pods whose name contains \"mountpod\")"
		shown=0
		for ((i = 1; i <= nodes; i++)); do
			d=$(node_dir "$i")/pod-logs
			[[ -d $d ]] && find "$d" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\n' 2>/dev/null
		done | sort -rn | cut -d' ' -f2- | while IFS= read -r pod; do
			name=$(basename "$pod")
			IFS=_ read -r ns podname _ <<<"$name"
			[[ $podname == *mountpod* ]] || continue
			shown=$((shown + 1))
			if ((shown > 8)); then
				echo "[more mount pods left out]"
				break
			fi
			for cdir in "$pod"/*/; do
				[[ -d $cdir ]] || continue
				log=$(find "$cdir" -maxdepth 1 -name '*.log' -printf '%T@ %p\n' 2>/dev/null | sort -rn | head -n 1 | cut -d' ' -f2-)
				[[ -n $log ]] || continue
				echo ">>> $ns/$podname, container $(basename "$cdir"), $(basename "$log") (restarts: $(($(find "$cdir" -maxdepth 1 -name '*.log' | wc -l) - 1)) kept), last 40 lines:"
				# CRI log lines: "<time> stdout|stderr F|P <text>".
				t tail -n 40 "$log" | sed -E 's/^([^ ]+) (stdout|stderr) [FP] /\1 /' | cut -c "1-$width"
			done
		done >"$tmp/mountpods"
		if [[ -s $tmp/mountpods ]]; then
			cat "$tmp/mountpods"
		elif ((kubectl_ok)); then
			k get pods -A --no-headers -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name 2>/dev/null |
				awk '$2 ~ /mountpod/' | head -n 8 | while read -r ns pod; do
				echo ">>> $ns/$pod, last 40 lines (kubectl logs):"
				k logs -n "$ns" "$pod" --all-containers --prefix --tail=40 2>&1 | cut -c "1-$width"
			done
		else
			echo "(none found)"
		fi

		# FUSE clients' logs: the bed's mount pods write them into $LOGS
		# (glusterfs-client, ceph-client); deploy/ puts them under
		# /var/log/mountcontainers on a node; a glusterfs client on the host
		# writes /var/log/glusterfs.
		section "FUSE clients' logs (glusterfs, ceph-fuse), newest first"
		{
			for d in "$LOGS"/glusterfs-client "$LOGS"/ceph-client; do
				[[ -d $d ]] && find "$d" -type f -size +0 -printf '%T@ %p\n' 2>/dev/null
			done
			for d in /var/log/glusterfs /var/log/mountcontainers; do
				[[ -d $d ]] && find "$d" -type f -size +0 -mmin -180 -printf '%T@ %p\n' 2>/dev/null
			done
		} | sort -rn | cut -d' ' -f2- >"$tmp/fuse"
		if [[ -s $tmp/fuse ]]; then
			head -n 8 "$tmp/fuse" | while IFS= read -r f; do
				echo ">>> $f, last 30 lines:"
				tail_file 30 "$f"
			done
			(($(wc -l <"$tmp/fuse") <= 8)) || echo "[$(($(wc -l <"$tmp/fuse") - 8)) more files left out]"
		else
			echo "(none)"
		fi
	fi

	section "dmesg, the last 40 lines"
	t dmesg -T 2>/dev/null >"$tmp/dmesg" || t dmesg >"$tmp/dmesg" 2>&1
	tail -n 40 "$tmp/dmesg" | cut -c "1-$width"
} >"$tmp/full" 2>&1

awk -v max="$max_lines" 'NR <= max { print } END { if (NR > max) print "[" NR - max " lines of diagnostics left out]" }' "$tmp/full"

# --- the summary: what a reader looks at first ------------------------------------
{
	section "summary (the sections above hold the detail)"
	echo "load average $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $(awk '/^MemAvailable/ {a = $2} /^MemTotal/ {t = $2} END {printf "%d of %d MiB available", a / 1024, t / 1024}' /proc/meminfo)"
	if [[ -d $BED_DIR/state/pids ]]; then
		down=$([[ -f $tmp/down ]] && tr '\n' ' ' <"$tmp/down")
		echo "components: ${down:+NOT RUNNING: }${down:-all running}"
	else
		echo "components: the bed is down (torn down, or never came up)"
	fi
	if ((kubectl_ok)); then
		echo "nodes: $(k get nodes --no-headers 2>/dev/null | awk '{printf "%s%s %s", sep, $1, $2; sep = ", "}')"
		# Per pod: namespace/name phase node, then per container
		# ready,restarts,reason; (a pod that succeeded is fine).
		k get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.phase} {.spec.nodeName} {range .status.containerStatuses[*]}{.ready},{.restartCount},{.state.waiting.reason}{.state.terminated.reason};{end}{"\n"}{end}' 2>/dev/null |
			awk '$2 != "Succeeded" && ($2 != "Running" || $4 ~ /(^|;)false,/)' >"$tmp/notrunning"
		echo "pods not running or not ready: $(wc -l <"$tmp/notrunning") (pod phase node ready,restarts,reason per container)"
		head -n 5 "$tmp/notrunning" | cut -c 1-200 | sed 's/^/  /'
		# The bed has no cluster DNS and may run on cgroup v1: those
		# warnings are always there.
		awk '$3 == "Warning" && $4 != "MissingClusterDNS" && $4 != "CgroupV1"' "$tmp/events" >"$tmp/warnings"
		echo "warning events among the last 60 (but MissingClusterDNS, CgroupV1): $(wc -l <"$tmp/warnings")"
		tail -n 4 "$tmp/warnings" | tr -s ' ' | cut -c 1-220 | sed 's/^/  /'
	fi
	for f in $(for ((i = 1; i <= nodes; i++)); do echo "kubelet$(sfx "$i")" "containerd$(sfx "$i")"; done) \
		kube-apiserver kube-controller-manager kube-scheduler etcd; do
		[[ -r $LOGS/$f.log ]] || continue
		e=$(last_error "$LOGS/$f.log")
		[[ -z $e ]] || echo "  $f: $e"
	done >"$tmp/errors"
	if [[ -s $tmp/errors ]]; then
		echo "last error of each component's log:"
		cat "$tmp/errors"
	fi
	# The tails themselves, short: the sections above hold longer ones.
	echo "last lines of the components' logs:"
	for f in $(for ((i = 1; i <= nodes; i++)); do echo "kubelet$(sfx "$i")" "containerd$(sfx "$i")"; done) \
		kube-apiserver kube-controller-manager; do
		[[ -r $LOGS/$f.log ]] || continue
		echo "  $f:"
		tail -n 3 "$LOGS/$f.log" 2>/dev/null | cut -c 1-200 | sed 's/^/    /'
	done
	kern=$(grep -aiE 'out of memory|oom-kill|killed process|blocked for more than|hung_task|segfault|BUG:|general protection' "$tmp/dmesg" 2>/dev/null | tail -n 3 | cut -c 1-220 | sed 's/^/  /')
	if [[ -n $kern ]]; then
		echo "kernel:"
		echo "$kern"
	else
		echo "kernel: no OOM kill, hung task or segfault among its last messages"
	fi
} >"$tmp/summary" 2>&1
cat "$tmp/summary"
if [[ -n ${DIAGNOSE_SUMMARY:-} ]]; then
	cp "$tmp/summary" "$DIAGNOSE_SUMMARY" 2>/dev/null || true
fi
exit 0
