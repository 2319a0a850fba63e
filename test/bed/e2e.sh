#!/usr/bin/env bash
# e2e.sh: the one entry point of the end-to-end tests (the Makefile calls it).
#   setup.sh (packages) -> build-kube.sh (cached) ->
#   images.sh all (cached) ->
#   go test -tags e2e ./test/e2e/... (the suite brings the bed up and down),
#   then TestNodes on a bed of three nodes (E2E_SUITES) ->
#   down.sh again and check-clean.sh (nothing of the bed is left on the host).
# Exits non-zero on any failure; prints timings and image sizes at the end.
# Environment: see test/README.md (BED_DIR, E2E_RUN, E2E_TIMEOUT, BED_KEEP, ...).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

[[ $EUID -eq 0 ]] || die "e2e.sh must run as root (it starts a kubelet and containerd)"
cd "$REPO_ROOT"
timings=()
now() { date +%s; }
step() {
	local name=$1 t0 rc=0
	shift
	log "=== $name"
	t0=$(now)
	"$@" || rc=$?
	timings+=("$(printf '%-32s %5ss%s' "$name" "$(($(now) - t0))" "$( ((rc == 0)) || echo " (FAILED, exit $rc)")")")
	return "$rc"
}

# One bed at a time: a second run would tear the first one's bed down.
runlock=${MC_E2E_PIDFILE:-/run/mountcontainers-e2e.pid}
if other=$(cat "$runlock" 2>/dev/null) && [[ $other != "$$" ]] && kill -0 "$other" 2>/dev/null; then
	die "another test/bed/e2e.sh (pid $other) is running; one bed at a time on a machine"
fi
echo "$$" >"$runlock"

snapshot=$(mktemp "${TMPDIR:-/tmp}/mc-e2e-sysctl.XXXXXX")
# What the suites print, kept for the digest of failures at the very end.
gotest_out=$(mktemp "${TMPDIR:-/tmp}/mc-e2e-gotest.XXXXXX")
status=0
finish() {
	local rc=$?
	((status != 0)) || status=$rc
	trap - EXIT INT TERM
	if [[ ${BED_KEEP:-0} != 1 ]]; then
		log "=== teardown check"
		"$here/down.sh" || status=1
		if ! "$here/check-clean.sh" "$snapshot"; then
			status=1
		fi
	fi
	rm -f "$snapshot" "$snapshot.paths"
	[[ $(cat "$runlock" 2>/dev/null) == "$$" ]] && rm -f "$runlock"
	log "=== timings"
	for t in "${timings[@]}"; do printf '  %s\n' "$t" >&2; done
	[[ -f $BED_DIR/logs/timings ]] && sed 's/^/  /' "$BED_DIR/logs/timings" >&2
	log "=== images"
	"$here/images.sh" sizes 2>/dev/null | sed 's/^/  /' >&2 || true
	if ((status == 0)); then
		log "e2e: PASS"
	else
		# Last, where a reader of a long log looks first: what the
		# failed tests said.
		"$here/failures.sh" "$gotest_out" >&2 || true
		log "e2e: FAIL (exit $status; component logs in $BED_DIR/logs)"
	fi
	rm -f "$gotest_out"
	exit "$status"
}
trap finish EXIT
# On SIGINT/SIGTERM stop the suite first (its TestMain tears the bed down), then
# finish. The suite runs in its own process group and in the background,
# because bash runs traps only once a foreground command has ended.
suite_pid=
on_signal() {
	status=130
	if [[ -n $suite_pid ]]; then
		log "interrupted: stopping the e2e suite"
		kill -TERM -- "-$suite_pid" 2>/dev/null
		wait "$suite_pid" 2>/dev/null
	fi
	exit 130
}
trap on_signal INT TERM
run_suite() {
	# The suite's output goes to the terminal and to $gotest_out; the exit
	# status is the suite's. tee ignores the signals that stop the suite,
	# which still writes while it tears the bed down.
	setsid bash -c '"$@" 2>&1 | (trap "" INT TERM && exec tee -a "$0"); exit "${PIPESTATUS[0]}"' "$gotest_out" "$@" &
	suite_pid=$!
	wait "$suite_pid"
}

step "setup (packages)" "$here/setup.sh"
# A bed left over from an interrupted run would spoil the host snapshot.
if [[ -e $BED_DIR/env || -e $BED_DIR/state ]] || bed_leftovers; then
	"$here/down.sh"
fi
step "build kubernetes $(kube_version)" "$here/build-kube.sh" >/dev/null
step "images" "$here/images.sh" all
# After the builds: buildah creates /etc/cni/net.d on its first run, which is
# the image builder's doing, not the bed's.
"$here/sysctl-snapshot.sh" "$snapshot"

# Two suites, each on a bed of its own (E2E_SUITES picks): "one", every test
# on a bed of one node; "nodes", TestNodes on a bed of three (build tag
# e2e_nodes, BED_NODES=3). E2E_RUN or E2E_TAGS (e2e_load is the load test,
# make e2e-load) narrow the first and leave the second out unless E2E_SUITES
# names it.
if [[ -n ${E2E_RUN:-}${E2E_TAGS:-} ]]; then
	suites=${E2E_SUITES:-one}
else
	suites=${E2E_SUITES:-one nodes}
fi
rc=0
for suite in $suites; do
	case $suite in
	one)
		gotest=(go test -tags "e2e${E2E_TAGS:+,$E2E_TAGS}" -count=1 -v -timeout "${E2E_TIMEOUT:-60m}")
		[[ -z ${E2E_RUN:-} ]] || gotest+=(-run "$E2E_RUN")
		step "e2e suite (bed up+tests+down)" run_suite env BED_NODES=1 "${gotest[@]}" ./test/e2e/... || rc=$?
		;;
	nodes)
		step "e2e suite, 3 nodes (TestNodes)" run_suite env BED_NODES=3 \
			go test -tags e2e,e2e_nodes -count=1 -v -timeout "${E2E_TIMEOUT:-60m}" -run '^TestNodes$' ./test/e2e/ || rc=$?
		;;
	*) die "E2E_SUITES: unknown suite $suite (one, nodes)" ;;
	esac
	# The next suite's bed would replace this one's component logs.
	((rc == 0)) || break
done
exit "$rc"
