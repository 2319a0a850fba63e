# shellcheck shell=bash
# systemd-node.sh: the node of a systemd-flavored bed (BED_FLAVOR=systemd),
# sourced by up.sh. The node is a container of this machine booted by
# systemd-nspawn, with systemd as its PID 1, as most production nodes are:
#
#   - its tree is a copy of node-tree.sh's (bookworm: systemd, D-Bus,
#     containerd, runc, CNI plugins; no storage client);
#   - containerd (the package's containerd.service, SystemdCgroup = true)
#     and the kubelet (kubelet.service, cgroupDriver: systemd) are systemd
#     services of the node; pods live under kubepods.slice;
#   - cgroups are hybrid, as on this machine: the v1 controllers and the
#     unified hierarchy, which the node's systemd uses to track its units.
#     A unified-only layout is not possible here: the machine's v1
#     hierarchies hold every controller, so a cgroup2 tree would have none;
#   - the node shares the machine's network (the kubelet serves on
#     $NODE_IP as on the default bed) and has its own mount, PID, IPC, UTS
#     and cgroup namespaces; its cgroup root is /mcbed-node1 in every
#     hierarchy of the machine;
#   - $BED_DIR and the Kubernetes binaries are bound into it at the same
#     paths, so the kubelet root, the containerd socket, the volume plugin
#     directory and the registrations have one path on both sides. Mounts
#     made in the node stay in the node's mount namespace: the tests read
#     them through /proc/<node PID 1>/ (NODE_1_INIT_PID in the env file).
#
# nspawn runs without machined (this machine has no systemd):
# --register=no --keep-unit, in the cgroup made for it. It mounts the v1
# controllers read-only, and a systemd that finds them so manages none of
# them (it takes a controller only where it can write its root): its units
# would then stay in whatever v1 cgroups their processes came from. The
# node's PID 1 is therefore bed-init, which makes them writable and execs
# systemd, so that the node's systemd manages cpu, memory, pids, devices,
# blkio and cpuset as a hybrid node's does. SYSTEMD_SECCOMP=0 lets runc use what nspawn's filter
# refuses (keyctl), and SYSTEMD_NSPAWN_API_VFS_WRITABLE=1 lets the kubelet
# set its sysctls (down.sh restores them, as on the default bed).

# sysnode_up: copy the tree, write containerd's config and the units, boot
# the node and wait for systemd and containerd. Sets NODE_INIT_PID.
sysnode_up() {
	local tree root=$BED_DIR/node-root ctrd=$BED_DIR/containerd cg=${BED_NODE_CGROUP_PREFIX}1 leader
	tree=$(cat "$STATE/node-tree")
	log "copying the systemd node's tree ($tree)"
	rm -rf --one-file-system "$root"
	cp -a "$tree" "$root"
	mkdir -p "$root/etc/containerd" "$root/etc/systemd/system/containerd.service.d" "$root/etc/systemd/system.conf.d"
	# The bed's pods are thrown away with it: a unit that ignores SIGTERM
	# (a storage server's container) holds the node's poweroff for 15 s,
	# not systemd's default 90.
	printf '[Manager]\nDefaultTimeoutStopSec=15s\n' >"$root/etc/systemd/system.conf.d/bed.conf"
	mkdir -p "$ctrd/certs.d"
	containerd_config "$ctrd" "$BED_DIR/runc" true >"$root/etc/containerd/config.toml"
	cat >"$root/usr/local/sbin/bed-init" <<-'EOF'
		#!/bin/sh
		# The node's PID 1 until it execs systemd: the cgroup v1 controllers
		# writable first (systemd-node.sh says why).
		for d in /sys/fs/cgroup/*/; do
			mount -o remount,bind,rw "$d" || exit 1
		done
		exec /lib/systemd/systemd "$@"
	EOF
	chmod 0755 "$root/usr/local/sbin/bed-init"
	cat >"$root/etc/systemd/system/kubelet.service" <<-EOF
		[Unit]
		Description=kubelet of the bed's node
		Requires=containerd.service
		After=containerd.service

		[Service]
		ExecStart=$KUBE_BIN/kubelet --config $BED_DIR/kubelet-config.yaml --kubeconfig $PKI/node.kubeconfig --root-dir $KUBELET_ROOT --hostname-override $NODE_NAME --node-ip $NODE_IP --v=1
		Restart=always
		RestartSec=2
		StandardOutput=append:$LOGS/kubelet.log
		StandardError=append:$LOGS/kubelet.log

		[Install]
		WantedBy=multi-user.target
	EOF
	# containerd's own log, as on the default bed.
	cat >"$root/etc/systemd/system/containerd.service.d/bed.conf" <<-EOF
		[Service]
		StandardOutput=append:$LOGS/containerd.log
		StandardError=append:$LOGS/containerd.log
	EOF

	# The node's cgroup in every hierarchy of the machine.
	make_node_cgroup "$cg"
	log "booting the systemd node (systemd-nspawn, $root)"
	# shellcheck disable=SC2016 # expanded by the node's starter shell.
	start node env SYSTEMD_SECCOMP=0 SYSTEMD_NSPAWN_API_VFS_WRITABLE=1 CG="$cg" bash -c '
		for h in /sys/fs/cgroup/*/; do
			[[ -f ${h}cgroup.procs ]] && echo $$ >"$h$CG/cgroup.procs"
		done
		exec "$@"' node-starter \
		systemd-nspawn --directory="$root" --machine=mcbed-node --hostname="$NODE_NAME" \
		--register=no --keep-unit --capability=all --console=read-only --resolv-conf=copy-host \
		--kill-signal=SIGRTMIN+3 --bind-ro=/etc/hosts --bind=/dev/fuse --bind=/dev/kmsg \
		--bind="$BED_DIR" --bind-ro="$KUBE_BIN" /usr/local/sbin/bed-init
	wait_for "the node's systemd" 60 sysnode_leader || fail "the systemd node did not start" node
	leader=$(sysnode_leader)
	wait_for "the node's systemd to finish booting" 90 sysnode_running "$leader" ||
		fail "the systemd node did not boot (systemctl is-system-running: $(sysnode_exec "$leader" systemctl is-system-running 2>&1))" node containerd
	NODE_INIT_PID=$leader
	echo "$leader" >"$STATE/node-init.pid"
	wait_for "containerd" 30 ctr -a "$ctrd/containerd.sock" version || fail "containerd did not start in the node" containerd node
	log "systemd node up: PID 1 is $leader here, containerd.service running"
}

# sysnode_leader: print the node's PID 1 (as this machine sees it): the
# child of the nspawn process, when it runs systemd.
sysnode_leader() {
	local nspawn pid
	nspawn=$(cat "$STATE/pids/node.pid") || return 1
	for pid in $(cat "/proc/$nspawn/task/$nspawn/children" 2>/dev/null); do
		[[ $(cat "/proc/$pid/comm" 2>/dev/null) == systemd ]] && { echo "$pid"; return 0; }
	done
	return 1
}

# sysnode_exec PID COMMAND...: run COMMAND in the node whose PID 1 is PID.
sysnode_exec() {
	local pid=$1
	shift
	nsenter --target "$pid" --mount --uts --ipc --pid --cgroup -- "$@"
}

sysnode_running() {
	local state
	state=$(sysnode_exec "$1" systemctl is-system-running 2>/dev/null)
	[[ $state == running || $state == degraded ]]
}

# sysnode_kubelet: start the node's kubelet.service (its config written).
sysnode_kubelet() {
	log "starting kubelet.service in the node ($NODE_NAME, $NODE_IP, root $KUBELET_ROOT)"
	sysnode_exec "$NODE_INIT_PID" systemctl start kubelet.service ||
		fail "kubelet.service did not start" kubelet node
}
