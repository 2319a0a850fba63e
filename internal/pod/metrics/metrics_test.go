package metrics

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

const plugin = "kubernetes.io/glusterfs"

// scrape gets /metrics from an in-process server of m.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(Mux(m.Handler()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	return string(b)
}

// wantLines checks that text has every line of want.
// hasLines reports whether text has every line of want.
func hasLines(text string, want ...string) bool {
	lines := strings.Split(text, "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			return false
		}
	}
	return true
}

func wantLines(t *testing.T, text string, want ...string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("no line %q in the scrape", w)
		}
	}
}

func TestRegistrationState(t *testing.T) {
	m := New(Options{Plugins: []string{plugin, " " + plugin}, NoProcessCollectors: true})
	wantLines(t, scrape(t, m),
		`mountcontainers_registration_state{plugin="kubernetes.io/glusterfs",state="registered"} 0`,
		`mountcontainers_registration_events_total{event="recreated",plugin="kubernetes.io/glusterfs"} 0`)
	m.RegistrationState(plugin, registrar.StateRegistered)
	m.RegistrationEvent(plugin, registrar.EventRecreated)
	m.RegistrationEvent(plugin, registrar.EventRecreated)
	wantLines(t, scrape(t, m),
		`mountcontainers_registration_state{plugin="kubernetes.io/glusterfs",state="registered"} 1`,
		`mountcontainers_registration_state{plugin="kubernetes.io/glusterfs",state="yielded"} 0`,
		`mountcontainers_registration_events_total{event="recreated",plugin="kubernetes.io/glusterfs"} 2`)
	m.RegistrationState(plugin, registrar.StateYielded)
	wantLines(t, scrape(t, m),
		`mountcontainers_registration_state{plugin="kubernetes.io/glusterfs",state="registered"} 0`,
		`mountcontainers_registration_state{plugin="kubernetes.io/glusterfs",state="yielded"} 1`)
}

// TestExecService drives a real exec service with the metrics as its
// observer: the counter by plugin, tool and result, the histogram and the
// in-flight gauge move, and no argument ever shows.
func TestExecService(t *testing.T) {
	m := New(Options{Plugins: []string{plugin}, NoProcessCollectors: true})
	base, err := os.MkdirTemp("", "mcm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	path := filepath.Join(base, "x.sock")
	execservertest.Serve(t, path, execserver.Config{Plugins: []string{plugin}, Observer: m})
	c, err := execclient.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(p string, argv ...string) {
		t.Helper()
		proc, err := c.Start(context.Background(), execclient.Command{Plugin: p, Argv: argv})
		if err != nil {
			return // not found: an error of Start
		}
		if _, err := proc.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "hunter2-secret"
	run(plugin, "/bin/sh", "-c", "exit 0", "--password="+secret)
	run(plugin, "sh", "-c", "exit 0", secret)
	run(plugin, "sh", "-c", "exit 4", secret)
	run(plugin, "no-such-tool-mc", secret)
	run("example.com/not-served", "sh", "-c", "exit 0")
	run("", "sh", "-c", "exit 0")
	// The service tells its observer of a call once the call's exit is
	// sent, so the client may see the exit first: the scrape is taken
	// again until it shows every call (a minute's hang guard).
	want := []string{
		`mountcontainers_exec_commands_total{plugin="kubernetes.io/glusterfs",result="ok",tool="sh"} 2`,
		`mountcontainers_exec_commands_total{plugin="kubernetes.io/glusterfs",result="exit_error",tool="sh"} 1`,
		`mountcontainers_exec_commands_total{plugin="kubernetes.io/glusterfs",result="not_found",tool="no-such-tool-mc"} 1`,
		`mountcontainers_exec_commands_total{plugin="other",result="ok",tool="sh"} 1`,
		`mountcontainers_exec_commands_total{plugin="unknown",result="ok",tool="sh"} 1`,
		`mountcontainers_exec_duration_seconds_count{plugin="kubernetes.io/glusterfs",tool="sh"} 3`,
		`mountcontainers_exec_in_flight_commands{plugin="kubernetes.io/glusterfs"} 0`,
	}
	text := scrape(t, m)
	for deadline := time.Now().Add(time.Minute); !hasLines(text, want...) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		text = scrape(t, m)
	}
	wantLines(t, text, want...)
	for _, bad := range []string{secret, "password", "exit 4", "/bin/sh"} {
		if strings.Contains(text, bad) {
			t.Errorf("the scrape shows %q, part of a command's arguments or path:\n%s", bad, text)
		}
	}
}

func TestInFlight(t *testing.T) {
	m := New(Options{Plugins: []string{plugin}, NoProcessCollectors: true})
	m.ExecStarted(plugin, "mount")
	m.ExecStarted(plugin, "mount")
	if v := testutil.ToFloat64(m.execInFlight.WithLabelValues(plugin)); v != 2 {
		t.Errorf("in flight %v, want 2", v)
	}
	m.ExecEnded(plugin, "mount", execserver.ResultOK, time.Millisecond)
	m.ExecEnded(plugin, "mount", execserver.ResultTimeout, time.Second)
	if v := testutil.ToFloat64(m.execInFlight.WithLabelValues(plugin)); v != 0 {
		t.Errorf("in flight %v, want 0", v)
	}
	m.ExecRefused(plugin, "mount", execserver.ResultBusy)
	wantLines(t, scrape(t, m),
		`mountcontainers_exec_commands_total{plugin="kubernetes.io/glusterfs",result="busy",tool="mount"} 1`,
		`mountcontainers_exec_commands_total{plugin="kubernetes.io/glusterfs",result="timeout",tool="mount"} 1`,
		`mountcontainers_exec_duration_seconds_count{plugin="kubernetes.io/glusterfs",tool="mount"} 2`)
}

func TestToolsBounded(t *testing.T) {
	m := New(Options{Plugins: []string{plugin}, NoProcessCollectors: true})
	for i := range maxTools + 10 {
		m.ExecRefused(plugin, "tool"+string(rune('A'+i%26))+string(rune('a'+i/26)), execserver.ResultBusy)
	}
	if n := testutil.CollectAndCount(m.execCommands); n != maxTools+1 {
		t.Errorf("%d series, want %d tools and %q", n, maxTools, ToolOther)
	}
}

func TestMountsAndRecovery(t *testing.T) {
	m := New(Options{Plugins: []string{plugin}, NoProcessCollectors: true})
	r := livemount.Report{
		Mounts: []livemount.Mount{
			{Target: "/a", Plugin: plugin, Scope: "s-a", Scoped: true, Healthy: true},
			{Target: "/a-bind", Plugin: plugin, Scope: "s-a", Scoped: true, Healthy: true}, // a bind of /a: its scope
			{Target: "/b", Healthy: false},
			{Target: "/c", Healthy: true},
		},
		Orphans: []livemount.Scope{{Plugin: plugin, Name: "s-x"}},
	}
	pluginOf := func(target string) string {
		if target == "/b" {
			return plugin
		}
		return ""
	}
	m.ObserveSurvey(r, []livemount.Scope{{Plugin: plugin, Name: "s-y"}}, pluginOf)
	m.DeadMountFound(plugin)
	m.RecoveryAttempted(plugin, recovery.OutcomeFailed)
	m.RecoveryAttempted(plugin, recovery.OutcomeRecovered)
	wantLines(t, scrape(t, m),
		`mountcontainers_live_mounts{plugin="kubernetes.io/glusterfs"} 3`,
		`mountcontainers_live_mounts{plugin="other"} 1`,
		`mountcontainers_live_mounts_unhealthy{plugin="kubernetes.io/glusterfs"} 1`,
		`mountcontainers_live_mounts_unscoped{plugin="kubernetes.io/glusterfs"} 1`,
		`mountcontainers_scopes{plugin="kubernetes.io/glusterfs"} 2`,
		`mountcontainers_scopes_removed_total{plugin="kubernetes.io/glusterfs"} 1`,
		`mountcontainers_dead_mounts_found_total{plugin="kubernetes.io/glusterfs"} 1`,
		`mountcontainers_recoveries_total{plugin="kubernetes.io/glusterfs",result="failed"} 1`,
		`mountcontainers_recoveries_total{plugin="kubernetes.io/glusterfs",result="recovered"} 1`,
	)
	// The next survey finds nothing: the gauges go to 0, not away.
	m.ObserveSurvey(livemount.Report{}, nil, nil)
	wantLines(t, scrape(t, m),
		`mountcontainers_live_mounts{plugin="kubernetes.io/glusterfs"} 0`,
		`mountcontainers_live_mounts{plugin="other"} 0`)
}

// TestLint: every metric follows the Prometheus naming rules, as promtool
// check metrics checks them (the same linter).
func TestLint(t *testing.T) {
	if _, err := Names(); err != nil { // drives every observer
		t.Fatal(err)
	}
	m := New(Options{Version: "v1", Revision: "abc", Plugins: []string{plugin}})
	m.ExecEnded(plugin, "mount", execserver.ResultOK, time.Millisecond)
	NewExecObserver(m.reg)
	problems, err := testutil.GatherAndLint(m.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	text := scrape(t, m)
	wantLines(t, text, `mountcontainers_build_info{goversion="`+goVersion()+`",revision="abc",version="v1"} 1`)
	for _, want := range []string{"go_goroutines ", "process_resident_memory_bytes "} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in the scrape", want)
		}
	}
}

func TestNames(t *testing.T) {
	names, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, want := range []string{
		"mountcontainers_registration_state", "mountcontainers_exec_commands_total",
		"mountcontainers_exec_duration_seconds_bucket", "mountcontainers_volume_host_exec_duration_seconds_count",
		"mountcontainers_recoveries_total", "mountcontainers_build_info", "go_goroutines", "process_resident_memory_bytes",
	} {
		if !have[want] {
			t.Errorf("Names() lacks %s: %v", want, names)
		}
	}
}

func TestHealthz(t *testing.T) {
	srv := httptest.NewServer(Mux(New(Options{NoProcessCollectors: true}).Handler()))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "ok\n" {
		t.Errorf("GET /healthz: %s %q", resp.Status, b)
	}
}

// TestServe: Serve answers on its listener and returns once its context
// ends.
func TestServe(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Serve(ctx, l, New(Options{NoProcessCollectors: true}), slog.New(slog.DiscardHandler))
	}()
	resp, err := http.Get("http://" + l.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics: %s", resp.Status)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func goVersion() string { return runtime.Version() }
