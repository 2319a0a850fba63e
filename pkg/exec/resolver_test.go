package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	testPlugin = "example.com/gluster"
	testUID    = "0c9f6b2e-0000-4000-8000-000000000001"
)

var testReg = registration.Registration{
	PodNamespace: "kube-system", PodName: "gluster-mount-x7k2p", PodUID: testUID, ContainerName: "mount",
}

type env struct {
	dir      string
	rt       *crifake.FakeRuntime
	endpoint string
	procRoot string // ProcRoot of the resolvers, unless the test sets one
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{dir: filepath.Join(t.TempDir(), "plugin-containers"), rt: crifake.NewFakeRuntime()}
	e.endpoint = e.rt.Serve(t)
	return e
}

func (e *env) register(t testing.TB, r registration.Registration) {
	t.Helper()
	if err := registration.Write(e.dir, testPlugin, r); err != nil {
		t.Fatal(err)
	}
}

func (e *env) resolver(t *testing.T, opts Options) *Resolver {
	t.Helper()
	opts.Dir = e.dir
	if opts.Endpoint == "" {
		opts.Endpoint = e.endpoint
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = e.procRoot
	}
	r := NewResolver(opts)
	t.Cleanup(func() { r.Close() })
	return r
}

func (e *env) exec(t *testing.T, opts Options) *Exec {
	t.Helper()
	x, err := e.resolver(t, opts).For(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// running registers testReg and lists its container as running.
func (e *env) running(t *testing.T, id string) {
	t.Helper()
	e.register(t, testReg)
	e.rt.SetContainers(crifake.Container(id, testReg.PodNamespace, testReg.PodName, testReg.PodUID, testReg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
}

func TestResolve(t *testing.T) {
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	ctr := func(id, ns, pod, uid, name string, st runtimeapi.ContainerState) *runtimeapi.Container {
		return crifake.Container(id, ns, pod, uid, name, st)
	}
	tests := []struct {
		name       string
		setup      func(t *testing.T, e *env)
		fallback   bool
		wantID     string
		wantReason Reason
		wantErr    []error  // errors.Is targets
		wantMsg    []string // substrings of the error
	}{{
		name:       "not registered",
		wantReason: ReasonNotRegistered,
	}, {
		name: "running",
		setup: func(t *testing.T, e *env) {
			e.register(t, testReg)
			e.rt.SetContainers(
				ctr("old", "kube-system", "gluster-mount-x7k2p", testUID, "mount", exited),
				ctr("abc", "kube-system", "gluster-mount-x7k2p", testUID, "mount", running),
				ctr("side", "kube-system", "gluster-mount-x7k2p", testUID, "sidecar", running))
		},
		wantID:     "abc",
		wantReason: ReasonRunning,
	}, {
		name: "container exited",
		setup: func(t *testing.T, e *env) {
			e.register(t, testReg)
			e.rt.SetContainers(ctr("old", "kube-system", "gluster-mount-x7k2p", testUID, "mount", exited))
		},
		wantReason: ReasonNotRunning,
	}, {
		name: "pod replaced, old registration stays",
		setup: func(t *testing.T, e *env) {
			e.register(t, testReg)
			e.rt.SetContainers(ctr("new", "kube-system", "gluster-mount-q9z8w", "another-uid", "mount", running))
		},
		wantReason: ReasonNotRunning,
	}, {
		name: "pod name mismatch",
		setup: func(t *testing.T, e *env) {
			e.register(t, testReg)
			e.rt.SetContainers(ctr("abc", "kube-system", "impostor", testUID, "mount", running))
		},
		wantErr: []error{ErrMismatch},
		wantMsg: []string{"kube-system/impostor", "example.com~gluster.json"},
	}, {
		name: "namespace mismatch",
		setup: func(t *testing.T, e *env) {
			e.register(t, testReg)
			e.rt.SetContainers(ctr("abc", "default", "gluster-mount-x7k2p", testUID, "mount", running))
		},
		wantErr: []error{ErrMismatch},
	}, {
		name: "untrusted registration",
		setup: func(t *testing.T, e *env) {
			e.running(t, "abc")
			if err := os.Chmod(filepath.Join(e.dir, "example.com~gluster.json"), 0o666); err != nil {
				t.Fatal(err)
			}
		},
		fallback: true, // never a reason to fall back
		wantErr:  []error{registration.ErrUntrusted},
		wantMsg:  []string{"example.com~gluster.json", "writable by group or others"},
	}, {
		name: "invalid registration",
		setup: func(t *testing.T, e *env) {
			if err := os.MkdirAll(e.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.dir, "example.com~gluster.json"), []byte(`{"podName":"x"`), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		wantMsg: []string{"example.com~gluster.json", "malformed JSON"},
	}, {
		name: "runtime unreachable",
		setup: func(t *testing.T, e *env) {
			e.running(t, "abc")
			e.rt.Stop()
		},
		wantErr: []error{ErrRuntimeUnavailable},
		wantMsg: []string{"plugin example.com/gluster", "unix://", "cri.sock"},
	}, {
		name: "runtime unreachable, fallback",
		setup: func(t *testing.T, e *env) {
			e.running(t, "abc")
			e.rt.Stop()
		},
		fallback:   true,
		wantReason: ReasonRuntimeFallback,
	}, {
		name: "list fails",
		setup: func(t *testing.T, e *env) {
			e.running(t, "abc")
			e.rt.SetListError(status.Error(codes.Internal, "boom"))
		},
		wantErr: []error{ErrRuntimeUnavailable},
		wantMsg: []string{"boom"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			r := e.resolver(t, Options{FallbackOnRuntimeError: tc.fallback})
			d, err := r.Resolve(context.Background(), testPlugin)
			if len(tc.wantErr) > 0 || len(tc.wantMsg) > 0 {
				if err == nil {
					t.Fatalf("Resolve = %v, want an error", d)
				}
				for _, target := range tc.wantErr {
					if !errors.Is(err, target) {
						t.Errorf("error %q does not match %v", err, target)
					}
				}
				for _, s := range tc.wantMsg {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if d.ContainerID != tc.wantID || d.Reason != tc.wantReason || d.Plugin != testPlugin {
				t.Errorf("Resolve = %+v, want container %q reason %q", d, tc.wantID, tc.wantReason)
			}
			if d.OnHost() != (tc.wantID == "") {
				t.Errorf("OnHost = %v", d.OnHost())
			}
		})
	}
}

func TestResolveReadsEveryTime(t *testing.T) {
	e := newEnv(t)
	x := e.exec(t, Options{})
	ctx := context.Background()
	want := func(id string, reason Reason) {
		t.Helper()
		d, err := x.Resolve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.ContainerID != id || d.Reason != reason {
			t.Fatalf("decision %v, want %q (%s)", d, id, reason)
		}
	}
	want("", ReasonNotRegistered)
	if e.rt.ListCalls() != 0 {
		t.Errorf("runtime asked %d times without a registration", e.rt.ListCalls())
	}
	e.running(t, "abc")
	want("abc", ReasonRunning)
	e.rt.SetContainers()
	want("", ReasonNotRunning)
	e.running(t, "def")
	want("def", ReasonRunning)
	if ok, err := registration.RemoveIfOwned(e.dir, testPlugin, testUID); err != nil || !ok {
		t.Fatalf("RemoveIfOwned = %v, %v", ok, err)
	}
	want("", ReasonNotRegistered)
}

// probeOnly makes endpoint discovery probe only the given sockets, so that
// what the test machine runs (a default containerd socket, say) does not
// matter.
func probeOnly(t *testing.T, endpoints ...string) {
	t.Helper()
	t.Setenv(cri.EnvEndpoint, "")
	saved := cri.DefaultEndpoints
	t.Cleanup(func() { cri.DefaultEndpoints = saved })
	cri.DefaultEndpoints = endpoints
}

// TestNoEndpointFailsClosed: with no endpoint configured and none of the
// probed sockets there, a registered plugin's decision fails, naming the
// reason, instead of running on the host.
func TestNoEndpointFailsClosed(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	missing := "unix://" + filepath.Join(t.TempDir(), "containerd.sock")
	probeOnly(t, missing)
	r := NewResolver(Options{Dir: e.dir})
	defer r.Close()
	d, err := r.Resolve(context.Background(), testPlugin)
	if !errors.Is(err, ErrRuntimeUnavailable) || !errors.Is(err, cri.ErrNoEndpoint) {
		t.Fatalf("Resolve = %v, %v with no runtime; want an error wrapping ErrRuntimeUnavailable and cri.ErrNoEndpoint", d, err)
	}
	if !strings.Contains(err.Error(), missing) {
		t.Errorf("the error does not name the probed endpoint %s: %v", missing, err)
	}

	// The same resolver finds the runtime once a probed socket is there.
	probeOnly(t, missing, e.endpoint)
	d, err = r.Resolve(context.Background(), testPlugin)
	if err != nil || d.ContainerID != "abc" {
		t.Fatalf("Resolve with the runtime at a probed endpoint = %v, %v; want container abc", d, err)
	}
}

func TestForRejectsBadPluginName(t *testing.T) {
	r := NewResolver(Options{Dir: t.TempDir()})
	for _, name := range []string{"", "../etc/passwd", "a/b/c", ".hidden"} {
		if _, err := r.For(name); err == nil {
			t.Errorf("For(%q) succeeded", name)
		}
	}
}

func TestDecisionString(t *testing.T) {
	reg := testReg
	d := Decision{Plugin: testPlugin, Registration: &reg, ContainerID: "abc", Reason: ReasonRunning}
	want := "plugin example.com/gluster: container abc (registered container is running; pod kube-system/gluster-mount-x7k2p (uid " + testUID + ", container mount))"
	if d.String() != want {
		t.Errorf("String() =\n%s\nwant\n%s", d, want)
	}
	if h := (Decision{Plugin: testPlugin, Reason: ReasonNotRegistered}); h.Where() != "host" {
		t.Errorf("Where() = %q", h.Where())
	}
}

func TestClosedResolver(t *testing.T) {
	e := newEnv(t)
	e.running(t, "abc")
	r := e.resolver(t, Options{})
	if _, err := r.Resolve(context.Background(), testPlugin); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if _, err := r.Resolve(context.Background(), testPlugin); !errors.Is(err, ErrRuntimeUnavailable) {
		t.Errorf("Resolve after Close: %v", err)
	}
}

func TestContainerCache(t *testing.T) {
	running := runtimeapi.ContainerState_CONTAINER_RUNNING
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	ctr := func(id, uid string, st runtimeapi.ContainerState) *runtimeapi.Container {
		return crifake.Container(id, testReg.PodNamespace, testReg.PodName, uid, testReg.ContainerName, st)
	}
	// The fake answers like containerd: an exec in a container that is not
	// running fails before starting.
	setup := func(t *testing.T, opts Options) (*env, *Exec) {
		e := newEnv(t)
		e.running(t, "abc")
		e.rt.SetExec(func(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
			c, ok := e.rt.Lookup(req.GetContainerId())
			if !ok {
				return nil, status.Errorf(codes.NotFound, "container %q: not found", req.GetContainerId())
			}
			if c.GetState() != running {
				return nil, status.Error(codes.Unknown, "container is in CONTAINER_EXITED state")
			}
			return &runtimeapi.ExecSyncResponse{Stdout: []byte(req.GetContainerId())}, nil
		})
		return e, e.exec(t, opts)
	}
	where := func(t *testing.T, x *Exec) (string, Decision) {
		t.Helper()
		cmd := x.Command("printf", "host")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := cmd.(*Cmd).Decision()
		if d.OnHost() != (string(out) == "host") {
			t.Fatalf("decision %v, output %q", d, out)
		}
		return string(out), d
	}
	t.Run("hit", func(t *testing.T) {
		e, x := setup(t, Options{})
		for range 5 {
			if got, _ := where(t, x); got != "abc" {
				t.Fatalf("ran in %q", got)
			}
		}
		if n := e.rt.ListCalls(); n != 1 {
			t.Errorf("%d ListContainers calls for 5 commands, want 1", n)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		e, x := setup(t, Options{NoContainerCache: true})
		for range 5 {
			if _, d := where(t, x); d.Cached {
				t.Error("decision from the cache")
			}
		}
		if n := e.rt.ListCalls(); n != 5 {
			t.Errorf("%d ListContainers calls for 5 commands, want 5", n)
		}
	})
	t.Run("container restarted", func(t *testing.T) {
		e, x := setup(t, Options{})
		where(t, x)
		e.rt.SetContainers(ctr("abc", testUID, exited), ctr("def", testUID, running))
		if got, d := where(t, x); got != "def" || d.Cached {
			t.Errorf("after restart ran in %q (%v), want def", got, d)
		}
	})
	t.Run("container stopped", func(t *testing.T) {
		e, x := setup(t, Options{})
		where(t, x)
		e.rt.SetContainers(ctr("abc", testUID, exited))
		if got, d := where(t, x); got != "host" || d.Reason != ReasonNotRunning {
			t.Errorf("after stop ran in %q (%v), want host", got, d)
		}
	})
	t.Run("pod replaced", func(t *testing.T) {
		e, x := setup(t, Options{})
		where(t, x)
		// The old pod's container keeps running a while; the new pod
		// registered: its container must be used, never the cached one.
		newReg := testReg
		newReg.PodUID = "new-uid"
		e.rt.SetContainers(ctr("abc", testUID, running), ctr("new", "new-uid", running))
		e.register(t, newReg)
		if got, _ := where(t, x); got != "new" {
			t.Errorf("after the new pod registered ran in %q, want new", got)
		}
	})
	t.Run("unregistered", func(t *testing.T) {
		_, x := setup(t, Options{})
		where(t, x)
		if ok, err := registration.RemoveIfOwned(x.r.dir, testPlugin, testUID); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if got, _ := where(t, x); got != "host" {
			t.Errorf("after unregistering ran in %q", got)
		}
	})
	t.Run("runtime down, fallback", func(t *testing.T) {
		e, x := setup(t, Options{FallbackOnRuntimeError: true})
		where(t, x)
		e.rt.Stop()
		if got, d := where(t, x); got != "host" || d.Reason != ReasonRuntimeFallback {
			t.Errorf("runtime down ran in %q (%v), want host", got, d)
		}
	})
	t.Run("runtime down, fail closed", func(t *testing.T) {
		e, x := setup(t, Options{})
		where(t, x)
		e.rt.Stop()
		if err := x.Command("x").Run(); err == nil {
			t.Error("ran with the runtime down")
		}
	})
}

// ownRuntime is a volume host's own Runtime, in process: it lists one
// running container for testReg and answers every exec with its argv.
type ownRuntime struct {
	mu    sync.Mutex
	execs [][]string
}

func (o *ownRuntime) Endpoint() string { return "own://runtime" }

func (o *ownRuntime) FindRunning(_ context.Context, podUID, name string) ([]*runtimeapi.Container, error) {
	if podUID != testReg.PodUID || name != testReg.ContainerName {
		return nil, nil
	}
	return []*runtimeapi.Container{crifake.Container("own-1", testReg.PodNamespace, testReg.PodName, podUID, name, runtimeapi.ContainerState_CONTAINER_RUNNING)}, nil
}

func (o *ownRuntime) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.execs = append(o.execs, cmd)
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(id + ": " + strings.Join(cmd, " "))}, nil
}

// TestOptionsConnTakesAnyRuntime: a volume host can hand the resolver a
// runtime of its own (Options.Conn is an interface); the resolver decides
// and runs through it (the CRI path) and does not close it.
func TestOptionsConnTakesAnyRuntime(t *testing.T) {
	e := newEnv(t)
	e.register(t, testReg)
	own := &ownRuntime{}
	r := NewResolver(Options{Dir: e.dir, Conn: own, ExecMode: ModeCRI})
	x, err := r.For(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	out, err := x.Command("echo", "hi").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "own-1: echo hi"; got != want {
		t.Errorf("output through the host's own runtime = %q, want %q", got, want)
	}
	d, err := r.Resolve(context.Background(), testPlugin)
	if err != nil || d.ContainerID != "own-1" || d.Endpoint != "own://runtime" || d.Via != ViaExecSync {
		t.Errorf("Resolve = %+v, %v; want container own-1 through own://runtime, via ExecSync", d, err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close with a runtime the resolver did not dial: %v", err)
	}
	if len(own.execs) != 1 {
		t.Errorf("the host's runtime ran %d commands, want 1: %q", len(own.execs), own.execs)
	}
}
