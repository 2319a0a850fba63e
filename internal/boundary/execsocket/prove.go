package execsocket

import (
	"context"
	"fmt"
	"time"
)

// ProbeTimeout bounds proving a registration's container live through its
// exec socket (see [Prove]). A socket nobody serves refuses the connection
// at once; the bound is for a service that is slow to answer. 2 s proved
// too short on a node under load: with 100 pods mounting at once on 2
// saturated cores, one connection in 100 was not ready within 2 s
// (BENCHMARKS.md, "A node under load").
const ProbeTimeout = 5 * time.Second

// NoSocket is why a registration that advertises no exec socket cannot be
// proved live through one.
const NoSocket = "the registration advertises no exec socket"

// Identity is whom an exec service says it runs for: its Identity call's
// answer.
type Identity struct {
	PodNamespace, PodName, PodUID, ContainerName string
	// Version is the service's version, and PID its process in the mount
	// pod's PID namespace; neither says whom it runs for.
	Version string
	PID     int64
}

// Conn is a connection to an exec service, as [Prove] asks it.
type Conn interface {
	// Identity asks the service whom it runs for.
	Identity(ctx context.Context) (Identity, error)
	// PeerPID returns the process serving the connection that Identity
	// used, as SO_PEERCRED gave it: 0 when that process is not visible in
	// the caller's PID namespace.
	PeerPID() int
}

// Proof is what an exec socket proves of a registration: whether its
// container is live, and why not.
type Proof struct {
	// Refused is why the socket cannot be used for the registration at
	// all: its service did not answer, or answers for another pod or
	// container. Nil when it answers for the registration.
	Refused error
	// Unproved is why an answer for the registration does not prove the
	// registered container live: the kernel does not place the process
	// serving it in a container of the registered pod, or cannot tell
	// from here (the error wraps [ErrCannotTell]). Nil when proved, and
	// when Refused is set.
	Unproved error
	// PID is the process serving the socket, as SO_PEERCRED gave it, once
	// the service answered for the registration; 0 otherwise.
	PID int
	// ContainerID is the container of the registered pod that the serving
	// process is in, as its cgroups tell it; empty unless proved.
	ContainerID string
}

// Proved reports whether the socket proves the registered container live:
// its service answered for the registered pod and container, and the
// kernel places the process serving it in a container of that pod.
func (p Proof) Proved() bool { return p.Refused == nil && p.Unproved == nil && p.ContainerID != "" }

// Err is why the socket does not prove the registered container live, or
// nil when it does.
func (p Proof) Err() error {
	if p.Refused != nil {
		return p.Refused
	}
	return p.Unproved
}

// Reason says, for a decision, what proved the container live: the
// container's short ID (12 digits, as the runtimes' tools show it) and the
// serving process. Empty unless proved.
func (p Proof) Reason() string {
	if !p.Proved() {
		return ""
	}
	return fmt.Sprintf("exec socket answers for the registered pod and container, served from its container %s (pid %d): runtime not asked",
		p.ContainerID[:min(12, len(p.ContainerID))], p.PID)
}

// Prove asks the service on c whom it runs for, and the kernel which
// container the process serving it is in: it proves the registered
// container (want's pod namespace, name, UID and container name; not its
// Version or PID) live when the service answers for exactly that pod and
// container and the process is in a container of that pod, by its cgroups
// under procRoot (the procfs of the caller's own PID namespace; see
// [PodContainer]). A service can say anything of itself; the kernel's
// placement of its process is what a process outside the pod cannot fake.
func Prove(ctx context.Context, c Conn, want Identity, procRoot string) Proof {
	id, err := c.Identity(ctx)
	if err != nil {
		return Proof{Refused: err}
	}
	if id.PodUID != want.PodUID || id.ContainerName != want.ContainerName ||
		id.PodName != want.PodName || id.PodNamespace != want.PodNamespace {
		return Proof{Refused: fmt.Errorf("exec socket answers for pod %s/%s (uid %s, container %s), not the registered one",
			id.PodNamespace, id.PodName, id.PodUID, id.ContainerName)}
	}
	p := Proof{PID: c.PeerPID()}
	p.ContainerID, p.Unproved = PodContainer(procRoot, p.PID, want.PodUID)
	return p
}
