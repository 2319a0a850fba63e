package metrics

import (
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/internal/pod/recovery"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// Names returns the name of every series this package can expose, the
// Go runtime and process collectors' included, with a histogram's
// _bucket, _sum and _count: what a dashboard or an alert may query. It
// gathers a registry with every collector after driving every observer
// once.
func Names() ([]string, error) {
	const p = "example.com/plugin"
	m := New(Options{Version: "v0", Revision: "0", Plugins: []string{p}})
	m.RegistrationState(p, registrar.StateRegistered)
	m.RegistrationEvent(p, registrar.EventRecreated)
	m.ExecStarted(p, "mount")
	m.ExecEnded(p, "mount", execserver.ResultOK, time.Millisecond)
	m.ExecRefused(p, "mount", execserver.ResultBusy)
	m.DeadMountFound(p)
	m.RecoveryAttempted(p, recovery.OutcomeRecovered)
	m.ObserveSurvey(livemount.Report{}, []livemount.Scope{{Plugin: p}}, nil)
	NewExecObserver(m.reg).ObserveExec(mcexec.ExecEvent{Plugin: p, Tool: "mount", Path: mcexec.PathSocket})
	families, err := m.reg.Gather()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range families {
		n := f.GetName()
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names = append(names, n+"_bucket", n+"_sum", n+"_count")
		case dto.MetricType_SUMMARY:
			names = append(names, n, n+"_sum", n+"_count")
		default:
			names = append(names, n)
		}
	}
	return names, nil
}
