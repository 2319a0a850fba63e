package registrar

import (
	"fmt"
	"sync"

	"github.com/mountcontainers/mountcontainers/internal/pod/kubeevents"
)

// Reasons of the Events an [EventObserver] records on the mount pod.
const (
	ReasonYielded          = "PluginYielded"
	ReasonTakenBack        = "PluginTakenBack"
	ReasonRegistrationFail = "RegistrationFailing"
	ReasonToolsMissing     = "ToolsMissing"
)

// EventObserver records Kubernetes Events on the mount pod when it yields
// a plugin to another pod, takes one back, or cannot write a registration,
// and passes everything on to Next (the metrics), when set.
type EventObserver struct {
	Next   Observer
	Events *kubeevents.Recorder
	// Pod is the mount pod itself.
	Pod kubeevents.Object

	mu   sync.Mutex
	last map[string]State
}

// RegistrationState records an Event when plugin's state changes to one
// an operator must hear of.
func (o *EventObserver) RegistrationState(plugin string, s State) {
	if o.Next != nil {
		o.Next.RegistrationState(plugin, s)
	}
	o.mu.Lock()
	if o.last == nil {
		o.last = map[string]State{}
	}
	prev := o.last[plugin]
	o.last[plugin] = s
	o.mu.Unlock()
	switch {
	case s == prev:
	case s == StateRegistered && prev == StateYielded:
		o.Events.Event(o.Pod, kubeevents.Normal, ReasonTakenBack,
			fmt.Sprintf("registered again for plugin %s: the pod it had yielded to unregistered", plugin))
	case s == StateFailing:
		o.Events.Event(o.Pod, kubeevents.Warning, ReasonRegistrationFail,
			fmt.Sprintf("cannot write the registration of plugin %s; retrying (the pod's log says why)", plugin))
	}
}

// RegistrationEvent records an Event when the pod yields plugin.
func (o *EventObserver) RegistrationEvent(plugin string, e Event) {
	if o.Next != nil {
		o.Next.RegistrationEvent(plugin, e)
	}
	if e == EventYielded {
		o.Events.Event(o.Pod, kubeevents.Warning, ReasonYielded,
			fmt.Sprintf("another pod registered for plugin %s: this pod yields it, and is not ready, while that registration stays", plugin))
	}
}

// ToolsMissing records the Event of a pod that cannot serve: err names the
// tools it lacks.
func (o *EventObserver) ToolsMissing(err *MissingToolsError) {
	o.Events.Event(o.Pod, kubeevents.Warning, ReasonToolsMissing, err.Error())
}
