package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/metrics"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	mcversion "github.com/mountcontainers/mountcontainers/internal/shared/version"
)

// defaultMetricsAddress is where serve's metrics listen unless told
// otherwise. The mount pods of different plugins on one node share the
// node's network (hostNetwork): each overlay gives its own port.
const defaultMetricsAddress = ":9641"

func metricsFlag() cli.Flag {
	return &cli.StringFlag{
		Name: "metrics-address", EnvVars: []string{"MOUNTPOD_METRICS_ADDRESS"}, Value: defaultMetricsAddress,
		Usage: "Address (host:port) of the Prometheus metrics and /healthz; empty turns them off. The pod is on the node's network: every mount pod of a node needs its own port.",
	}
}

// startMetrics makes the mount pod's metrics and serves them on addr until
// the returned stop function is called. A listener that cannot bind is
// logged and the metrics still observe (nothing is served): the mount pod
// must serve whatever happens to its metrics. An empty addr turns metrics
// off: nil.
func startMetrics(addr string, plugins []string, log *slog.Logger) (m *metrics.Metrics, stop func()) {
	if addr == "" {
		log.Info("metrics are off (empty --metrics-address)")
		return nil, func() {}
	}
	m = metrics.New(metrics.Options{Version: version, Revision: mcversion.Revision, Plugins: plugins})
	log = log.With("component", "metrics")
	l, err := metrics.Listen(addr)
	if err != nil {
		log.Error("metrics cannot listen: serving without metrics (another mount pod of this node on the same port? give each its own MOUNTPOD_METRICS_ADDRESS)",
			"address", addr, "err", err)
		return m, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		metrics.Serve(ctx, l, m, log)
	}()
	log.Info("serving metrics", "address", l.Addr().String(), "paths", "/metrics /healthz")
	return m, func() { cancel(); <-done }
}

// surveyObserver sets m's mount gauges from each survey of the keeper,
// naming the plugin of an unscoped mount from the mount records under
// registrationDir; nil when m is.
func surveyObserver(m *metrics.Metrics, registrationDir string) func(livemount.Report, []livemount.Scope) {
	if m == nil {
		return nil
	}
	dir := filepath.Join(registrationDir, mountrecord.Dir)
	// Read again at every survey: only the records that changed since.
	var records mountrecord.Lister
	return func(r livemount.Report, removed []livemount.Scope) {
		plugins := map[string]string{}
		entries, _ := records.List(dir)
		for _, e := range entries {
			if e.Err == nil {
				plugins[e.Record.Target] = e.Record.Plugin
			}
		}
		m.ObserveSurvey(r, removed, func(target string) string { return plugins[target] })
	}
}
