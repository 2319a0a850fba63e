package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mountcontainers/mountcontainers/internal/boundary/livestatus"
)

// StatusReader reads the live-mount report of a mount pod: every live FUSE
// mount under the kubelet directory with its daemons, its scope, whether it
// is scoped (survives the pod) and healthy (`mountpod status -o json`).
type StatusReader interface {
	Status(ctx context.Context, pod *corev1.Pod, container string) (*livestatus.Report, error)
}

// DefaultStatusCommand is what [PodExec] runs for the live-mount report
// when StatusCommand is empty: the binary of the readiness probe.
var DefaultStatusCommand = []string{"/usr/local/bin/mountpod", "status", "-o", "json"}

// ErrNoStatus is the error of a [StatusReader] whose mount pod cannot
// report its live mounts because its image predates `mountpod status` (and
// scopes): all its FUSE daemons run in its container.
var ErrNoStatus = errors.New("the mount pod's image has no `mountpod status` (it predates scopes)")

// DecodeStatus decodes the JSON of `mountpod status -o json`.
func DecodeStatus(data []byte) (*livestatus.Report, error) {
	var r livestatus.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode the live-mount report: %w", err)
	}
	return &r, nil
}

// unknownCommand reports whether err is that of a mountpod without the
// status command: urfave/cli answers an unknown command with "No help topic
// for 'status'" and exit code 3.
func unknownCommand(err error) bool {
	var e *ExecError
	return errors.As(err, &e) && e.ExitCode == 3 && strings.Contains(e.Stderr, "No help topic for")
}

// servedByPod reports whether m is a FUSE mount whose daemon runs in the
// mount pod that reported it, so that deleting the pod kills it: it has a
// daemon, and not every daemon is in the mount's scope. A daemon is a root
// process holding the mount's FUSE connection (see livemount): another
// process naming the target does not count.
func servedByPod(m livestatus.Mount) bool {
	return !m.Scoped && len(m.Daemons) > 0
}

// describeLive renders a live mount for a person: target, file-system type
// and, when it is not scoped or not healthy, why.
func describeLive(m livestatus.Mount) string {
	s := fmt.Sprintf("%s (%s)", m.Target, m.FSType)
	var why []string
	if !m.Scoped {
		why = append(why, unscopedWhy(m))
	}
	if !m.Healthy {
		e := m.Error
		if e == "" {
			e = "no answer"
		}
		why = append(why, "not healthy: "+e)
	}
	if len(why) > 0 {
		s += ": " + strings.Join(why, "; ")
	}
	return s
}

// unscopedWhy says why m is not scoped.
func unscopedWhy(m livestatus.Mount) string {
	pids := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(m.Daemons)), ", "), "[]")
	switch {
	case len(m.Daemons) == 0:
		return "no daemon found"
	case m.Scope == "":
		return "daemon " + pids + " in no scope"
	}
	return "daemon " + pids + " not all in scope " + m.Scope
}

// findLive returns the mount of r at target.
func findLive(r *livestatus.Report, target string) (livestatus.Mount, bool) {
	i := slices.IndexFunc(r.Mounts, func(m livestatus.Mount) bool { return m.Target == target })
	if i < 0 {
		return livestatus.Mount{}, false
	}
	return r.Mounts[i], true
}
