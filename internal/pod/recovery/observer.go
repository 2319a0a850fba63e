package recovery

// Outcome is how an attempt to bring back a dead mount ended, for an
// [Observer].
type Outcome string

// The outcomes of an attempt.
const (
	// OutcomeRecovered: the mount is back, on the node and in every
	// container that held it.
	OutcomeRecovered Outcome = "recovered"
	// OutcomeFailed: the attempt failed; it is retried with back-off.
	OutcomeFailed Outcome = "failed"
	// OutcomeUnmounted: the volume host unmounted the dead mount during
	// the attempt; it is left unmounted.
	OutcomeUnmounted Outcome = "unmounted"
	// OutcomeNotRecoverable: the record says the mount cannot come back
	// by itself, or [Recoverer.Allow] refused it; nothing was tried.
	OutcomeNotRecoverable Outcome = "not_recoverable"
)

// Outcomes are all the outcomes, in a fixed order.
var Outcomes = []Outcome{OutcomeRecovered, OutcomeFailed, OutcomeUnmounted, OutcomeNotRecoverable}

// Observer is told of dead mounts and of the attempts to bring them back
// (the mount pod's metrics). Its methods are called from the recoverer's
// goroutine and must not block.
type Observer interface {
	// DeadMountFound: a mount of plugin was found dead (once per death,
	// not at every pass while it stays dead).
	DeadMountFound(plugin string)
	// RecoveryAttempted: an attempt for a dead mount of plugin ended.
	RecoveryAttempted(plugin string, o Outcome)
}

func (r *Recoverer) observeDead(plugin string) {
	if r.Observer != nil {
		r.Observer.DeadMountFound(plugin)
	}
}

func (r *Recoverer) observeAttempt(plugin string, o Outcome) {
	if r.Observer != nil {
		r.Observer.RecoveryAttempted(plugin, o)
	}
}
