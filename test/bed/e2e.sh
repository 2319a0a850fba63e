#!/usr/bin/env bash
# e2e.sh: the one entry point of the end-to-end tests (the Makefile calls it).
#   setup.sh (packages) -> build-kube.sh, build-sidecars.sh (cached) ->
#   images.sh all (cached) -> go test -c (the suite's compile) ->
#   go test -tags e2e -json ./test/e2e/... | testsummary -v (the suite brings
#   the bed up and down; when a test failed, test/bed/diagnose.sh first),
#   then TestNodes on a bed of three nodes, then Kubernetes' External Storage
#   suite against the CSI drivers (TestConformance, e2e.test built by
#   build-e2e-test.sh, cached) on a bed of one (E2E_SUITES) ->
#   down.sh again and check-clean.sh (nothing of the bed is left on the host).
# Exits non-zero on any failure; prints timings and image sizes at the end,
# and after a failure, last of all, the bed when the suite failed
# (diagnose.sh's summary) and what the failed tests logged.
# Environment: see test/README.md (BED_DIR, E2E_RUN, E2E_TIMEOUT, BED_KEEP, ...);
# for .ci/run, E2E_STAGES=FILE appends "stage<TAB>seconds<TAB>result" per
# step to FILE, and TEST_DIGEST=FILE a short digest of the failed tests.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

[[ $EUID -eq 0 ]] || die "e2e.sh must run as root (it starts a kubelet and containerd)"
cd "$REPO_ROOT"
timings=()
now() { date +%s; }
# stage KEY SECONDS RESULT: a line of .ci/run's table (E2E_STAGES).
stage() {
	[[ -z ${E2E_STAGES:-} ]] || printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$E2E_STAGES"
}
# step KEY NAME COMMAND...: run COMMAND, timed.
step() {
	local key=$1 name=$2 t0 rc=0
	shift 2
	log "=== $name"
	t0=$(now)
	"$@" || rc=$?
	timings+=("$(printf '%-32s %5ss%s' "$name" "$(($(now) - t0))" "$( ((rc == 0)) || echo " (FAILED, exit $rc)")")")
	stage "$key" "$(($(now) - t0))" "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")"
	return "$rc"
}

# One bed at a time: a second run would tear the first one's bed down.
runlock=${MC_E2E_PIDFILE:-/run/mountcontainers-e2e.pid}
if other=$(cat "$runlock" 2>/dev/null) && [[ $other != "$$" ]] && kill -0 "$other" 2>/dev/null; then
	die "another test/bed/e2e.sh (pid $other) is running; one bed at a time on a machine"
fi
echo "$$" >"$runlock"

snapshot=$(mktemp "${TMPDIR:-/tmp}/mc-e2e-sysctl.XXXXXX")
# testsummary, and what is printed last after a failure: the failed suite's
# summary of its failed tests, and diagnose.sh's summary of the bed.
work=$(mktemp -d "${TMPDIR:-/tmp}/mc-e2e.XXXXXX")
testsummary=$work/testsummary
failures=$work/failures
export DIAGNOSE_SUMMARY=$work/diagnose-summary
status=0
finish() {
	local rc=$? t0 clean=ok
	((status != 0)) || status=$rc
	trap - EXIT INT TERM
	# e2e.test's build beside the suites, when the conformance suite did
	# not run: it ends with this run.
	[[ -z ${e2e_build_pid:-} ]] || kill -- "-$e2e_build_pid" 2>/dev/null || true
	# The suite's compile beside the images, when a step before its end failed.
	[[ -z ${tests_build_pid:-} ]] || kill -- "-$tests_build_pid" 2>/dev/null || true
	if [[ ${BED_KEEP:-0} != 1 ]]; then
		log "=== teardown check"
		t0=$(now)
		"$here/down.sh" || clean=FAILED
		"$here/check-clean.sh" "$snapshot" || clean=FAILED
		stage teardown "$(($(now) - t0))" "$clean"
		[[ $clean == ok ]] || status=1
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
		# Last, where a reader of a long log looks first: the bed when
		# the suite failed, and what the failed tests said.
		[[ ! -s $DIAGNOSE_SUMMARY ]] || cat "$DIAGNOSE_SUMMARY" >&2
		[[ ! -s $failures ]] || cat "$failures" >&2
		log "e2e: FAIL (exit $status; component logs in $BED_DIR/logs)"
	fi
	rm -rf "$work"
	exit "$status"
}
trap finish EXIT
# On SIGINT/SIGTERM stop the suite first (its TestMain tears the bed down), then
# finish. The suite runs in its own process group and in the background,
# because bash runs traps only once a foreground command has ended. It gets
# SIGINT: go test and testsummary ignore it and pass on what the suite
# prints while it tears the bed down (SIGTERM would end go test, and the
# suite's output with it).
suite_pid=
on_signal() {
	status=130
	if [[ -n $suite_pid ]]; then
		log "interrupted: stopping the e2e suite"
		kill -INT -- "-$suite_pid" 2>/dev/null
		wait "$suite_pid" 2>/dev/null
	fi
	exit 130
}
trap on_signal INT TERM
# run_suite NODES GO_TEST_ARGS...: go test -json on a bed of NODES nodes,
# through testsummary -v (it prints what go test -v would), which keeps its
# summary of the failures for the end ($failures) and appends a short one to
# $TEST_DIGEST. The exit status is go test's, else testsummary's.
run_suite() {
	local nodes=$1
	shift
	rm -f "$failures" "$DIAGNOSE_SUMMARY"
	# shellcheck disable=SC2016 # expanded by the inner bash.
	setsid bash -c 'tool=$1 out=$2 digest=$3; shift 3
		"$@" 2>&1 | "$tool" -v -entries 5 -lines 30 -summary "$out" ${digest:+-digest "$digest"}
		s=("${PIPESTATUS[@]}"); ((s[0] != 0)) && exit "${s[0]}"; exit "${s[1]}"' \
		_ "$testsummary" "$failures" "${TEST_DIGEST:-}" env BED_NODES="$nodes" BED_FLAVOR="${suite_flavor:-default}" go test -json "$@" &
	suite_pid=$!
	wait "$suite_pid"
}
# after_failure: the framework runs diagnose.sh when a test failed, before
# its teardown; when the suite failed without (a timeout or a crash ended
# go test first, the bed did not come up), run it now: the bed may still be
# up, and its logs outlive it.
after_failure() {
	[[ -s $DIAGNOSE_SUMMARY ]] || "$here/diagnose.sh" >&2 || true
}

step setup "setup (packages)" "$here/setup.sh"
# A bed left over from an interrupted run would spoil the host snapshot.
if [[ -e $BED_DIR/env || -e $BED_DIR/state ]] || bed_leftovers; then
	"$here/down.sh"
fi
step build-kube "build kubernetes $(kube_version)" "$here/build-kube.sh" >/dev/null
# The CSI sidecars, against Kubernetes' libraries: seconds after its build.
step build-sidecars "build CSI sidecars" "$here/build-sidecars.sh" >/dev/null
# The suite's test binary, compiled before the suites (their go test then
# only links it): cold, beside the stages .ci/run starts once the builds are
# done, this compile took minutes longer, and vet compiled the same packages
# again beside it. It runs beside the image builds, which mostly fetch and
# unpack packages (cold, 210 s of compile after 200 s of images, one after
# the other); the build-tests step is what is left of it after them.
setsid go test -c -tags "e2e${E2E_TAGS:+,$E2E_TAGS}" -o "$work/tests/" ./test/e2e/... >"$work/build-tests.log" 2>&1 &
tests_build_pid=$!
step images "images" "$here/images.sh" all
step build-tools "build testsummary" go build -o "$testsummary" ./test/tools/testsummary
wait_tests_build() {
	local rc=0
	wait "$tests_build_pid" || rc=$?
	tests_build_pid=
	((rc == 0)) || { cat "$work/build-tests.log" >&2; log "go test -c ./test/e2e/... failed (exit $rc)"; }
	return "$rc"
}
step build-tests "build the e2e suite (its rest)" wait_tests_build
# After the builds: buildah creates /etc/cni/net.d on its first run, which is
# the image builder's doing, not the bed's.
"$here/sysctl-snapshot.sh" "$snapshot"
# Built: .ci/run starts the stages it runs beside the suites now.
[[ -z ${E2E_BUILT:-} ]] || touch "$E2E_BUILT"

# Three suites, each on a bed of its own (E2E_SUITES picks): "one", every
# test on a bed of one node; "nodes", TestNodes on a bed of three (build tag
# e2e_nodes, BED_NODES=3); "conformance", TestConformance (build tag
# e2e_conformance; CONFORMANCE_SET=all is make conformance). A fourth,
# "systemd", runs only when named (make e2e-systemd): the tests that
# depend on the node's layout on a node with systemd as PID 1
# (BED_FLAVOR=systemd, build tag e2e_systemd). E2E_RUN or
# E2E_TAGS (e2e_load is the load test, make e2e-load) narrow the first and
# leave the others out unless E2E_SUITES names them.
if [[ -n ${E2E_RUN:-}${E2E_TAGS:-} ]]; then
	suites=${E2E_SUITES:-one}
else
	suites=${E2E_SUITES:-one nodes conformance}
fi
# go test's timeouts (of the tests, the bed's coming up and going aside) end
# a hang with Go's goroutine dump well before CI's 90 minutes: the suites
# take about 11 and 5 minutes. The one-node suite's is 40 minutes: cold,
# on a machine where a process started three times slower than usual (a
# Go program that prints a line: 10 ms of CPU against 3), with e2e.test's
# build, verify and the unit tests compiling beside it, it was still
# running its last tests after 30 (2026-11-29).
# Cold, e2e.test's build (about 4 minutes of both cores after Kubernetes':
# the External Storage part only, test/cluster/e2e-storage) runs beside the one-node
# suite, which mostly waits on its Kubernetes: one after the other, it was
# 208 s of a cold .ci/run's 47 min 39 s. The conformance step's build-e2e-test.sh then
# waits for it (its lock) and finds it cached; a build that failed here is
# done again there, its errors in the step's output.
e2e_build_pid=
if [[ " $suites " == *" one "* && " $suites " == *" conformance "* ]]; then
	setsid "$here/build-e2e-test.sh" >"$work/build-e2e-test.log" 2>&1 &
	e2e_build_pid=$!
fi
# The systemd suite's tests: those whose proof depends on the node's layout.
systemd_tests='^(TestSystemdNode|TestSystemdCephFS|TestScopes|TestRecovery)$'
rc=0
for suite in $suites; do
	case $suite in
	one) key=one-node ;;
	nodes) key=three-node ;;
	conformance) key=conformance ;;
	systemd) key=systemd-node ;;
	*) die "E2E_SUITES: unknown suite $suite (one, nodes, conformance, systemd)" ;;
	esac
	if ((rc != 0)); then
		# The next suite's bed would replace this one's component logs.
		stage "$key" - "not run"
		continue
	fi
	case $suite in
	one)
		gotest=(-tags "e2e${E2E_TAGS:+,$E2E_TAGS}" -count=1 -v -timeout "${E2E_TIMEOUT:-40m}")
		[[ -z ${E2E_RUN:-} ]] || gotest+=(-run "$E2E_RUN")
		step "$key" "e2e suite (bed up+tests+down)" run_suite 1 "${gotest[@]}" ./test/e2e/... || rc=$?
		;;
	systemd)
		suite_flavor=systemd step "$key" "e2e suite, systemd node (scopes as systemd units)" run_suite 1 -tags e2e,e2e_systemd -count=1 -v \
			-timeout "${E2E_SYSTEMD_TIMEOUT:-${E2E_TIMEOUT:-25m}}" -run "${E2E_SYSTEMD_RUN:-$systemd_tests}" ./test/e2e/ || rc=$?
		;;
	nodes)
		step "$key" "e2e suite, 3 nodes (TestNodes)" run_suite 3 -tags e2e,e2e_nodes -count=1 -v \
			-timeout "${E2E_NODES_TIMEOUT:-${E2E_TIMEOUT:-20m}}" -run '^TestNodes$' ./test/e2e/ || rc=$?
		;;
	conformance)
		# Kubernetes' External Storage suite against the CSI drivers
		# (CONFORMANCE_SET=all: everything they qualify for; make
		# conformance). e2e.test first (cached by its version), so that
		# the suite's time is the suite's.
		if [[ -n $e2e_build_pid ]]; then
			wait "$e2e_build_pid" || { log "e2e.test's build beside the suites failed; building it again:"; tail -n 20 "$work/build-e2e-test.log" >&2; }
			e2e_build_pid=
		fi
		step build-e2e-test "build e2e.test $(kube_version)" "$here/build-e2e-test.sh" >/dev/null || rc=$?
		((rc == 0)) || { after_failure; continue; }
		# -parallel 4: two drivers, two exec paths each, at once (go test's
		# default is GOMAXPROCS, 2 here). Everything (make conformance,
		# CONFORMANCE_SET=all) in two passes: all but the [Serial] specs
		# the same way, then those one run at a time: they make
		# cluster-wide objects (a CustomResourceDefinition of one name)
		# that runs at once share.
		conformance_pass() {
			CONFORMANCE_SET=$1 run_suite 1 -tags e2e,e2e_conformance -count=1 -v -parallel "$2" \
				-timeout "${E2E_CONFORMANCE_TIMEOUT:-100m}" -run '^TestConformance$' ./test/e2e/
		}
		if [[ ${CONFORMANCE_SET:-} == all ]]; then
			step "$key" "conformance (External Storage), all but [Serial]" conformance_pass all-but-serial 4 || rc=$?
			((rc != 0)) || step "$key-serial" "conformance (External Storage), [Serial]" conformance_pass serial 1 || rc=$?
		else
			parallel=4
			[[ ${CONFORMANCE_SET:-} != serial ]] || parallel=1
			step "$key" "conformance (External Storage)" conformance_pass "${CONFORMANCE_SET:-every-run}" "$parallel" || rc=$?
		fi
		;;
	esac
	((rc == 0)) || after_failure
done
exit "$rc"
