#!/usr/bin/env bash
# up.sh: start a Kubernetes test bed on this machine, entirely under $BED_DIR:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and $BED_NODES
# nodes (default 1), each a private containerd and a kubelet whose root
# directory stands in for /var/lib/kubelet.
#
# One node keeps the layout of a single-node bed ($BED_DIR/kubelet,
# $BED_DIR/containerd, ...). With BED_NODES=N>1 every node has its own tree
# $BED_DIR/n/<node>/ (kubelet root k/, volume plugin and shim directories,
# containerd root, state and socket, runc root, pod logs), its own cgroup
# root (the first node the host's, node i /mcbed-node<i> in every hierarchy),
# ports and node IP: the first node the machine's address, node i 10.244.251.i
# on the bridge $BED_NODE_BRIDGE (the kubelet refuses a loopback node IP).
# $BED_DIR/n is one rshared mount, so a DaemonSet's hostPath of it serves
# every node (test/demo/manifests.sh points each pod at its node's tree).
# Needs root, the packages of setup.sh, the binaries of build-kube.sh and the image
# archives of images.sh. A bed left over from an earlier run is torn down first.
# On success it writes $BED_DIR/env (`export KEY=value` lines) for tests and people:
#   . "$BED_DIR/env"; "$KUBECTL" get nodes
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

# missing WHAT: a prerequisite is missing; exit status 3 tells the e2e suite so.
missing() {
	log "MISSING PREREQUISITE: $*"
	exit 3
}

[[ $EUID -eq 0 ]] || missing "up.sh must run as root"

KUBE_BIN=$(kube_bin_dir)
for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
	[[ -x $KUBE_BIN/$c ]] || missing "$KUBE_BIN/$c: run test/bed/build-kube.sh"
done
for c in containerd containerd-shim-runc-v2 runc ctr etcd openssl iptables ip curl; do
	command -v "$c" >/dev/null || missing "$c: run test/bed/setup.sh"
done
[[ -x /usr/lib/cni/bridge ]] || missing "CNI plugins in /usr/lib/cni: run test/bed/setup.sh"
for i in pause base; do
	[[ -e $IMAGE_CACHE_DIR/current/$i.tar ]] || missing "image archive $IMAGE_CACHE_DIR/current/$i.tar: run test/bed/images.sh"
done

if [[ -e $BED_DIR/env || -e $BED_DIR/state ]] || bed_leftovers; then
	log "tearing down a bed left over from an earlier run"
	"$here/down.sh"
fi

start_all=$(date +%s)
# The machine's host name resolves (to loopback): what a GlusterFS brick
# names. One node is named after it; more are bed-1, bed-2, ...
BED_HOST_NAME=$(hostname | tr '[:upper:]' '[:lower:]')
NODE_NAME=${NODE_NAME:-$BED_HOST_NAME}
NODE_IP=${NODE_IP:-$(ip -4 -o addr show scope global | awk '{sub(/\/.*/, "", $4); print $4; exit}')}
[[ -n $NODE_IP ]] || die "no non-loopback IPv4 address for the node; set NODE_IP"

BED_NODES=${BED_NODES:-1}
[[ $BED_NODES =~ ^[1-9]$ ]] || die "BED_NODES=$BED_NODES: give a number of nodes from 1 to 9"
# BED_FLAVOR=systemd: the node runs systemd as PID 1 in a container of this
# machine, with containerd and the kubelet as its services on the systemd
# cgroup driver (systemd-node.sh); the default runs them as plain processes.
BED_FLAVOR=${BED_FLAVOR:-default}
case $BED_FLAVOR in
default) ;;
systemd)
	((BED_NODES == 1)) || die "BED_FLAVOR=systemd is a bed of one node (BED_NODES=$BED_NODES)"
	command -v systemd-nspawn >/dev/null || missing "systemd-nspawn: run test/bed/setup.sh"
	# shellcheck source-path=SCRIPTDIR source=systemd-node.sh
	source "$here/systemd-node.sh"
	;;
*) die "BED_FLAVOR=$BED_FLAVOR: give default or systemd" ;;
esac

PKI=$BED_DIR/pki
LOGS=$BED_DIR/logs
STATE=$BED_DIR/state
API_PORT=16443
ETCD_PORT=23790
KUBECONFIG_ADMIN=$PKI/admin.kubeconfig
KUBECTL=$KUBE_BIN/kubectl
KUBE_VERSION=$(kube_version)

# Node i's name, address, tree and ports; node 1 is the one the single-node
# variables of the env file name (NODE_NAME, KUBELET_ROOT, CRI_SOCKET, ...).
declare -a N_NAME N_IP N_DIR N_ROOT N_CGROUP
for ((i = 1; i <= BED_NODES; i++)); do
	if ((i == 1)); then
		N_IP[i]=$NODE_IP N_CGROUP[i]=
	else
		N_IP[i]=$BED_NODE_NET.$i N_CGROUP[i]=$BED_NODE_CGROUP_PREFIX$i
	fi
	if ((BED_NODES == 1)); then
		N_NAME[i]=$NODE_NAME N_DIR[i]=$BED_DIR N_ROOT[i]=$BED_DIR/kubelet
	else
		# Short names and paths: the exec sockets' paths under the kubelet
		# root must fit a unix socket address (107 bytes).
		N_NAME[i]=bed-$i N_DIR[i]=$BED_DIR/n/bed-$i N_ROOT[i]=$BED_DIR/n/bed-$i/k
	fi
done
NODE_NAME=${N_NAME[1]}
CTRD=${N_DIR[1]}/containerd
CRI_SOCKET=$CTRD/containerd.sock
KUBELET_ROOT=${N_ROOT[1]}
VOLUME_PLUGIN_DIR=${N_DIR[1]}/volume-plugins

mkdir -p "$PKI" "$STATE/pids" "$BED_DIR/cni/net.d" "$BED_DIR/cni/ipam" "$BED_DIR/etcd" "$BED_DIR/loop"
for ((i = 1; i <= BED_NODES; i++)); do
	mkdir -p "${N_DIR[i]}/containerd/certs.d" "${N_DIR[i]}/runc" "${N_ROOT[i]}" "${N_DIR[i]}/volume-plugins" "${N_DIR[i]}/pod-logs"
done
rm -rf "$LOGS"
mkdir -p "$LOGS"
chmod 0700 "$PKI"
if [[ $BED_FLAVOR == systemd ]]; then
	"$here/node-tree.sh" >"$STATE/node-tree" || die "cannot build the systemd node's tree (node-tree.sh)"
fi
cd "$BED_DIR"

# --- host state that the bed changes and down.sh restores -------------------------
save_host_state() {
	local k p
	for k in "${BED_SYSCTLS[@]}"; do
		echo "$k=$(sysctl -n "$k")"
	done >"$STATE/sysctl"
	for p in "${BED_HOST_PATHS[@]}"; do
		[[ -e $p ]] || echo "$p"
	done >"$STATE/absent-paths"
	for p in $(kubepods_cgroups); do
		[[ -e $p ]] || echo "$p"
	done >"$STATE/absent-cgroups"
}
save_host_state

# start NAME COMMAND...: run COMMAND detached, logging to $LOGS/NAME.log.
start() {
	local name=$1
	shift
	setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$STATE/pids/$name.pid"
}

alive() { kill -0 "$(cat "$STATE/pids/$1.pid")" 2>/dev/null; }

# fail WHAT COMPONENT...: report a failed wait with the components' log tails.
fail() {
	local what=$1 c
	shift
	for c in "$@"; do
		if [[ -f $LOGS/$c.log ]]; then
			alive "$c" || log "$c is not running"
			log "last lines of $LOGS/$c.log:"
			tail -25 "$LOGS/$c.log" >&2
		fi
	done
	die "$what (logs in $LOGS; tear down with test/bed/down.sh)"
}

# --- certificates -------------------------------------------------------------------
log "certificates in $PKI"
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 30 -subj "/CN=mountcontainers-bed-ca" \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
	2>/dev/null

# cert NAME SUBJECT USAGE [SAN]: a key pair signed by the bed's CA.
cert() {
	local name=$1 subj=$2 usage=$3 san=${4:-}
	openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$usage"
		[[ -z $san ]] || echo "subjectAltName=$san"
	} >"$PKI/$name.ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 30 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

cert apiserver "/CN=kube-apiserver" serverAuth \
	"IP:127.0.0.1,IP:$NODE_IP,IP:10.96.0.1,DNS:localhost,DNS:$NODE_NAME,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
# Node i's files are named <what> for node 1 and <what>-<i> for the others.
sfx() { (($1 == 1)) || echo "-$1"; }
for ((i = 1; i <= BED_NODES; i++)); do
	cert "kubelet-serving$(sfx "$i")" "/CN=${N_NAME[i]}" serverAuth "IP:${N_IP[i]},IP:127.0.0.1,DNS:${N_NAME[i]}"
	cert "node$(sfx "$i")" "/O=system:nodes/CN=system:node:${N_NAME[i]}" clientAuth
done
cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

# kubeconfig NAME: $PKI/NAME.kubeconfig with the client certificate NAME.
kubeconfig() {
	cat >"$PKI/$1.kubeconfig" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: bed
		  cluster:
		    server: https://127.0.0.1:$API_PORT
		    certificate-authority: $PKI/ca.crt
		users:
		- name: $1
		  user:
		    client-certificate: $PKI/$1.crt
		    client-key: $PKI/$1.key
		contexts:
		- name: bed
		  context:
		    cluster: bed
		    user: $1
		current-context: bed
	EOF
}
for k in admin controller-manager scheduler; do kubeconfig "$k"; done
for ((i = 1; i <= BED_NODES; i++)); do kubeconfig "node$(sfx "$i")"; done

# --- containerd ---------------------------------------------------------------------
cat >"$BED_DIR/cni/net.d/10-bed.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$BED_CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BED_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$BED_DIR/cni/ipam",
        "ranges": [[{"subnet": "$BED_POD_CIDR"}]]
      }
    }
  ]
}
EOF

# containerd_config CTRD RUNC_ROOT SYSTEMD_CGROUP: print the config of a
# node's containerd with its root, state and socket under CTRD, runc's root
# RUNC_ROOT and runc's cgroup manager (SystemdCgroup: true on the systemd
# node, where containerd.service reads it).
containerd_config() {
	local ctrd=$1 runc=$2 systemd_cgroup=$3
	cat <<-EOF
		version = 2
		root = "$ctrd/root"
		state = "$ctrd/state"
		oom_score = 0

		[grpc]
		  address = "$ctrd/containerd.sock"

		[ttrpc]
		  address = "$ctrd/containerd.sock.ttrpc"

		[plugins."io.containerd.internal.v1.opt"]
		  path = "$ctrd/opt"

		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "localhost/mountcontainers/pause:dev"
		  restrict_oom_score_adj = true
		  netns_mounts_under_state_dir = true
		  disable_tcp_service = true
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  enable_selinux = false
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        Root = "$runc"
		        SystemdCgroup = $systemd_cgroup
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$BED_DIR/cni/net.d"
		  # Registry hosts (<host>/hosts.toml), read at each pull: empty but
		  # for the quickstart's registry stand-in (test/e2e/quickstart_test.go).
		  [plugins."io.containerd.grpc.v1.cri".registry]
		    config_path = "$ctrd/certs.d"
	EOF
}

# containerd_up I: write node I's containerd config, start it, and import
# the image archives into it in the background (their PID in IMPORT_PID[I]).
declare -a IMPORT_PID
containerd_up() {
	local i=$1 ctrd=${N_DIR[$1]}/containerd name
	name=containerd$(sfx "$i")
	containerd_config "$ctrd" "${N_DIR[$i]}/runc" false >"$ctrd/config.toml"
	log "starting $name ($ctrd/containerd.sock)"
	start "$name" containerd --config "$ctrd/config.toml"
	wait_for "$name" 30 ctr -a "$ctrd/containerd.sock" version || fail "$name did not start" "$name"
	import_images "$i"
}

# import_images I: import the image archives into node I's containerd in
# the background (their PID in IMPORT_PID[I]).
import_images() {
	local i=$1 ctrd=${N_DIR[$1]}/containerd
	# Image import (several seconds) overlaps with the control plane's start.
	(
		pids=()
		for a in "$IMAGE_CACHE_DIR"/current/*.tar; do
			f=$(readlink -f "$a")
			{ ctr -a "$ctrd/containerd.sock" -n k8s.io images import "$f" || { echo "importing $f failed"; exit 1; }; } \
				>"$LOGS/import-$(basename "$a" .tar)$(sfx "$i").log" 2>&1 &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p" || exit 1; done
	) &
	IMPORT_PID[i]=$!
}

# Nodes other than the first: their addresses, and their cgroup roots in
# every hierarchy (the kubelet refuses a cgroup root that does not exist).
if ((BED_NODES > 1)); then
	ip link add "$BED_NODE_BRIDGE" type bridge || die "cannot add the nodes' bridge $BED_NODE_BRIDGE"
	for ((i = 2; i <= BED_NODES; i++)); do
		ip addr add "${N_IP[i]}/32" dev "$BED_NODE_BRIDGE"
	done
	ip link set "$BED_NODE_BRIDGE" up
	for ((i = 2; i <= BED_NODES; i++)); do make_node_cgroup "${N_CGROUP[i]}"; done
	# One shared mount over every node's tree: hostPaths of it are
	# Bidirectional-capable on every node.
	mkdir -p "$BED_DIR/n"
	mount --bind "$BED_DIR/n" "$BED_DIR/n"
	mount --make-rshared "$BED_DIR/n"
fi
if [[ $BED_FLAVOR == systemd ]]; then
	sysnode_up
	import_images 1
else
	for ((i = 1; i <= BED_NODES; i++)); do containerd_up "$i"; done
fi

# --- etcd ---------------------------------------------------------------------------
log "starting etcd (127.0.0.1:$ETCD_PORT)"
start etcd etcd --name bed --data-dir "$BED_DIR/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 10))" \
	--initial-cluster "bed=http://127.0.0.1:$((ETCD_PORT + 10))" --listen-metrics-urls "" \
	--quota-backend-bytes 2147483648 --log-level warn
wait_for "etcd" 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health" || fail "etcd did not start" etcd

# --- control plane ------------------------------------------------------------------
log "starting kube-apiserver (https://127.0.0.1:$API_PORT)"
start kube-apiserver "$KUBE_BIN/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
	--bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address "$NODE_IP" \
	--cert-dir "$PKI/apiserver" \
	--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
	--client-ca-file "$PKI/ca.crt" \
	--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
	--kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority "$PKI/ca.crt" \
	--kubelet-preferred-address-types InternalIP \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
	--service-cluster-ip-range 10.96.0.0/16 \
	--authorization-mode Node,RBAC --allow-privileged=true \
	--profiling=false --v=1
wait_for "kube-apiserver" 90 "$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN" get --raw /readyz ||
	fail "kube-apiserver did not become ready" kube-apiserver etcd

log "starting kube-controller-manager and kube-scheduler"
start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
	--kubeconfig "$PKI/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 10357 --cert-dir "$PKI/controller-manager" \
	--leader-elect=false --use-service-account-credentials \
	--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
	--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
	--flex-volume-plugin-dir "$VOLUME_PLUGIN_DIR" \
	--profiling=false --v=1
start kube-scheduler "$KUBE_BIN/kube-scheduler" \
	--kubeconfig "$PKI/scheduler.kubeconfig" \
	--authentication-kubeconfig "$PKI/scheduler.kubeconfig" \
	--authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port 10359 --cert-dir "$PKI/scheduler" \
	--leader-elect=false --profiling=false --v=1

# --- kubelets -----------------------------------------------------------------------
# kubelet_up I: write node I's kubelet config and start its kubelet.
kubelet_up() {
	local i=$1 root=${N_ROOT[$1]} name healthz=10348 cgroup_root= cgroup_driver=cgroupfs
	[[ $BED_FLAVOR == default ]] || cgroup_driver=systemd
	name=kubelet$(sfx "$i")
	# shellcheck disable=SC2046 # one log name per archive.
	wait "${IMPORT_PID[i]}" || fail "importing the image archives into containerd$(sfx "$i") failed" \
		$(for a in "$IMAGE_CACHE_DIR"/current/*.tar; do echo "import-$(basename "$a" .tar)$(sfx "$i")"; done)
	if ((BED_NODES == 1)) && [[ $BED_FLAVOR == default ]]; then
		# The kubelet root stands in for /var/lib/kubelet; Bidirectional
		# hostPaths under it need a shared mount ($BED_DIR/n is one
		# with more nodes).
		mount --bind "$root" "$root"
		mount --make-rshared "$root"
	fi
	mkdir -p "$root/plugin-containers"
	if ((i > 1)); then
		healthz=$((10380 + i))
		cgroup_root="cgroupRoot: /${N_CGROUP[i]}"
	fi
	cat >"${N_DIR[i]}/kubelet-config.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: ${N_IP[i]}
		port: 10350
		healthzBindAddress: 127.0.0.1
		healthzPort: $healthz
		readOnlyPort: 0
		containerRuntimeEndpoint: unix://${N_DIR[i]}/containerd/containerd.sock
		authentication:
		  anonymous:
		    enabled: false
		  webhook:
		    enabled: true
		  x509:
		    clientCAFile: $PKI/ca.crt
		authorization:
		  mode: Webhook
		tlsCertFile: $PKI/kubelet-serving$(sfx "$i").crt
		tlsPrivateKeyFile: $PKI/kubelet-serving$(sfx "$i").key
		makeIPTablesUtilChains: false
		cgroupDriver: $cgroup_driver
		$cgroup_root
		failCgroupV1: false
		failSwapOn: false
		oomScoreAdj: 0
		volumePluginDir: ${N_DIR[i]}/volume-plugins
		podLogsDir: ${N_DIR[i]}/pod-logs
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard:
		  memory.available: 50Mi
		  nodefs.available: 1%
		  nodefs.inodesFree: 1%
		  imagefs.available: 1%
		resolvConf: /etc/resolv.conf
		serializeImagePulls: false
		registerNode: true
	EOF
	if [[ $BED_FLAVOR == systemd ]]; then
		sysnode_kubelet
		return
	fi
	log "starting $name (node ${N_NAME[i]}, ${N_IP[i]}, root $root)"
	start "$name" "$KUBE_BIN/kubelet" \
		--config "${N_DIR[i]}/kubelet-config.yaml" \
		--kubeconfig "$PKI/node$(sfx "$i").kubeconfig" \
		--root-dir "$root" \
		--hostname-override "${N_NAME[i]}" --node-ip "${N_IP[i]}" \
		--v=1
}

start_kubelet=$(date +%s)
for ((i = 1; i <= BED_NODES; i++)); do kubelet_up "$i"; done

K=("$KUBECTL" --kubeconfig "$KUBECONFIG_ADMIN")
for ((i = 1; i <= BED_NODES; i++)); do
	n=${N_NAME[i]}
	wait_for "node $n to register" 90 "${K[@]}" get node "$n" ||
		fail "node $n did not register" "kubelet$(sfx "$i")" kube-apiserver "containerd$(sfx "$i")"
	if ! "${K[@]}" wait --for=condition=Ready "node/$n" --timeout=120s >/dev/null; then
		"${K[@]}" describe node "$n" | tail -30 >&2 || true
		fail "node $n did not become Ready" "kubelet$(sfx "$i")" "containerd$(sfx "$i")"
	fi
done
ready_s=$(($(date +%s) - start_all))
wait_for "the default ServiceAccount" 90 "${K[@]}" -n default get serviceaccount default ||
	fail "the default ServiceAccount was not created" kube-controller-manager
sa_s=$(($(date +%s) - start_all))

cat >"$BED_DIR/env.tmp" <<EOF
export BED_DIR=$BED_DIR
export KUBECONFIG=$KUBECONFIG_ADMIN
export KUBECTL=$KUBECTL
export KUBE_BIN_DIR=$KUBE_BIN
export KUBE_VERSION=$KUBE_VERSION
export API_SERVER=https://127.0.0.1:$API_PORT
export API_HOST=127.0.0.1
export API_PORT=$API_PORT
export CRI_SOCKET=$CRI_SOCKET
export CRI_ENDPOINT=unix://$CRI_SOCKET
export CONTAINERD_NAMESPACE=k8s.io
export KUBELET_ROOT=$KUBELET_ROOT
export VOLUME_PLUGIN_DIR=$VOLUME_PLUGIN_DIR
export REGISTRATION_DIR=$KUBELET_ROOT/plugin-containers
export LOOP_DIR=$BED_DIR/loop
export BED_SCOPE_PARENT=$BED_SCOPE_PARENT
export LOG_DIR=$LOGS
export NODE_NAME=$NODE_NAME
export NODE_IP=$NODE_IP
export MOUNTPOD_IMAGE=localhost/mountcontainers/mountpod:dev
export BASE_IMAGE=localhost/mountcontainers/base:dev
export PAUSE_IMAGE=localhost/mountcontainers/pause:dev
export BED_NODES=$BED_NODES
export BED_HOST_NAME=$BED_HOST_NAME
export BED_FLAVOR=$BED_FLAVOR
EOF
if [[ $BED_FLAVOR == systemd ]]; then
	echo "export NODE_1_INIT_PID=$NODE_INIT_PID" >>"$BED_DIR/env.tmp"
	echo "export NODE_1_CGROUP=${BED_NODE_CGROUP_PREFIX}1" >>"$BED_DIR/env.tmp"
fi
# Every node, the first included: NODE_<i>_<WHAT> (test/framework's Env.Nodes).
for ((i = 1; i <= BED_NODES; i++)); do
	cat >>"$BED_DIR/env.tmp" <<-EOF
		export NODE_${i}_NAME=${N_NAME[i]}
		export NODE_${i}_IP=${N_IP[i]}
		export NODE_${i}_DIR=${N_DIR[i]}
		export NODE_${i}_KUBELET_ROOT=${N_ROOT[i]}
		export NODE_${i}_REGISTRATION_DIR=${N_ROOT[i]}/plugin-containers
		export NODE_${i}_VOLUME_PLUGIN_DIR=${N_DIR[i]}/volume-plugins
		export NODE_${i}_CRI_SOCKET=${N_DIR[i]}/containerd/containerd.sock
		export NODE_${i}_SHIM_DIR=${N_DIR[i]}/shim-bin
	EOF
done
mv "$BED_DIR/env.tmp" "$BED_DIR/env"
log "bed up: $BED_NODES node(s) Ready after ${ready_s}s (kubelet $(($(date +%s) - start_kubelet))s), default ServiceAccount after ${sa_s}s"
log "use it with: . $BED_DIR/env; \"\$KUBECTL\" get nodes"
echo "up.sh: $BED_NODES node(s) Ready after ${ready_s}s, default ServiceAccount after ${sa_s}s" >>"$LOGS/timings"
