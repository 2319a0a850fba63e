package execsocket

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeConn answers Identity with id (or err) and knows the serving
// process only once Identity was called, as a gRPC client that connects
// on the first call does.
type fakeConn struct {
	id     Identity
	err    error
	pid    int
	called bool
}

func (c *fakeConn) Identity(context.Context) (Identity, error) {
	c.called = true
	return c.id, c.err
}

func (c *fakeConn) PeerPID() int {
	if !c.called {
		return 0
	}
	return c.pid
}

// TestProve: the one proof both package exec and kubelet-exec-shim apply.
// The service must answer for exactly the registered pod and container,
// and the kernel must place the process serving it in a container of that
// pod; anything short of that is refused or unproved, and says why.
func TestProve(t *testing.T) {
	const uid = "0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00"
	const pid = 42
	cid := strings.Repeat("0123456789abcdef", 4)
	want := Identity{PodNamespace: "kube-system", PodName: "mount-a", PodUID: uid, ContainerName: "mount"}
	inPod := "0::/kubepods/besteffort/pod" + uid + "/" + cid + "\n"
	otherPod := "0::/kubepods/besteffort/pod11111111-2222-4333-8444-555555555555/" + cid + "\n"
	with := func(f func(*Identity)) Identity {
		id := want
		f(&id)
		return id
	}
	tests := []struct {
		name    string
		id      Identity
		err     error
		cgroup  string
		refused string // Refused says this
		unsure  string // Unproved says this
		cannot  bool   // Unproved wraps ErrCannotTell
	}{
		{name: "proved", id: want, cgroup: inPod},
		{name: "its version and PID are not compared", id: with(func(id *Identity) { id.Version, id.PID = "v9", 1 }), cgroup: inPod},
		{name: "no answer", err: errors.New("exec socket /x: identity: connection refused"), cgroup: inPod, refused: "exec socket /x: identity: connection refused"},
		{name: "another pod's UID", id: with(func(id *Identity) { id.PodUID = "11111111-2222-4333-8444-555555555555" }), cgroup: inPod,
			refused: "exec socket answers for pod kube-system/mount-a (uid 11111111-2222-4333-8444-555555555555, container mount), not the registered one"},
		{name: "another pod's name", id: with(func(id *Identity) { id.PodName = "mount-b" }), cgroup: inPod, refused: "answers for pod kube-system/mount-b (uid " + uid},
		{name: "another namespace", id: with(func(id *Identity) { id.PodNamespace = "default" }), cgroup: inPod, refused: "answers for pod default/mount-a"},
		{name: "another container", id: with(func(id *Identity) { id.ContainerName = "sidecar" }), cgroup: inPod, refused: "container sidecar), not the registered one"},
		{name: "served from another pod's container", id: want, cgroup: otherPod, unsure: "pid 42 is not in a container of pod " + uid},
		{name: "served from the node", id: want, cgroup: "0::/system.slice/mountpod.service\n", unsure: "its cgroup is /system.slice/mountpod.service"},
		{name: "cgroups cannot be told", id: want, cgroup: "0::/\n", cannot: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeConn{id: tc.id, err: tc.err, pid: pid}
			p := Prove(context.Background(), c, want, fakeProc(t, pid, tc.cgroup))
			switch {
			case tc.refused != "":
				if p.Refused == nil || !strings.Contains(p.Refused.Error(), tc.refused) || p.Unproved != nil || p.Proved() || p.PID != 0 || p.ContainerID != "" {
					t.Fatalf("Prove = %+v; want refused saying %q", p, tc.refused)
				}
				if tc.err != nil && !errors.Is(p.Refused, tc.err) {
					t.Errorf("Refused = %v; want the Identity call's error", p.Refused)
				}
			case tc.unsure != "" || tc.cannot:
				if p.Refused != nil || p.Unproved == nil || p.Proved() || p.ContainerID != "" || p.PID != pid {
					t.Fatalf("Prove = %+v; want unproved, with the serving process", p)
				}
				if errors.Is(p.Unproved, ErrCannotTell) != tc.cannot || !strings.Contains(p.Unproved.Error(), tc.unsure) {
					t.Fatalf("Unproved = %v; want one saying %q (cannot tell: %v)", p.Unproved, tc.unsure, tc.cannot)
				}
			default:
				if !p.Proved() || p.ContainerID != cid || p.PID != pid || p.Err() != nil {
					t.Fatalf("Prove = %+v; want container %s proved, served by pid %d", p, cid, pid)
				}
				if r := p.Reason(); r != "exec socket answers for the registered pod and container, served from its container 0123456789ab (pid 42): runtime not asked" {
					t.Errorf("Reason = %q", r)
				}
				return
			}
			if p.Err() == nil || p.Reason() != "" {
				t.Errorf("Err = %v, Reason = %q; want why not, and no reason", p.Err(), p.Reason())
			}
		})
	}
}
