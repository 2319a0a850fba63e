#!/bin/sh
# Start glusterd, create and start one distribute volume per name in
# $GLUSTER_VOLUMES (default gv0) with its brick at $GLUSTER_BRICK_ROOT/<name>
# on $GLUSTER_BRICK_HOST (default: the host name), touch /run/gluster-ready
# (the readiness probe's file), then wait on glusterd.
set -eu
volumes=${GLUSTER_VOLUMES:-gv0}
host=${GLUSTER_BRICK_HOST:-$(hostname)}
root=${GLUSTER_BRICK_ROOT:-/bricks}
rm -f /run/gluster-ready
mkdir -p /var/log/glusterfs "$root"

glusterd --no-daemon --log-level WARNING --log-file - &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid; exit 0' TERM INT

i=0
until gluster --mode=script pool list >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 150 ] || { echo "glusterd did not answer in 30 s" >&2; exit 1; }
	kill -0 $pid 2>/dev/null || { echo "glusterd exited" >&2; exit 1; }
	sleep 0.2
done
echo "glusterd up; brick host $host"

for v in $(echo "$volumes" | tr ',' ' '); do
	if ! gluster --mode=script volume info "$v" >/dev/null 2>&1; then
		mkdir -p "$root/$v"
		# force: the brick is on the root file system.
		gluster --mode=script volume create "$v" "$host:$root/$v" force
	fi
	gluster --mode=script volume start "$v" force
	echo "volume $v started: $host:$root/$v"
done
touch /run/gluster-ready
wait $pid
