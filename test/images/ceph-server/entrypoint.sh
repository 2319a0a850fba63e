#!/bin/bash
# A single-node Ceph cluster, started by hand (no disk, no systemd, no
# orchestrator): one mon, one mgr, one OSD on the memstore object store, one
# MDS with a CephFS, an rbd pool; cephx on. Then export what a client needs
# and touch the readiness file. Every start is a new cluster (new fsid, new
# keys): the memstore OSD keeps its objects in memory only.
#
# Environment:
#   CEPH_MON_IP        required: the address every daemon listens on (the
#                      node's non-loopback address; run on the host network)
#   CEPH_EXPORT_DIR    where ceph.conf and the keyrings go (default /export)
#   CEPH_DATA_DIR      everything the daemons keep (default /var/lib/ceph);
#                      emptied at start
#   CEPH_FS_NAME       the CephFS (default cephfs)
#   CEPH_RBD_POOL      the rbd pool (default rbd)
#   CEPH_CLIENT        the client made for the tests (default mountcontainers)
#   CEPH_MEMSTORE_BYTES  the OSD's capacity, held in memory (default 1 GiB)
#   CEPH_READY_FILE    touched once healthy (default /run/ceph-ready); a
#                      file "ready" in CEPH_EXPORT_DIR too, after the exports
#   CEPH_START_TIMEOUT seconds to reach HEALTH_OK (default 180)
#   CEPH_VERBOSE       true: the daemons log everything, not only errors
set -euo pipefail

ip=${CEPH_MON_IP:-}
export_dir=${CEPH_EXPORT_DIR:-/export}
data=${CEPH_DATA_DIR:-/var/lib/ceph}
fs=${CEPH_FS_NAME:-cephfs}
pool=${CEPH_RBD_POOL:-rbd}
client=${CEPH_CLIENT:-mountcontainers}
memstore_bytes=${CEPH_MEMSTORE_BYTES:-1073741824}
ready=${CEPH_READY_FILE:-/run/ceph-ready}
timeout=${CEPH_START_TIMEOUT:-180}
conf=$data/ceph.conf
export CEPH_CONF=$conf

start=$(date +%s)
export CEPH_SERVER_START=$start
log() { printf 'ceph-server: [%3ss] %s\n' "$(($(date +%s) - start))" "$*" >&2; }
die() {
	log "ERROR: $*"
	stop_all
	exit 1
}

# Daemons in start order; the monitor first.
names=()
pids=()
# stop_all: SIGTERM to every daemon but the monitor at once (the next start
# makes a new cluster, so nothing is flushed for later), then the monitor;
# SIGKILL what has not exited 10 s after its SIGTERM.
stop_all() {
	trap - TERM INT
	local i
	for ((i = ${#pids[@]} - 1; i >= 1; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
	done
	for ((i = ${#pids[@]} - 1; i >= 1; i--)); do
		reap "$i"
	done
	if ((${#pids[@]} > 0)); then
		kill -TERM "${pids[0]}" 2>/dev/null || true
		reap 0
	fi
	pids=()
	names=()
}
# reap I: wait up to 10 s for daemon I to exit, then kill it.
reap() {
	local pid=${pids[$1]} n
	[[ -n $pid ]] || return 0
	for ((n = 0; n < 100; n++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "${names[$1]} (pid $pid) did not stop in 10 s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}
on_term() {
	log "signal received: stopping the daemons"
	[[ -z ${helper_pid:-} ]] || kill -TERM "$helper_pid" 2>/dev/null || true
	rm -f "$ready"
	stop_all
	log "stopped"
	exit 0
}
trap on_term TERM INT

# run NAME ARGS...: start a daemon in the foreground of its own (-f), logging
# to stderr; remember it.
run() {
	local name=$1
	shift
	"$@" &
	names+=("$name")
	pids+=($!)
}

# helper COMMAND...: run COMMAND in the background and wait for it, so that
# SIGTERM is handled at once (bash runs a trap only between commands, but
# interrupts `wait`); on_term kills it.
helper_pid=
helper() {
	local rc=0
	"$@" &
	helper_pid=$!
	wait "$helper_pid" || rc=$?
	helper_pid=
	return "$rc"
}

# check_alive: fail if a daemon has exited.
check_alive() {
	local i
	for i in "${!pids[@]}"; do
		if [[ -n ${pids[i]} ]] && ! kill -0 "${pids[i]}" 2>/dev/null; then
			local rc=0
			wait "${pids[i]}" || rc=$?
			pids[i]=
			die "${names[i]} exited (status $rc); its log is above"
		fi
	done
}

# step WHAT COMMAND...: run COMMAND or die naming WHAT.
step() {
	local what=$1
	shift
	"$@" || die "$what failed (exit $?): $*"
}

# put FILE MODE: write stdin to FILE atomically.
put() {
	local tmp
	tmp=$(mktemp "$1.XXXXXX")
	cat >"$tmp"
	chmod "$2" "$tmp"
	mv -f "$tmp" "$1"
}

# ---- checks ----
[[ -n $ip ]] || die "CEPH_MON_IP is not set: give the node's non-loopback IPv4 address"
[[ $ip =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "CEPH_MON_IP=$ip is not an IPv4 address"
[[ $ip != 127.* ]] || die "CEPH_MON_IP=$ip is a loopback address: clients outside this container could not reach it"
# One Python for both checks (each start costs a few tenths of a second).
if ! err=$(python3 - "$ip" 2>&1 <<'EOF'
import socket, sys
ip = sys.argv[1]
try:
    socket.socket().bind((ip, 0))
except OSError:
    sys.exit("CEPH_MON_IP=%s is not an address of this network namespace (run on the host network)" % ip)
for port in (3300, 6789):
    try:
        s = socket.socket()
        # As the monitor binds: a connection of an earlier one in TIME_WAIT
        # does not count, a listener does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((ip, port))
    except OSError as e:
        sys.exit("port %s:%d is taken (%s): is another Ceph monitor running on this node?" % (ip, port, e.strerror))
EOF
); then
	die "$err"
fi

rm -f "$ready"
mkdir -p "$data" "$export_dir" || die "cannot create $data or $export_dir"
# A new cluster every start: clear what a previous start left.
find "$data" -mindepth 1 -maxdepth 1 -exec rm -rf {} + || die "cannot empty $data"
rm -f "$export_dir"/ready "$export_dir"/ceph.conf "$export_dir"/ceph.client.*.keyring "$export_dir"/client.*.key
mkdir -p "$data"/{run,crash,mon,mgr/ceph-a,mds/ceph-a,osd}

fsid=$(cat /proc/sys/kernel/random/uuid)
mon_host="[v2:$ip:3300,v1:$ip:6789]"

# ---- configuration ----
# The daemons log to stderr: errors only, or everything at the default
# levels with CEPH_VERBOSE=true (a few hundred lines to HEALTH_OK, then every
# command the monitor handles).
if [[ ${CEPH_VERBOSE:-false} == true ]]; then
	log_conf=$'log_to_stderr = true\nerr_to_stderr = false\ndebug_rocksdb = 0/5'
else
	log_conf=$'log_to_stderr = false\nerr_to_stderr = true'
fi

# A one-OSD cluster trips warnings that mean nothing here: pools of size 1
# (POOL_NO_REDUNDANCY), too few OSDs for the default size 3, no standby MDS
# (set per file system below). Insecure global_id reclaim stays forbidden,
# which also clears its warning. The data directory may sit on a fuller disk
# than a real monitor would accept; warn only below 2 % free.
put "$conf" 0644 <<EOF
[global]
fsid = $fsid
mon_host = $mon_host
public_addr = $ip
cluster_addr = $ip
ms_bind_ipv4 = true
ms_bind_ipv6 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
run_dir = $data/run
admin_socket = $data/run/\$cluster-\$name.asok
crash_dir = $data/crash
keyring = $data/\$cluster.\$name.keyring
log_to_file = false
$log_conf
mon_cluster_log_to_file = false
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_data_avail_warn = 2
mon_data_avail_crit = 1

[mon]
mon_data = $data/mon/\$cluster-\$id
keyring = $data/mon/\$cluster-\$id/keyring

[mgr]
mgr_data = $data/mgr/\$cluster-\$id
keyring = $data/mgr/\$cluster-\$id/keyring

[osd]
osd_data = $data/osd/\$cluster-\$id
keyring = $data/osd/\$cluster-\$id/keyring
osd_objectstore = memstore
memstore_device_bytes = $memstore_bytes

[mds]
mds_data = $data/mds/\$cluster-\$id
keyring = $data/mds/\$cluster-\$id/keyring
EOF
# So that `ceph -s` works in the container without flags (kubectl exec).
if mkdir -p /etc/ceph 2>/dev/null; then
	ln -sfn "$conf" /etc/ceph/ceph.conf 2>/dev/null || true
	ln -sfn "$data/ceph.client.admin.keyring" /etc/ceph/ceph.client.admin.keyring 2>/dev/null || true
fi
log "cluster $fsid, monitor at $mon_host, data in $data"

# ---- monitor ----
step "creating the admin keyring" ceph-authtool --create-keyring "$data/ceph.client.admin.keyring" \
	--gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
chmod 0600 "$data/ceph.client.admin.keyring"
# (Outside the monitor's data directory: --mkfs wants it empty, and copies
# the keyring in.)
step "creating the monitor keyring" ceph-authtool --create-keyring "$data/mon.keyring" \
	--gen-key -n mon. --cap mon 'allow *' >/dev/null
step "importing the admin key into the monitor keyring" ceph-authtool "$data/mon.keyring" \
	--import-keyring "$data/ceph.client.admin.keyring" >/dev/null
step "creating the monitor map" monmaptool --create --fsid "$fsid" --addv a "$mon_host" "$data/monmap" >/dev/null
step "ceph-mon --mkfs" ceph-mon --mkfs -i a --monmap "$data/monmap" --keyring "$data/mon.keyring"
[[ -f $data/mon/ceph-a/store.db/CURRENT ]] || die "ceph-mon --mkfs did not create the monitor store (log above)"
rm -f "$data/mon.keyring" "$data/monmap"
run ceph-mon ceph-mon -f -i a

# ---- keys, the OSD's registration ----
# The monitor commands go through ceph-server-setup (setup.py): one librados
# connection instead of a ceph CLI process per command.
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
osd_key=$(ceph-authtool --gen-print-key) || die "ceph-authtool --gen-print-key failed"
helper ceph-server-setup daemons "$osd_uuid" "$osd_key" "$data/mgr/ceph-a/keyring" "$data/mds/ceph-a/keyring" \
	>"$data/osd-id" || {
	check_alive
	die "registering the daemons with the monitor failed (see above)"
}
osd_id=$(cat "$data/osd-id")

# ---- manager, OSD, MDS ----
run ceph-mgr ceph-mgr -f -i a
mkdir -p "$data/osd/ceph-$osd_id"
step "writing the OSD keyring" ceph-authtool --create-keyring "$data/osd/ceph-$osd_id/keyring" \
	--name "osd.$osd_id" --add-key "$osd_key" >/dev/null
step "ceph-osd --mkfs (memstore)" ceph-osd -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" --no-mon-config
run "ceph-osd.$osd_id" ceph-osd -f -i "$osd_id"
run ceph-mds ceph-mds -f -i a

# ---- pools, the file system, the client; wait for health ----
helper ceph-server-setup cluster "$osd_id" "$fs" "$pool" "$client" "$data/ceph.client.$client.keyring" \
	"$((start + timeout))" "${pids[@]}" || {
	check_alive
	die "setting up the cluster failed (see above)"
}

# ---- export ----
printf '[global]\nfsid = %s\nmon_host = %s\n' "$fsid" "$mon_host" | put "$export_dir/ceph.conf" 0644
put "$export_dir/ceph.client.admin.keyring" 0600 <"$data/ceph.client.admin.keyring"
put "$export_dir/ceph.client.$client.keyring" 0600 <"$data/ceph.client.$client.keyring"
for name in admin "$client"; do
	key=$(ceph-authtool -p -n "client.$name" "$data/ceph.client.$name.keyring") ||
		die "reading the key of client.$name failed"
	printf '%s' "$key" | put "$export_dir/client.$name.key" 0600
done
touch "$ready"
: | put "$export_dir/ready" 0644
log "HEALTH_OK, $fs has an active MDS; exported ceph.conf and the keyrings of client.admin and client.$client to $export_dir; ready"

# ---- serve ----
while :; do
	check_alive
	sleep 2 &
	wait $! || true
done
