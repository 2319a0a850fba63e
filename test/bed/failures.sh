#!/usr/bin/env bash
# failures.sh FILE: from the output of `go test -v` in FILE, print what every
# failed test logged, test by test: its last log entries (the file:line
# lines of t.Log, t.Error and t.Fatal, each cut to 600 characters, without
# all but the first 3 lines that continue each, such as component logs
# dumped on failure).
# e2e.sh prints it last, so that a failure's cause is at the end of a long
# run's output, where a reader (or CI's excerpt) looks first.
set -euo pipefail

file=${1:?usage: failures.sh GO_TEST_OUTPUT}
[[ -r $file ]] || exit 0
awk -v per_test="${FAILURES_PER_TEST:-25}" '
# "=== RUN   TestX/sub", "=== NAME  TestX", "=== CONT  TestX": what follows
# is that test'"'"'s output.
/^=== (RUN|NAME|CONT|PAUSE) / { cur = $3; next }
# "--- FAIL: TestX/sub (1.00s)", at any depth.
/^ *--- FAIL: / {
	name = $3
	if (!(name in failed)) { failed[name] = 1; order[++nfailed] = name }
	next
}
# A log entry: "    file_test.go:123: message".
/^    +[A-Za-z0-9_.-]+\.go:[0-9]+: / {
	if (cur == "") next
	line = $0
	sub(/^ +/, "", line)
	if (length(line) > 600) line = substr(line, 1, 600) " [...]"
	n = ++count[cur]
	entry[cur, n] = line
	more = 0
	next
}
# A line that continues the entry above it (indented deeper).
/^        / {
	if (cur == "" || count[cur] == 0 || ++more > 3) next
	line = $0
	sub(/^ +/, "", line)
	if (length(line) > 300) line = substr(line, 1, 300) " [...]"
	entry[cur, count[cur]] = entry[cur, count[cur]] "\n        " line
}
END {
	if (nfailed == 0) exit
	print "=== failed tests, with the last " per_test " log entries of each"
	for (i = 1; i <= nfailed; i++) {
		name = order[i]
		print "--- " name
		first = count[name] - per_test + 1
		if (first < 1) first = 1
		if (first > 1) print "    [" first - 1 " earlier entries left out]"
		for (n = first; n <= count[name]; n++) print "    " entry[name, n]
		if (count[name] == 0) print "    (no log entries of its own)"
	}
}' "$file"
