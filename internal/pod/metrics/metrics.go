package metrics

import (
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
)

// Namespace prefixes every metric of the project.
const Namespace = "mountcontainers"

// PluginOther labels a live mount not known to be of one of the pod's
// plugins (no scope of theirs, no mount record naming them): the survey
// sees every FUSE mount under the kubelet's directory.
const PluginOther = "other"

// maxTools bounds the tool label's values per process: a caller naming more
// distinct executables gets "other" for the rest.
const maxTools = 64

// ToolOther labels the executables beyond the first maxTools.
const ToolOther = "other"

// ExecBuckets are the exec duration histograms' buckets, in seconds: from
// the exec service's millisecond to a mount's minutes.
var ExecBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120}

// Options configure [New].
type Options struct {
	// Version and Revision go into the build info.
	Version, Revision string
	// Plugins are the plugins the pod serves: their series exist from the
	// start (at 0), so that rates and alerts see the first event.
	Plugins []string
	// NoProcessCollectors leaves out the Go runtime and process
	// collectors (tests that compare whole outputs).
	NoProcessCollectors bool
}

// Metrics are the mount pod's metrics, in a registry of their own (not the
// global default). Its methods implement the observers of packages
// registrar, execserver and recovery, and [Metrics.ObserveSurvey] the live
// mount keeper's. Create it with [New].
type Metrics struct {
	reg *prometheus.Registry

	regState  *prometheus.GaugeVec
	regEvents *prometheus.CounterVec

	execCommands *prometheus.CounterVec
	execDuration *prometheus.HistogramVec
	execInFlight *prometheus.GaugeVec

	liveMounts          *prometheus.GaugeVec
	liveMountsUnhealthy *prometheus.GaugeVec
	liveMountsUnscoped  *prometheus.GaugeVec
	scopes              *prometheus.GaugeVec
	scopesRemoved       *prometheus.CounterVec

	deadMounts *prometheus.CounterVec
	recoveries *prometheus.CounterVec

	plugins []string
	tools   *toolSet
}

var (
	_ registrar.Observer  = (*Metrics)(nil)
	_ execserver.Observer = (*Metrics)(nil)
	_ recovery.Observer   = (*Metrics)(nil)
)

// New registers the mount pod's metrics in a new registry.
func New(o Options) *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		plugins: normalizePlugins(o.Plugins),
		tools:   newToolSet(maxTools),
		regState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "registration_state",
			Help: "State of this pod's registration for each plugin: 1 for the current state (registered, yielded to another pod, failing to write, unregistered at stop), 0 for the others.",
		}, []string{"plugin", "state"}),
		regEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "registration_events_total",
			Help: "Repairs of this pod's registrations (recreated after removal, restored after damage) and yields to another pod.",
		}, []string{"plugin", "event"}),
		execCommands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "exec_commands_total",
			Help: "Commands the exec service ran or refused, by plugin, executable base name (never arguments) and result.",
		}, []string{"plugin", "tool", "result"}),
		execDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "exec_duration_seconds",
			Help:    "Time from a command's start in the exec service to its exit.",
			Buckets: ExecBuckets,
		}, []string{"plugin", "tool"}),
		execInFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "exec_in_flight_commands",
			Help: "Commands the exec service is running now.",
		}, []string{"plugin"}),
		liveMounts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "live_mounts",
			Help: "Live FUSE mounts under the kubelet's directory at the last survey, by plugin (other: not known to be of this pod's plugins).",
		}, []string{"plugin"}),
		liveMountsUnhealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "live_mounts_unhealthy",
			Help: "Live FUSE mounts whose stat did not answer at the last survey.",
		}, []string{"plugin"}),
		liveMountsUnscoped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "live_mounts_unscoped",
			Help: "Live FUSE mounts whose daemons do not all run in the mount's scope: they die with the pod that runs them.",
		}, []string{"plugin"}),
		scopes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "scopes",
			Help: "Scopes (cgroups of mounts' daemons) of each plugin at the last survey, with or without a mount.",
		}, []string{"plugin"}),
		scopesRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "scopes_removed_total",
			Help: "Empty scopes of gone mounts removed.",
		}, []string{"plugin"}),
		deadMounts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "dead_mounts_found_total",
			Help: "Recorded FUSE mounts found dead (their daemon gone), once per death.",
		}, []string{"plugin"}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "recoveries_total",
			Help: "Attempts to bring back a dead mount, by result.",
		}, []string{"plugin", "result"}),
	}
	checksTimedOut := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Name: "fuse_connection_checks_timed_out_total",
		Help: "Checks of whether a FUSE connection a process of a scope holds ended that were not done within their survey's bound (the connection's number decided).",
	}, func() float64 { return float64(livemount.EndedChecksTimedOut.Load()) })
	checksSkipped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Name: "fuse_connection_checks_skipped_total",
		Help: "Checks of whether a FUSE connection a process of a scope holds ended that were not made, an earlier one still running or the survey's bound spent (the connection's number decided).",
	}, func() float64 { return float64(livemount.EndedChecksSkipped.Load()) })
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; the labels name the build.",
	}, []string{"version", "revision", "goversion"})
	buildInfo.WithLabelValues(orUnknown(o.Version), orUnknown(o.Revision), runtime.Version()).Set(1)
	m.reg.MustRegister(buildInfo, checksTimedOut, checksSkipped, m.regState, m.regEvents, m.execCommands, m.execDuration, m.execInFlight,
		m.liveMounts, m.liveMountsUnhealthy, m.liveMountsUnscoped, m.scopes, m.scopesRemoved, m.deadMounts, m.recoveries)
	if !o.NoProcessCollectors {
		m.reg.MustRegister(
			// The MemStats-based metrics only (go_memstats_*, go_gc_*,
			// go_goroutines, ...): no runtime/metrics histograms.
			collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics()),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	for _, p := range m.plugins {
		for _, s := range registrar.States {
			m.regState.WithLabelValues(p, string(s))
		}
		for _, e := range registrar.Events {
			m.regEvents.WithLabelValues(p, string(e))
		}
		m.execInFlight.WithLabelValues(p)
		m.deadMounts.WithLabelValues(p)
		m.scopesRemoved.WithLabelValues(p)
		for _, o := range recovery.Outcomes {
			m.recoveries.WithLabelValues(p, string(o))
		}
	}
	m.setSurvey(nil, nil)
	return m
}

// normalizePlugins trims, drops empty names and duplicates.
func normalizePlugins(in []string) []string {
	var out []string
	for _, p := range in {
		if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Registry is the registry of the metrics, for a test or another handler.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (or
// OpenMetrics, when asked).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A scrape is a few kilobytes; more than a handful at once is a
		// misconfigured scraper, not a reason to grow.
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
		EnableOpenMetrics:   true,
		// A few kilobytes on the node's network: compressing them is not
		// worth the compressor's memory, which stays in the heap between
		// scrapes (BENCHMARKS.md).
		DisableCompression: true,
	})
}

// RegistrationState sets plugin's state gauge; see [registrar.Observer].
func (m *Metrics) RegistrationState(plugin string, s registrar.State) {
	for _, st := range registrar.States {
		v := 0.0
		if st == s {
			v = 1
		}
		m.regState.WithLabelValues(plugin, string(st)).Set(v)
	}
}

// RegistrationEvent counts e; see [registrar.Observer].
func (m *Metrics) RegistrationEvent(plugin string, e registrar.Event) {
	m.regEvents.WithLabelValues(plugin, string(e)).Inc()
}

// ExecStarted counts a command in flight; see [execserver.Observer].
func (m *Metrics) ExecStarted(plugin, _ string) {
	m.execInFlight.WithLabelValues(plugin).Inc()
}

// ExecEnded counts a command and its duration; see [execserver.Observer].
func (m *Metrics) ExecEnded(plugin, tool string, r execserver.Result, took time.Duration) {
	tool = m.tools.label(tool)
	m.execInFlight.WithLabelValues(plugin).Dec()
	m.execCommands.WithLabelValues(plugin, tool, string(r)).Inc()
	m.execDuration.WithLabelValues(plugin, tool).Observe(took.Seconds())
}

// ExecRefused counts a refused call; see [execserver.Observer].
func (m *Metrics) ExecRefused(plugin, tool string, r execserver.Result) {
	m.execCommands.WithLabelValues(plugin, m.tools.label(tool), string(r)).Inc()
}

// DeadMountFound counts a dead mount; see [recovery.Observer].
func (m *Metrics) DeadMountFound(plugin string) {
	m.deadMounts.WithLabelValues(plugin).Inc()
}

// RecoveryAttempted counts an attempt; see [recovery.Observer].
func (m *Metrics) RecoveryAttempted(plugin string, o recovery.Outcome) {
	m.recoveries.WithLabelValues(plugin, string(o)).Inc()
}

// ObserveSurvey sets the live mount and scope gauges from a survey of the
// live mount keeper (livemount.Keeper.Observe); pluginOf names the plugin
// of a mount without a scope, or "". A mount of none of the pod's plugins
// counts under [PluginOther].
func (m *Metrics) ObserveSurvey(r livemount.Report, removed []livemount.Scope, pluginOf func(target string) string) {
	for _, s := range removed {
		if slices.Contains(m.plugins, s.Plugin) {
			m.scopesRemoved.WithLabelValues(s.Plugin).Inc()
		}
	}
	m.setSurvey(&r, pluginOf)
}

// setSurvey sets the survey's gauges; every plugin (and "unknown") gets a
// value, 0 included, so that no series vanishes between surveys.
func (m *Metrics) setSurvey(r *livemount.Report, pluginOf func(string) string) {
	type counts struct{ mounts, unhealthy, unscoped, scopes int }
	by := map[string]*counts{PluginOther: {}}
	for _, p := range m.plugins {
		by[p] = &counts{}
	}
	get := func(p string) *counts {
		if c, ok := by[p]; ok {
			return c
		}
		return by[PluginOther]
	}
	if r != nil {
		// A scope is counted once: the binds of a mount share its scope.
		counted := map[string]bool{}
		for _, mt := range r.Mounts {
			p := mt.Plugin
			if p == "" && pluginOf != nil {
				p = pluginOf(mt.Target)
			}
			c := get(p)
			c.mounts++
			if !mt.Healthy {
				c.unhealthy++
			}
			if !mt.Scoped {
				c.unscoped++
			}
			if mt.Scope != "" && !counted[mt.Plugin+"/"+mt.Scope] {
				counted[mt.Plugin+"/"+mt.Scope] = true
				c.scopes++
			}
		}
		for _, s := range r.Orphans {
			get(s.Plugin).scopes++
		}
	}
	for p, c := range by {
		m.liveMounts.WithLabelValues(p).Set(float64(c.mounts))
		m.liveMountsUnhealthy.WithLabelValues(p).Set(float64(c.unhealthy))
		m.liveMountsUnscoped.WithLabelValues(p).Set(float64(c.unscoped))
		if p != PluginOther {
			m.scopes.WithLabelValues(p).Set(float64(c.scopes))
		}
	}
}

// toolSet hands out tool label values: the first max distinct names as
// they are, then ToolOther.
type toolSet struct {
	mu    sync.Mutex
	max   int
	known map[string]bool
}

func newToolSet(max int) *toolSet { return &toolSet{max: max, known: map[string]bool{}} }

func (t *toolSet) label(tool string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.known[tool]:
		return tool
	case len(t.known) >= t.max:
		return ToolOther
	}
	t.known[tool] = true
	return tool
}
