// Package metrics holds the mount pod's Prometheus metrics: a registry of
// its own (never the global default), the observers that packages
// registrar, execserver, recovery and livemount report to, and the HTTP
// server of /metrics and /healthz ([Serve]). docs/metrics.md lists every
// metric.
//
// The packages that do the work do not import Prometheus: each offers a
// small observer interface or function, which [Metrics] implements. The
// library pkg/exec, imported by volume hosts, stays free of it too: its
// exec.Observer is what [ExecObserver] (for a volume host that serves
// metrics) implements.
//
// # Labels
//
// No label carries a command's arguments, which may hold secrets: a command
// is named by the base name of its executable only, and at most 64
// distinct names per process (then "other"). Plugin labels are bounded to
// the plugins the pod serves ("other" and "unknown" for the rest).
//
// # Memory
//
// The Go collector is registered with its MemStats-based metrics only, and
// the process collector reads /proc on each scrape; BENCHMARKS.md has the
// mount pod's resident memory with metrics on and off.
package metrics
