package registrar

// State is where a plugin's registration stands, for an [Observer].
type State string

// The states of a plugin's registration.
const (
	// StateRegistered: the registration names this pod.
	StateRegistered State = "registered"
	// StateYielded: another pod's registration took the plugin.
	StateYielded State = "yielded"
	// StateFailing: the last write failed; it is retried with back-off.
	StateFailing State = "failing"
	// StateUnregistered: the daemon has stopped and removed (or left to
	// another pod) the registration.
	StateUnregistered State = "unregistered"
)

// States are all the states, in a fixed order.
var States = []State{StateRegistered, StateYielded, StateFailing, StateUnregistered}

// Event is something the daemon did to a registration after the first
// write, for an [Observer].
type Event string

// The events of a registration.
const (
	// EventRecreated: the registration had been removed; written again.
	EventRecreated Event = "recreated"
	// EventRestored: the registration was unreadable, or named this pod
	// with another exec socket; written again.
	EventRestored Event = "restored"
	// EventYielded: another pod registered for the plugin; this pod
	// stopped asserting it.
	EventYielded Event = "yielded"
)

// Events are all the events, in a fixed order.
var Events = []Event{EventRecreated, EventRestored, EventYielded}

// Observer is told what the daemon does with the registrations. Its
// methods are called from the daemon's goroutine and must not block.
type Observer interface {
	// RegistrationState reports plugin's state whenever it may have
	// changed.
	RegistrationState(plugin string, s State)
	// RegistrationEvent reports a repair or a yield.
	RegistrationEvent(plugin string, e Event)
}

func (d *Daemon) observeState(plugin string, s State) {
	if d.cfg.Observer != nil {
		d.cfg.Observer.RegistrationState(plugin, s)
	}
}

func (d *Daemon) observeEvent(plugin string, e Event) {
	if d.cfg.Observer != nil {
		d.cfg.Observer.RegistrationEvent(plugin, e)
	}
}
