package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// summarise runs the summariser over a file of testdata (go test -json of a
// scratch module) and returns its output, summary and digest.
func summarise(t *testing.T, name, module string, verbose bool) (out, summary, digest string, failures []failure) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var o, s, d bytes.Buffer
	r := newRun(options{verbose: verbose, entries: 6, lines: 100, module: module}, &o)
	if err := r.read(f); err != nil {
		t.Fatal(err)
	}
	failures = r.failures()
	r.writeSummary(&s, failures)
	r.writeDigest(&d, failures)
	return o.String(), s.String(), d.String(), failures
}

func TestDigest(t *testing.T) {
	_, summary, digest, failures := summarise(t, "failures.json", "example.com/tsx", false)
	// A failed subtest (not its parent, which logged nothing after it), a
	// panic, a timeout, a build failure.
	want := `--- FAIL: TestFail/sub (./a, 0.00s)
    a_test.go:22: sub progress
    a_test.go:23: sub failed: [+2 lines]
--- FAIL: TestPanic (./a, 0.00s)
    panic: assignment to entry in nil map [recovered, repanicked]
    a_test.go:29: before panic
--- DID NOT FINISH: TestHang (./b)
    panic: test timed out after 3s
    b_test.go:8: hanging
--- FAIL: ./c [build failed]
    c/c_test.go:5:32: undefined: undefined
`
	if digest != want {
		t.Errorf("digest:\n%s\nwant:\n%s", digest, want)
	}
	if len(failures) != 4 {
		t.Errorf("%d failures, want 4", len(failures))
	}
	for _, s := range []string{
		"=== testsummary: FAIL: 3 failed tests, 3 failed packages (of 3; 2 tests passed, 0 skipped)\n",
		"    a_test.go:23: sub failed:\n        line two\n        line three\n",
	} {
		if !strings.Contains(summary, s) {
			t.Errorf("summary lacks %q:\n%s", s, summary)
		}
	}
}

func TestParentsAndDumps(t *testing.T) {
	out, summary, digest, _ := summarise(t, "parents.json", "example.com/tsy", false)
	// The subtest first, then its parent for what it logged after it; a
	// helper's multi-line dump is a line in the summary and not in the
	// digest; a package that failed in TestMain says why.
	want := `--- FAIL: TestSuite/first (./d, 0.00s)
    d_test.go:13: step 1
    d_test.go:14: mount did not come back within 2m: Transport endpoint is not connected
--- FAIL: TestSuite (./d, 0.00s)
    d_test.go:17: between subtests
    d_test.go:18: teardown: 1 mount left behind
--- FAIL: TestLong (./d, 0.00s)
    d_test.go:22: long: ` + strings.Repeat("x", 300-len("d_test.go:22: long: ")) + ` [...]
--- FAIL: ./e (0.0s; no test failed)
    framework: down.sh: exit status 1
`
	if digest != want {
		t.Errorf("digest:\n%s\nwant:\n%s", digest, want)
	}
	if !strings.Contains(summary, "    helper.go:9: kubectl get pods -n x -o wide: [3 more lines]\n") {
		t.Errorf("summary does not shorten the dump:\n%s", summary)
	}
	if !strings.Contains(summary, "(of 3; 2 tests passed, 2 skipped)") {
		t.Errorf("summary miscounts:\n%s", summary)
	}
	// Without -v: a passing package is its line; a failed one its output
	// but that of its passing tests and the === lines.
	if !strings.Contains(out, "ok  \texample.com/tsy/f") || strings.Contains(out, "quiet") || strings.Contains(out, "=== RUN") {
		t.Errorf("output without -v:\n%s", out)
	}
	if !strings.Contains(out, "--- FAIL: TestSuite/first") {
		t.Errorf("output without -v lacks the failed test:\n%s", out)
	}
}

func TestVerbosePassesEverythingOn(t *testing.T) {
	out, _, _, _ := summarise(t, "parents.json", "", true)
	for _, s := range []string{"=== RUN   TestSuite\n", "    f_test.go:5: quiet\n", "--- SKIP: TestSkipped"} {
		if !strings.Contains(out, s) {
			t.Errorf("output with -v lacks %q", s)
		}
	}
}

func TestPassAndOtherInput(t *testing.T) {
	in := `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n    a_test.go:1: par"}
{"Action":"output","Package":"p","Test":"TestA","Output":"tial\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}
{"Action":"pass","Package":"p"}
`
	var out, summary bytes.Buffer
	r := newRun(options{entries: 6, lines: 100}, &out)
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if f := r.failures(); len(f) != 0 {
		t.Fatalf("failures %v, want none", f)
	}
	r.writeSummary(&summary, nil)
	if got, want := out.String(), "go: downloading example.com/x v1.0.0\nok  \tp\t0.1s\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	if got := r.pkgs["p"].tests["TestA"].lines[1]; got != "    a_test.go:1: partial" {
		t.Errorf("a line cut in two reads %q", got)
	}
	if got, want := summary.String(), "testsummary: PASS: 1 packages, 1 tests passed, 0 skipped\n"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

func TestInterrupted(t *testing.T) {
	// go test stopped (a signal) before the package ended: what ran is a
	// failure, as is nothing at all.
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
`
	r := newRun(options{entries: 6, lines: 100}, &bytes.Buffer{})
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	var d bytes.Buffer
	r.writeDigest(&d, r.failures())
	if got, want := d.String(), "--- DID NOT FINISH: TestA (p)\n"; got != want {
		t.Errorf("digest %q, want %q", got, want)
	}
	none := newRun(options{}, &bytes.Buffer{})
	if err := none.read(strings.NewReader("go: updates to go.mod needed\n")); err != nil || none.events != 0 {
		t.Fatalf("no events: %v, %d events", err, none.events)
	}
	d.Reset()
	none.writeDigest(&d, nil)
	if got, want := d.String(), "--- FAIL: no go test -json events on the input\n    go: updates to go.mod needed\n"; got != want {
		t.Errorf("digest %q, want %q", got, want)
	}
}
