package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// ExecObserver counts a volume host's commands by the way they took (the
// exec socket, CRI ExecSync, the host): an exec.Observer for a long-running
// volume host that serves metrics. (The Flexvolume driver and the shim are
// one process per call and log through exec.LogObserver instead.)
type ExecObserver struct {
	commands *prometheus.CounterVec
	duration *prometheus.HistogramVec
	tools    *toolSet
}

var _ mcexec.Observer = (*ExecObserver)(nil)

// NewExecObserver registers a volume host's exec metrics in reg.
func NewExecObserver(reg prometheus.Registerer) *ExecObserver {
	o := &ExecObserver{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "volume_host_exec_commands_total",
			Help: "Commands a volume host ran through the Exec resolver, by plugin, executable base name (never arguments), path (socket, cri, host, none) and result.",
		}, []string{"plugin", "tool", "path", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "volume_host_exec_duration_seconds",
			Help:    "Time from a volume host's exec decision to the command's result, by path.",
			Buckets: ExecBuckets,
		}, []string{"plugin", "path"}),
		tools: newToolSet(maxTools),
	}
	reg.MustRegister(o.commands, o.duration)
	return o
}

// ObserveExec counts e.
func (o *ExecObserver) ObserveExec(e mcexec.ExecEvent) {
	o.commands.WithLabelValues(e.Plugin, o.tools.label(e.Tool), string(e.Path), string(e.Result())).Inc()
	o.duration.WithLabelValues(e.Plugin, string(e.Path)).Observe(e.Duration.Seconds())
}
