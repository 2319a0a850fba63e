// Command testsummary reads `go test -json` on its standard input, prints it
// as text, and ends with a summary of what failed: every failed test with
// its package and its last log entries (t.Log, t.Error, t.Fatal), a test
// that did not finish (a timeout, a panic) with its panic line, and a
// package that failed without a failed test (a build error, TestMain) with
// the lines that say why. It exits 1 when anything failed or nothing was
// read, so that under `set -o pipefail`
//
//	go test -json ./... 2>&1 | testsummary [-v] [-entries N] [-lines N] [-summary FILE] [-digest FILE]
//
// fails as go test would. Without -v it prints what `go test` prints
// without it (a line per package, the output of the failed tests); with -v
// everything, as `go test -v` does. -summary writes the summary to a file
// instead of the standard output (for a caller that prints it later),
// -digest appends a short one (a line or two per failure) to a file.
// It ignores SIGINT and SIGTERM and reads until its input ends, so that an
// interrupted go test still gets its summary.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

func main() {
	var o options
	flag.BoolVar(&o.verbose, "v", false, "print every test's output, as go test -v does")
	flag.IntVar(&o.entries, "entries", 6, "log entries per failed test in the summary")
	flag.IntVar(&o.lines, "lines", 100, "at most this many lines of summary")
	summaryFile := flag.String("summary", "", "write the summary to this file instead of the standard output")
	digestFile := flag.String("digest", "", "append a short digest of the failures to this file")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... 2>&1 | testsummary [flags]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	signal.Ignore(os.Interrupt, syscall.SIGTERM)

	o.module = modulePath()
	r := newRun(o, os.Stdout)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
	}
	failures := r.failures()

	summary := os.Stdout
	if *summaryFile != "" {
		f, err := os.Create(*summaryFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		} else {
			defer f.Close()
			summary = f
		}
	}
	r.writeSummary(summary, failures)
	failed := len(failures) > 0 || r.events == 0
	if *digestFile != "" && failed {
		if err := appendDigest(*digestFile, r, failures); err != nil {
			fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		}
	}
	if failed {
		os.Exit(1)
	}
}

func appendDigest(path string, r *run, failures []failure) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	r.writeDigest(f, failures)
	return f.Close()
}

type options struct {
	verbose bool
	entries int    // log entries per failed test in the summary
	lines   int    // lines of summary at most
	module  string // the module of the working directory, for short package names
}

// event is one line of `go test -json` (go doc test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string // a package's fail
}

type test struct {
	name    string
	result  string // pass, fail, skip; "" while it runs
	elapsed float64
	lines   []string
	at      []int // where each line is in its package's lines
}

type pkg struct {
	path        string
	result      string
	elapsed     float64
	tests       map[string]*test
	order       []*test // as they started
	ended       []*test // as they ended
	lines       []line  // everything, in order, for the output without -v
	pending     map[string]string
	failedBuild string
}

type line struct {
	test *test // nil: the package's own output
	text string
}

type run struct {
	o        options
	out      io.Writer
	events   int
	pkgs     map[string]*pkg
	order    []*pkg
	builds   map[string][]string // build output by import path
	other    []string            // lines that were not JSON
	npassed  int
	nskipped int
}

func newRun(o options, out io.Writer) *run {
	return &run{o: o, out: out, pkgs: map[string]*pkg{}, builds: map[string][]string{}}
}

func (r *run) read(in io.Reader) error {
	br := bufio.NewReaderSize(in, 1<<20)
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			r.handle(b)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	for _, p := range r.order {
		p.flush()
	}
	return nil
}

func (r *run) handle(b []byte) {
	var e event
	if b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		// What go test printed itself (to its standard error): pass on.
		fmt.Fprint(r.out, string(b))
		r.other = append(r.other, strings.TrimRight(string(b), "\n"))
		return
	}
	r.events++
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
		r.builds[e.ImportPath] = append(r.builds[e.ImportPath], strings.TrimRight(e.Output, "\n"))
		return
	case "build-fail":
		return
	}
	if e.Package == "" {
		return
	}
	p := r.pkg(e.Package)
	var t *test
	if e.Test != "" {
		t = p.test(e.Test)
	}
	switch e.Action {
	case "output":
		if r.o.verbose {
			fmt.Fprint(r.out, e.Output)
		}
		p.output(t, e.Output)
	case "pass", "fail", "skip":
		if t != nil {
			t.result, t.elapsed = e.Action, e.Elapsed
			p.ended = append(p.ended, t)
			switch e.Action {
			case "pass":
				r.npassed++
			case "skip":
				r.nskipped++
			}
			return
		}
		p.result, p.elapsed, p.failedBuild = e.Action, e.Elapsed, e.FailedBuild
		p.flush()
		if !r.o.verbose {
			r.printPackage(p)
		}
	}
}

func (r *run) pkg(path string) *pkg {
	p := r.pkgs[path]
	if p == nil {
		p = &pkg{path: path, tests: map[string]*test{}, pending: map[string]string{}}
		r.pkgs[path] = p
		r.order = append(r.order, p)
	}
	return p
}

func (p *pkg) test(name string) *test {
	t := p.tests[name]
	if t == nil {
		t = &test{name: name}
		p.tests[name] = t
		p.order = append(p.order, t)
	}
	return t
}

// output records a piece of output; test2json cuts very long lines, so a
// line is complete only at its newline.
func (p *pkg) output(t *test, s string) {
	key := ""
	if t != nil {
		key = t.name
	}
	s = p.pending[key] + s
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		p.add(t, s[:i])
		s = s[i+1:]
	}
	p.pending[key] = s
}

func (p *pkg) add(t *test, text string) {
	if t != nil {
		t.lines = append(t.lines, text)
		t.at = append(t.at, len(p.lines))
	}
	p.lines = append(p.lines, line{t, text})
}

func (p *pkg) flush() {
	for key, s := range p.pending {
		if s != "" {
			var t *test
			if key != "" {
				t = p.tests[key]
			}
			p.add(t, s)
		}
		delete(p.pending, key)
	}
}

// printPackage prints a finished package as go test does without -v: the
// package's line, and when it failed its output but that of the tests that
// passed or were skipped.
func (r *run) printPackage(p *pkg) {
	for _, l := range p.lines {
		if p.result != "fail" {
			if l.test == nil && (strings.HasPrefix(l.text, "ok ") || strings.HasPrefix(l.text, "?  ")) {
				fmt.Fprintln(r.out, l.text)
			}
			continue
		}
		if l.test != nil && (l.test.result == "pass" || l.test.result == "skip") || framing.MatchString(l.text) {
			continue
		}
		fmt.Fprintln(r.out, l.text)
	}
}

var (
	// "=== RUN   TestX", "=== PAUSE", "=== CONT", "=== NAME".
	framing = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME) `)
	// "--- FAIL: TestX (0.00s)" at any depth.
	verdict = regexp.MustCompile(`^\s*--- (FAIL|PASS|SKIP): `)
	// A log entry of t.Log, t.Error, t.Fatal: "    file_test.go:12: message".
	entryStart = regexp.MustCompile(`^( +)([^\s:]+\.go:\d+): ?(.*)$`)
	// Lines of a package's own output that say why it failed.
	reason = regexp.MustCompile(`(?i)panic|fatal|error|fail|timed out|unavailable|missing|cannot|killed|exit status`)
)

// entry is one log entry of a test: its location, first line and the lines
// that continue it.
type entry struct {
	loc, text string
	more      []string
}

// dump reports whether the entry is a dump of state from a helper outside
// the test files (framework.DumpOnFailure): several lines, not a message.
func (e entry) dump() bool {
	file, _, _ := strings.Cut(e.loc, ":")
	return len(e.more) > 0 && !strings.HasSuffix(file, "_test.go")
}

// parse splits a test's output into its log entries, its panic lines
// ("panic: ...", "fatal error: ...") and the rest.
func parse(lines []string) (entries []entry, panics, rest []string) {
	indent := -1
	for _, l := range lines {
		if framing.MatchString(l) || verdict.MatchString(l) {
			indent = -1
			continue
		}
		if m := entryStart.FindStringSubmatch(l); m != nil {
			entries = append(entries, entry{loc: m[2], text: m[3]})
			indent = len(m[1])
			continue
		}
		if indent >= 0 && len(l)-len(strings.TrimLeft(l, " ")) > indent {
			e := &entries[len(entries)-1]
			e.more = append(e.more, strings.TrimSpace(l))
			continue
		}
		indent = -1
		switch {
		case strings.HasPrefix(l, "panic: "), strings.HasPrefix(l, "fatal error: "):
			panics = append(panics, l)
		case strings.TrimSpace(l) != "":
			rest = append(rest, l)
		}
	}
	return entries, panics, rest
}

// failure is a failed test, or a package that failed on its own.
type failure struct {
	pkg   *pkg
	test  *test    // nil: the package
	lines []string // the test's output that the failure is about
}

// failures lists the failed tests, the tests of failed packages that did
// not finish, and the failed packages without either. A test whose subtest
// failed is listed only for what it logged (or panicked) once its first
// failed subtest had started: its earlier entries are, as a rule, progress.
func (r *run) failures() []failure {
	var out []failure
	for _, p := range r.order {
		failed := func(t *test) bool {
			return t.result == "fail" || t.result == "" && p.result != "pass" && p.result != "skip"
		}
		n := 0
		// The tests in the order they ended (a subtest before its
		// parent), then those that did not.
		tests := slices.Clone(p.ended)
		for _, t := range p.order {
			if t.result == "" {
				tests = append(tests, t)
			}
		}
		for _, t := range tests {
			if !failed(t) {
				continue
			}
			since := -1
			for _, u := range p.order {
				if strings.HasPrefix(u.name, t.name+"/") && failed(u) && len(u.at) > 0 && (since < 0 || u.at[0] < since) {
					since = u.at[0]
				}
			}
			lines := t.lines
			if since >= 0 {
				i := 0
				for i < len(t.at) && t.at[i] < since {
					i++
				}
				lines = t.lines[i:]
				entries, panics, _ := parse(lines)
				own := len(panics) > 0
				for _, e := range entries {
					own = own || !e.dump()
				}
				if !own {
					continue
				}
			}
			out = append(out, failure{pkg: p, test: t, lines: lines})
			n++
		}
		_, panics, _ := parse(p.own())
		if p.result == "fail" && (n == 0 || len(panics) > 0) || p.result == "" && n == 0 {
			out = append(out, failure{pkg: p})
		}
	}
	return out
}

// own returns the package's own output lines (TestMain's, go test's).
func (p *pkg) own() []string {
	var out []string
	for _, l := range p.lines {
		if l.test == nil {
			out = append(out, l.text)
		}
	}
	return out
}

func (r *run) short(path string) string {
	if r.o.module != "" {
		if path == r.o.module {
			return "."
		}
		if rest, ok := strings.CutPrefix(path, r.o.module+"/"); ok {
			return "./" + rest
		}
	}
	return path
}

// head is a failure's first line: what failed, where and how.
func (r *run) head(f failure) string {
	p := f.pkg
	if f.test == nil {
		switch {
		case p.failedBuild != "":
			return fmt.Sprintf("--- FAIL: %s [build failed]", r.short(p.path))
		case p.result == "":
			return fmt.Sprintf("--- FAIL: %s [did not finish]", r.short(p.path))
		}
		return fmt.Sprintf("--- FAIL: %s (%.1fs; no test failed)", r.short(p.path), p.elapsed)
	}
	if f.test.result == "" {
		return fmt.Sprintf("--- DID NOT FINISH: %s (%s)", f.test.name, r.short(p.path))
	}
	return fmt.Sprintf("--- FAIL: %s (%s, %.2fs)", f.test.name, r.short(p.path), f.test.elapsed)
}

// why returns the lines that say why a package failed on its own: its build
// errors, or the lines of its output that name a failure.
func (r *run) why(p *pkg, max int) []string {
	if p.failedBuild != "" {
		var out []string
		for _, l := range r.builds[p.failedBuild] {
			if !strings.HasPrefix(l, "# ") {
				out = append(out, l)
			}
		}
		return first(out, max)
	}
	var picked []string
	own := p.own()
	for _, l := range own {
		t := strings.TrimSpace(l)
		if t == "" || t == "FAIL" || t == "PASS" || strings.HasPrefix(t, "FAIL\t") || strings.HasPrefix(t, "exit status ") {
			continue
		}
		if reason.MatchString(t) {
			picked = append(picked, t)
		}
	}
	if len(picked) == 0 {
		for _, l := range own {
			if t := strings.TrimSpace(l); t != "" && t != "FAIL" && t != "PASS" && !strings.HasPrefix(t, "FAIL\t") {
				picked = append(picked, t)
			}
		}
		if len(picked) > max {
			picked = picked[len(picked)-max:]
		}
	}
	return first(picked, max)
}

func first(lines []string, n int) []string {
	if len(lines) > n {
		return lines[:n]
	}
	return lines
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + " [...]"
	}
	return s
}

// writeSummary writes the summary: a count, then every failure with its
// last log entries; at most o.lines lines.
func (r *run) writeSummary(w io.Writer, failures []failure) {
	if r.events == 0 {
		for _, l := range r.noEvents() {
			fmt.Fprintln(w, l)
		}
		return
	}
	if len(failures) == 0 {
		fmt.Fprintf(w, "testsummary: PASS: %d packages, %d tests passed, %d skipped\n", len(r.order), r.npassed, r.nskipped)
		return
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, f := range failures {
		add("%s", r.head(f))
		if f.test == nil {
			for _, l := range r.why(f.pkg, 8) {
				add("    %s", cut(l, 400))
			}
			continue
		}
		entries, panics, rest := parse(f.lines)
		if len(panics) > 0 {
			add("    %s", cut(panics[0], 400))
		}
		if len(entries) == 0 && len(panics) == 0 {
			if len(rest) == 0 {
				add("    (no output of its own)")
			}
			for _, l := range first(rest, 3) {
				add("    %s", cut(l, 400))
			}
			continue
		}
		from := max(len(entries)-r.o.entries, 0)
		if from > 0 {
			add("    [%d earlier log entries left out]", from)
		}
		for _, e := range entries[from:] {
			if e.dump() {
				add("    %s: %s [%d more lines]", e.loc, cut(e.text, 200), len(e.more))
				continue
			}
			add("    %s: %s", e.loc, cut(e.text, 400))
			for i, m := range e.more {
				if i == 3 {
					add("        [%d more lines]", len(e.more)-3)
					break
				}
				add("        %s", cut(m, 300))
			}
		}
	}
	tests := 0
	for _, f := range failures {
		if f.test != nil {
			tests++
		}
	}
	fmt.Fprintf(w, "=== testsummary: FAIL: %d failed tests, %d failed packages (of %d; %d tests passed, %d skipped)\n",
		tests, r.failedPackages(), len(r.order), r.npassed, r.nskipped)
	if len(out) > r.o.lines {
		n := len(out) - r.o.lines
		out = append(out[:r.o.lines], fmt.Sprintf("[%d more lines left out: the failures are in the output above]", n))
	}
	for _, l := range out {
		fmt.Fprintln(w, l)
	}
}

func (r *run) failedPackages() int {
	n := 0
	for _, p := range r.order {
		if p.result == "fail" || p.result == "" {
			n++
		}
	}
	return n
}

// writeDigest writes a line or two per failure: the message of a failed
// test (its last log entries that are not dumps), the panic of one that did
// not finish, why a package failed. At most 30 lines.
func (r *run) writeDigest(w io.Writer, failures []failure) {
	if r.events == 0 {
		for _, l := range r.noEvents() {
			fmt.Fprintln(w, l)
		}
		return
	}
	var out []string
	for _, f := range failures {
		out = append(out, r.head(f))
		var lines []string
		if f.test == nil {
			lines = r.why(f.pkg, 2)
		} else {
			entries, panics, rest := parse(f.lines)
			lines = first(panics, 1)
			var msgs []entry
			for _, e := range entries {
				if !e.dump() {
					msgs = append(msgs, e)
				}
			}
			if len(msgs) == 0 && len(entries) > 0 {
				msgs = entries[len(entries)-1:]
			}
			for _, e := range msgs[max(len(msgs)-(2-len(lines)), 0):] {
				l := e.loc + ": " + e.text
				if len(e.more) > 0 {
					l += fmt.Sprintf(" [+%d lines]", len(e.more))
				}
				lines = append(lines, l)
			}
			if len(lines) == 0 {
				lines = first(rest, 2)
			}
		}
		for _, l := range lines {
			out = append(out, "    "+cut(strings.TrimSpace(l), 300))
		}
	}
	if len(out) > 30 {
		n := len(out) - 30
		out = append(out[:30], fmt.Sprintf("[%d more lines left out]", n))
	}
	for _, l := range out {
		fmt.Fprintln(w, l)
	}
}

// noEvents says that no test ran, with the last lines go test printed.
func (r *run) noEvents() []string {
	out := []string{"--- FAIL: no go test -json events on the input"}
	for _, l := range r.other[max(len(r.other)-3, 0):] {
		out = append(out, "    "+cut(l, 300))
	}
	return out
}

// modulePath returns the path of the module of the working directory, or "".
func modulePath() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for l := range strings.Lines(string(data)) {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
					return strings.Trim(strings.TrimSpace(rest), `"`)
				}
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
