#!/usr/bin/env bash
# containerd.sh: a private containerd for the real-runtime tests and benchmarks
# of pkg/exec, without Kubernetes (root only).
#
#   containerd.sh start DIR PAUSE_ARCHIVE IMAGE_ARCHIVE...   start, import, print env
#   containerd.sh stop DIR                                   stop and clean DIR
#
# start prints the variables the tests read:
#   MC_TEST_CRI_ENDPOINT=unix://DIR/containerd.sock
#   MC_TEST_PAUSE_IMAGE, MC_TEST_IMAGE (the first image archive's name; it
#   needs /bin/sh)
set -euo pipefail

cmd=${1:?usage: containerd.sh start|stop DIR ...}
dir=${2:?missing DIR}

image_name() { # the image name inside an OCI archive
	tar -xOf "$1" index.json | python3 -c '
import json, sys
m = json.load(sys.stdin)["manifests"][0].get("annotations", {})
print(m.get("io.containerd.image.name") or m["org.opencontainers.image.ref.name"])'
}

case $cmd in
start)
	pause=${3:?missing PAUSE_ARCHIVE}
	shift 3
	mkdir -p "$dir"/{root,state,runc}
	dir=$(cd "$dir" && pwd)
	pause_image=$(image_name "$pause")
	containerd config default >"$dir/config.toml.default"
	python3 - "$dir" "$pause_image" >"$dir/config.toml" <<'PY'
import re, sys
d, pause = sys.argv[1], sys.argv[2]
s = open(d + "/config.toml.default").read()
s = re.sub(r'(?m)^root = .*$', f'root = "{d}/root"', s)
s = re.sub(r'(?m)^state = .*$', f'state = "{d}/state"', s)
s = re.sub(r'(?ms)^(\[grpc\].*?)^  address = .*?$', lambda m: m.group(1) + f'  address = "{d}/containerd.sock"', s, count=1)
s = re.sub(r'(?m)^(\s*)restrict_oom_score_adj = .*$', r'\1restrict_oom_score_adj = true', s)
s = re.sub(r'(?m)^(\s*)sandbox_image = .*$', rf'\1sandbox_image = "{pause}"', s)
s = re.sub(r'(?m)^(\s*)netns_mounts_under_state_dir = .*$', r'\1netns_mounts_under_state_dir = true', s)
s = re.sub(r'(?m)^(\s*)Root = ""$', lambda m: m.group(1) + f'Root = "{d}/runc"', s)  # runc root
s = re.sub(r'(?ms)^(\[debug\].*?)^  address = .*?$', lambda m: m.group(1) + '  address = ""', s, count=1)
s = re.sub(r'(?ms)^(\[ttrpc\].*?)^  address = .*?$', lambda m: m.group(1) + '  address = ""', s, count=1)
s = re.sub(r'(?ms)^(\[metrics\].*?)^  address = .*?$', lambda m: m.group(1) + '  address = ""', s, count=1)
print(s)
PY
	# Refuse to start on the system's default paths if the rewrite failed.
	grep -q "^root = \"$dir/root\"" "$dir/config.toml" && grep -q "address = \"$dir/containerd.sock\"" "$dir/config.toml" || {
		echo "config rewrite failed" >&2
		exit 1
	}
	containerd --config "$dir/config.toml" >"$dir/containerd.log" 2>&1 &
	echo $! >"$dir/containerd.pid"
	for _ in $(seq 100); do [[ -S $dir/containerd.sock ]] && break; sleep 0.1; done
	ctr -a "$dir/containerd.sock" -n k8s.io images import "$pause" >/dev/null
	first=
	for a in "$@"; do
		ctr -a "$dir/containerd.sock" -n k8s.io images import "$a" >/dev/null
		[[ -n $first ]] || first=$(image_name "$a")
	done
	echo "MC_TEST_CRI_ENDPOINT=unix://$dir/containerd.sock"
	echo "MC_TEST_PAUSE_IMAGE=$pause_image"
	echo "MC_TEST_IMAGE=$first"
	;;
stop)
	dir=$(cd "$dir" && pwd)
	if [[ -f $dir/containerd.pid ]]; then
		pid=$(cat "$dir/containerd.pid")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	fi
	# Shims and containers outlive containerd; kill those of this instance.
	for p in $(pgrep -f "containerd-shim.*-address $dir/containerd.sock" || true); do kill -9 "$p" 2>/dev/null || true; done
	grep -F " $dir/" /proc/self/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$dir"
	;;
*)
	echo "unknown command $cmd" >&2
	exit 2
	;;
esac
