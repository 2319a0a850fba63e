#!/usr/bin/env bash
# demo.sh: the MountContainers user story on real parts, on this machine.
#
# A node without mount.glusterfs mounts a GlusterFS volume for a workload
# pod through an unmodified kubelet. With DEMO_FLAVOR=csi (the default) the
# volume is a claim, provisioned by the CSI driver of deploy/csi/glusterfs
# (its controller and the upstream external-provisioner) as a directory of
# the server's volume, and the kubelet calls the driver's node plugin; with
# DEMO_FLAVOR=flexvolume it is an inline flexVolume, and the kubelet calls
# the Flexvolume driver that the glusterfs mount pod installed. Either
# driver runs mount(8) in the mount pod, where mount.glusterfs lives; the
# FUSE daemon it starts runs in a scope of its own, so the mount outlives
# the pod.
#
#   sudo test/demo/demo.sh            (make demo)       everything, then tear down
#   sudo DEMO_KEEP=1 test/demo/demo.sh (make demo-keep)  leave it running
#   sudo DEMO_FLAVOR=flexvolume test/demo/demo.sh (make demo-flexvolume)
#
# On a fresh Debian 12 machine as root: installs the missing packages
# (test/bed/setup.sh; never a gluster package on the host), builds the
# binaries, Kubernetes (test/bed/build-kube.sh) and the images
# (test/bed/images.sh), starts the single-node test bed (test/bed/up.sh),
# deploys a GlusterFS server pod and the glusterfs mount pod from deploy/,
# and runs a workload. Ctrl-C tears everything down.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export BED_DIR=${BED_DIR:-/var/tmp/mountcontainers-bed}
KEEP=${DEMO_KEEP:-0}
FLAVOR=${DEMO_FLAVOR:-csi}
case $FLAVOR in csi | flexvolume) ;; *) echo "demo.sh: DEMO_FLAVOR is csi or flexvolume, not \"$FLAVOR\"" >&2; exit 2 ;; esac
NS=glusterfs-demo
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mc-demo.XXXXXX")

if [[ -t 1 ]]; then B=$'\e[1m' G=$'\e[32m' R=$'\e[31m' D=$'\e[2m' N=$'\e[0m'; else B='' G='' R='' D='' N=''; fi
t0=$(date +%s.%N)
step_no=0
step_start=$t0
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
step() {
	if ((step_no > 0)); then echo "${D}    ... done in $(since "$step_start") s${N}"; fi
	step_no=$((step_no + 1))
	step_start=$(date +%s.%N)
	echo
	echo "${B}[$step_no] $*${N}   ${D}(t+$(since "$t0") s)${N}"
}
say() { echo "    $*"; }
# quiet CMD...: run CMD with its output in a log; show the tail if it fails.
quiet() {
	local log=$WORK/step-$step_no.log
	if ! "$@" >"$log" 2>&1; then
		echo "${R}    FAILED: $*${N}" >&2
		tail -25 "$log" | sed 's/^/    | /' >&2
		return 1
	fi
}

bed_up=0
teardown() {
	local code=$?
	trap - EXIT INT TERM
	if ((bed_up)) && [[ $KEEP != 1 || $code != 0 ]]; then
		echo
		echo "${B}[teardown] deleting the workload, the pods and the test bed${N}"
		if [[ -n ${KUBECTL:-} ]]; then
			"$KUBECTL" delete pod -n "$NS" demo-workload --wait --timeout=60s --ignore-not-found >/dev/null 2>&1 || true
			"$KUBECTL" delete pvc -n "$NS" demo-claim --wait --timeout=60s --ignore-not-found >/dev/null 2>&1 || true
		fi
		"$repo/test/bed/down.sh" >"$WORK/down.log" 2>&1 || { echo "${R}    down.sh failed; log: $WORK/down.log${N}"; }
		say "test bed torn down (test/bed/down.sh)"
	fi
	[[ $code == 0 ]] && rm -rf "$WORK"
	exit "$code"
}
trap teardown EXIT
trap 'echo; echo "${R}interrupted${N}"; exit 130' INT TERM

[[ $(id -u) == 0 ]] || { echo "demo.sh: run as root (sudo make demo)" >&2; exit 1; }
export PATH=/usr/local/go/bin:$PATH
cd "$repo"

echo "${B}MountContainers demo: a GlusterFS volume for a pod on a node without mount.glusterfs ($FLAVOR)${N}"

step "Installing what is missing (Debian packages; never a gluster package on the host)"
quiet test/bed/setup.sh
say "containerd, runc, etcd, buildah, debootstrap, ... present"

step "Building the binaries (mountpod, kubelet-exec-shim and its helper, flexvolume-driver, csi-driver)"
quiet env CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd/...
say "$(cd bin && echo *)"

step "Building Kubernetes $(sed -n 's/^require k8s.io\/kubernetes //p' test/cluster/go.mod) from its Go modules (cached after the first run)"
quiet test/bed/build-kube.sh
say "kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl"

step "Building the images without a registry (cached by their inputs)"
quiet test/bed/images.sh all
quiet test/bed/images.sh build glusterfs-server test/images/glusterfs-server/Dockerfile test/images/glusterfs-server
say "mount pod (images/Dockerfile): mountpod + mount.glusterfs + the driver and shim it installs"
say "GlusterFS server (test/images/glusterfs-server/Dockerfile)"
if [[ $FLAVOR == csi ]]; then
	quiet test/bed/images.sh provisioner
	say "CSI driver (images/csi-driver/Dockerfile): one static binary, no storage tools"
	say "external-provisioner $(awk '$2 == "github.com/kubernetes-csi/external-provisioner/v6" {print $3}' test/cluster/go.mod) from its Go module (test/bed/build-sidecars.sh)"
fi

step "Starting the single-node Kubernetes test bed (real kubelet, containerd, etcd, apiserver)"
bed_up=1
quiet test/bed/up.sh
# shellcheck source=/dev/null
source "$BED_DIR/env"
export KUBECONFIG KUBECTL
K() { "$KUBECTL" "$@"; }
say "node $(K get nodes -o jsonpath='{.items[0].metadata.name}') Ready, Kubernetes $KUBE_VERSION"

step "Deploying the GlusterFS server in its own pod (host network, brick host $NODE_NAME)"
GLUSTER_NAMESPACE=$NS quiet test/demo/manifests.sh "$WORK/manifests"
quiet K apply -f "$WORK/manifests/glusterfs-server.yaml"
quiet K wait --for=condition=Ready -n "$NS" pod/glusterfs-server --timeout=180s
say "volume gv0 served from $NODE_NAME:/bricks/gv0"

step "Deploying the glusterfs mount pod from deploy/glusterfs"
say "${D}kubectl apply -k deploy/namespace   (the mount pods' namespace, mountcontainers)${N}"
say "${D}kubectl apply -k  (overlay of deploy/glusterfs pointing at the bed's kubelet dir)${N}"
quiet K apply -k deploy/namespace
quiet K apply -k "$WORK/manifests/mountpod"
for _ in $(seq 240); do
	[[ $(K get pods -n mountcontainers -l app.kubernetes.io/instance=glusterfs-mountpod \
		-o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]] && break
	sleep 0.5
done
mp=$(K get pods -n mountcontainers -l app.kubernetes.io/instance=glusterfs-mountpod -o jsonpath='{.items[0].metadata.name}')
K wait --for=condition=Ready -n mountcontainers "pod/$mp" --timeout=10s >/dev/null
driver=$VOLUME_PLUGIN_DIR/mountcontainers.io~glusterfs/glusterfs
for _ in $(seq 100); do [[ -x $driver ]] && break; sleep 0.2; done
say "mount pod mountcontainers/$mp Ready, registered for kubernetes.io/glusterfs"
say "it installed the Flexvolume driver: $driver"

step "kubelet-exec-shim status (the shim the mount pod installed on the host)"
"$BED_DIR/shim-bin/kubelet-exec-shim" --registration-dir "$REGISTRATION_DIR" \
	--runtime-endpoint "$CRI_ENDPOINT" status | sed 's/^/    /'

# start_workload VOLUME: start pod demo-workload, its volume "data" VOLUME
# (the source's YAML, indented six spaces), and wait until it runs; sets uid.
start_workload() {
	cat >"$WORK/workload.yaml" <<-YAML
		apiVersion: v1
		kind: Pod
		metadata: {name: demo-workload, namespace: $NS}
		spec:
		  terminationGracePeriodSeconds: 1
		  containers:
		    - name: main
		      image: $BASE_IMAGE
		      imagePullPolicy: Never
		      command: [sleep, infinity]
		      volumeMounts: [{name: data, mountPath: /data}]
		  volumes:
		    - name: data
	YAML
	printf '%s\n' "$1" >>"$WORK/workload.yaml"
	sed 's/^/    | /' "$WORK/workload.yaml" | sed -n '/volumes:/,$p'
	quiet K apply -f "$WORK/workload.yaml"
	K wait --for=condition=Ready -n "$NS" pod/demo-workload --timeout=180s >/dev/null ||
		{ K describe pod -n "$NS" demo-workload | tail -15; exit 1; }
	uid=$(K get pod -n "$NS" demo-workload -o jsonpath='{.metadata.uid}')
	say "pod demo-workload Running"
}

if [[ $FLAVOR == csi ]]; then
	step "Deploying the GlusterFS CSI driver from deploy/csi/glusterfs"
	say "${D}kubectl apply -k  (overlay of deploy/csi/glusterfs: the bed's kubelet dir, the local images)${N}"
	quiet K apply -k "$WORK/manifests/csi-glusterfs"
	quiet K rollout status -n mountcontainers ds/csi-glusterfs-node --timeout=180s
	quiet K rollout status -n mountcontainers deploy/csi-glusterfs-controller --timeout=180s
	for _ in $(seq 240); do
		[[ $(K get csinode "$NODE_NAME" -o jsonpath='{.spec.drivers[*].name}' 2>/dev/null) == *glusterfs.mountcontainers.io* ]] && break
		sleep 0.5
	done
	say "node plugin registered with the kubelet: CSINode $NODE_NAME lists $(K get csinode "$NODE_NAME" -o jsonpath='{.spec.drivers[*].name}')"
	say "controller (driver + external-provisioner) Ready; both find the tools only in the mount pod"

	step "A StorageClass (deploy/csi/glusterfs/storageclass-example.yaml, the bed's server) and a claim"
	sed -e "s/^  server: .*/  server: $NODE_NAME/" -e "s/^  volume: .*/  volume: gv0/" \
		deploy/csi/glusterfs/storageclass-example.yaml >"$WORK/storageclass.yaml"
	cat >"$WORK/claim.yaml" <<-YAML
		apiVersion: v1
		kind: PersistentVolumeClaim
		metadata: {name: demo-claim, namespace: $NS}
		spec:
		  accessModes: [ReadWriteMany]
		  storageClassName: glusterfs-csi
		  resources: {requests: {storage: 1Gi}}
	YAML
	grep -v '^ *#' "$WORK/storageclass.yaml" | sed 's/^/    | /'
	quiet K apply -f "$WORK/storageclass.yaml" -f "$WORK/claim.yaml"
	quiet K wait --for=jsonpath='{.status.phase}'=Bound -n "$NS" pvc/demo-claim --timeout=120s
	pv=$(K get pvc -n "$NS" demo-claim -o jsonpath='{.spec.volumeName}')
	subdir=$(K get pv "$pv" -o jsonpath='{.spec.csi.volumeAttributes.subdir}')
	say "claim demo-claim Bound to $pv: the directory $subdir of gv0, made by CreateVolume through the mount pod"

	step "Starting a workload pod with the claim"
	start_workload "      persistentVolumeClaim: {claimName: demo-claim}"
	brick_file=/bricks/gv0/$subdir/hello.txt
	dir=$(findmnt -rn -o TARGET -t fuse.glusterfs | grep -m1 "/plugins/kubernetes.io/csi/glusterfs.mountcontainers.io/.*/globalmount$" || true)
	dir_label="the staging mount ${dir#"$KUBELET_ROOT"/}"
else
	step "Starting a workload pod with a GlusterFS flexVolume"
	start_workload "      flexVolume:
        driver: mountcontainers.io/glusterfs
        options: {server: \"$NODE_NAME\", volume: gv0}"
	brick_file=/bricks/gv0/hello.txt
	dir=$KUBELET_ROOT/pods/$uid/volumes/mountcontainers.io~glusterfs/data
	dir_label=".../pods/$uid/volumes/mountcontainers.io~glusterfs/data"
fi

step "The workload writes and reads a file on the GlusterFS volume"
msg="hello from demo-workload at $(date +%T)"
# shellcheck disable=SC2016 # $1 is for the pod's sh.
got=$(K exec -n "$NS" demo-workload -- sh -c 'printf "%s\n" "$1" > /data/hello.txt && cat /data/hello.txt' sh "$msg")
say "wrote and read back: \"$got\""
[[ $got == "$msg" ]] || { echo "${R}read back differs${N}"; exit 1; }
brick=$(K exec -n "$NS" glusterfs-server -- cat "$brick_file")
say "on the server's brick, $brick_file: \"$brick\""
say "host mount table: $(findmnt -n -o SOURCE,FSTYPE "$dir" | tr -s ' ') at $dir_label"
# The pod's directory binds the node's mount of the volume (the driver's
# shared mounts, its default): the daemon names that mount, of the same
# device.
served=$dir
dev=$(findmnt -n -o MAJ:MIN "$dir" | head -1)
for node_mount in "$KUBELET_ROOT"/plugins/mountcontainers.io~glusterfs/shared/*; do
	if [[ -n $dev && -d $node_mount && $(findmnt -n -o MAJ:MIN "$node_mount" | head -1) == "$dev" ]]; then
		served=$node_mount
		say "the pod's directory is a bind of the node's mount of the volume at $node_mount, which the namespace's pods of the volume share"
	fi
done
pid=$(pgrep -f "glusterfs.*$served\$" | head -1 || true)
if [[ -n $pid ]]; then
	scope=$(grep -m1 -o '/[^:]*/mount-[0-9a-f]\{16\}$' "/proc/$pid/cgroup" || true)
	say "FUSE daemon: pid $pid, started through mount pod $mp, runs in its own scope ${scope:-(none)}:"
	say "outside the mount pod's container, so the mount outlives the pod (docs/scopes.md)"
fi

step "Does the host itself have mount.glusterfs?"
if host_tool=$(command -v mount.glusterfs); then
	say "${R}yes: $host_tool (this machine has a gluster client installed)${N}"
else
	say "${G}no${N}: mount.glusterfs is not on the host's PATH and no gluster package is installed"
	say "(the only copy on the host is the shim link $BED_DIR/shim-bin/mount.glusterfs, which runs it in the mount pod)"
fi

if [[ $KEEP == 1 ]]; then
	step "Leaving everything running (DEMO_KEEP=1)"
	cat <<-EOF
	    Look around:
	      source $BED_DIR/env
	      \$KUBECTL get pods -A -o wide
	      \$KUBECTL exec -n $NS demo-workload -- ls -l /data
	      \$KUBECTL exec -n mountcontainers $mp -- ps -ef
	      $BED_DIR/shim-bin/kubelet-exec-shim --registration-dir \$REGISTRATION_DIR --runtime-endpoint \$CRI_ENDPOINT status
	      findmnt -t fuse.glusterfs
	    Tear down:
	      test/bed/down.sh
	EOF
	echo
	echo "${G}${B}SUCCESS${N}: a pod got its GlusterFS volume through the mount pod on a node without mount.glusterfs ($(since "$t0") s)"
	rm -rf "$WORK"
	trap - EXIT
	exit 0
fi

step "Deleting the workload: the kubelet unmounts through the driver and the mount pod"
quiet K delete pod -n "$NS" demo-workload --wait --timeout=120s
if [[ $FLAVOR == csi ]]; then
	quiet K delete pvc -n "$NS" demo-claim --wait --timeout=120s
	for _ in $(seq 240); do K get pv "$pv" >/dev/null 2>&1 || break; sleep 0.5; done
	if K get pv "$pv" >/dev/null 2>&1; then echo "${R}    the volume $pv is still there${N}"; exit 1; fi
	if K exec -n "$NS" glusterfs-server -- test -e "/bricks/gv0/$subdir" 2>/dev/null; then echo "${R}    its directory is still on the brick${N}"; exit 1; fi
	say "claim deleted: DeleteVolume removed the directory $subdir from gv0"
fi
for _ in $(seq 100); do findmnt -n "$dir" >/dev/null 2>&1 || break; sleep 0.2; done
if findmnt -n "$dir" >/dev/null 2>&1; then echo "${R}    still mounted: $dir${N}"; exit 1; fi
say "unmounted; nothing left mounted"
echo "${D}    ... done in $(since "$step_start") s${N}"

echo
what="a GlusterFS volume"
[[ $FLAVOR == csi ]] && what="a claim the CSI driver provisioned on GlusterFS"
echo "${G}${B}SUCCESS${N}: a pod wrote and read $what, mounted through the mount pod, on a node without mount.glusterfs (demo $(since "$t0") s, teardown follows)"
