#!/usr/bin/env bash
# Runs `go test -fuzz` for each target of FUZZ_TARGETS and prints, per
# target, the executions run and the time taken (what `make fuzz` and
# `make fuzz-long` run; see "Fuzzing" in test/README.md).
#
#   FUZZ_TARGETS  package:Target[:count], separated by spaces
#   FUZZTIME      the count of a target that gives none (default 200000x)
#   FUZZ_ALL      when set, every target's -fuzztime: a count (1000000x) or
#                 a duration (10m)
#   FUZZLONG      when set, the long run: a number N runs each target N
#                 times its count; anything else is every target's -fuzztime
#   GO            the go command (default go)
#
# Counts rather than durations by default: Go 1.26's fuzz coordinator can
# fail a run with "context deadline exceeded" when a duration ends under
# load (go.dev/issue/75804).
set -euo pipefail

go=${GO:-go}
default=${FUZZTIME:-200000x}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fuzztime() { # count -> the -fuzztime of this run
	local count=$1
	if [ -n "${FUZZ_ALL:-}" ]; then
		echo "$FUZZ_ALL"
	elif [[ ${FUZZLONG:-} =~ ^[0-9]+$ && $count =~ ^([0-9]+)x$ ]]; then
		echo "$((BASH_REMATCH[1] * FUZZLONG))x"
	elif [ -n "${FUZZLONG:-}" ]; then
		echo "$FUZZLONG"
	else
		echo "$count"
	fi
}

rows=()
rc=0
total_start=$(date +%s.%N)
for t in ${FUZZ_TARGETS:?no FUZZ_TARGETS}; do
	IFS=: read -r pkg name count <<<"$t"
	ft=$(fuzztime "${count:-$default}")
	echo "fuzz $name ($pkg) for $ft"
	start=$(date +%s.%N)
	"$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$ft" "$pkg" 2>&1 | tee "$log" || rc=$?
	wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	# The coordinator's last line: "fuzz: elapsed: 12s, execs: 200000 (...)".
	last=$(grep -E '^fuzz: elapsed: [0-9]+s, execs: [0-9]+' "$log" | tail -1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	fuzzing=$(sed -nE 's/^fuzz: elapsed: ([0-9]+)s.*/\1/p' <<<"$last")
	result=ok
	[ "$rc" -eq 0 ] || result=FAIL
	rows+=("$name $pkg ${execs:--} ${fuzzing:--} $wall $result")
	[ "$rc" -eq 0 ] || break
done
total=$(awk -v s="$total_start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')

echo "fuzz summary ($(nproc) CPUs, ${total}s in all; seconds: fuzzing, and with the build):"
format='  %-24s %-22s %10s %8s %8s  %s\n'
# shellcheck disable=SC2059
printf "$format" target package execs fuzzing seconds result
for r in "${rows[@]}"; do
	# shellcheck disable=SC2059,SC2086
	printf "$format" $r
done
exit "$rc"
