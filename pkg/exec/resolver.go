package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/pkg/cri"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	// DefaultTimeout bounds a command run in a container when its context
	// has no deadline. ExecSync always gets a timeout: containerd waits for
	// the exec's stdout and stderr to close, which a daemonising utility may
	// never do.
	DefaultTimeout = 2 * time.Minute

	// DefaultRuntimeTimeout bounds the ListContainers call of a decision.
	DefaultRuntimeTimeout = 10 * time.Second
)

var (
	// ErrRuntimeUnavailable is wrapped by the error of a decision when a
	// registration exists but the runtime could not be asked about it, and
	// the caller did not opt into falling back to the host.
	ErrRuntimeUnavailable = errors.New("container runtime unavailable")

	// ErrMismatch is wrapped by the error of a decision when the running
	// container with the registered pod UID belongs to a pod of another
	// name or namespace than the registration says.
	ErrMismatch = errors.New("registration does not match the running pod")

	// ErrTimeout is wrapped, together with [context.DeadlineExceeded], by the
	// error of a command in a container that ran out of time.
	ErrTimeout = errors.New("command timed out")

	// ErrStdinUnsupported is returned by a command that goes to a container
	// through CRI ExecSync and was given standard input that may hold data:
	// ExecSync has none. Through the exec socket standard input is
	// streamed.
	ErrStdinUnsupported = errors.New("standard input is not supported in a container (CRI ExecSync has no stdin)")
)

// Options configures a [Resolver]. The zero value is usable: the default
// registration directory, the runtime endpoint from the environment or the
// probed defaults, and k8s.io/utils/exec on the host.
type Options struct {
	// Dir is the registration directory; default [registration.DefaultDir].
	Dir string
	// Endpoint is the CRI runtime endpoint; see [cri.ResolveEndpoint] for
	// what an empty one means. Ignored when Conn is set.
	Endpoint string
	// Conn is an existing runtime connection to share (a [*cri.Conn], or
	// a volume host's own [Runtime] in its tests). The resolver does not
	// close it. When nil, the resolver dials Endpoint on first need and
	// closes that connection in [Resolver.Close].
	Conn Runtime
	// Host runs commands on the host; default utilexec.New(). Use
	// [NewNsenter] when the caller itself runs in a container.
	Host utilexec.Interface
	// FallbackOnRuntimeError runs commands on the host when a registration
	// exists but the runtime cannot be reached or fails to list containers.
	// The default is to fail closed.
	FallbackOnRuntimeError bool
	// Timeout bounds a command in a container whose context has no
	// deadline; default [DefaultTimeout].
	Timeout time.Duration
	// RuntimeTimeout bounds the ListContainers call of each decision;
	// default [DefaultRuntimeTimeout].
	RuntimeTimeout time.Duration
	// Logger receives one debug record per decision; nil discards them.
	Logger *slog.Logger
	// NoContainerCache makes every command ask the runtime for the running
	// container instead of reusing the one found for the same registration;
	// see "Container cache" in the package documentation.
	NoContainerCache bool
	// ExecMode chooses how commands reach a live container: [ModeAuto]
	// (the default), [ModeCRI] or [ModeSocket]; see "Exec fast path" in the
	// package documentation.
	ExecMode ExecMode
	// SocketTimeout bounds the Identity call that checks an exec socket;
	// default [DefaultSocketTimeout].
	SocketTimeout time.Duration
	// Observer, when set, is told of every command's way, result and
	// duration (never its arguments); see "Observing commands" in the
	// package documentation. [LogObserver] logs them.
	Observer Observer
	// BatchDir, when set, is a directory only root may write where the
	// commands for one container through ExecSync meet, in this process
	// and in others with the same BatchDir, so that those waiting at once
	// go in one ExecSync (see "Batches" in the package documentation);
	// only for a registration that advertises a batch program
	// (registration.Registration's ExecBatch).
	BatchDir string
	// ProcRoot is the procfs of the caller's own PID namespace, where the
	// cgroups of the process serving an exec socket are read (see "Exec
	// fast path" in the package documentation); default /proc.
	ProcRoot string
}

// Resolver decides, each time a command runs, whether a volume plugin's
// utility runs in the plugin's registered mount container or on the host,
// and hands out a utilexec.Interface per plugin that follows the decision.
// It is safe for concurrent use; all plugins share one runtime connection.
type Resolver struct {
	dir            string
	endpoint       string
	host           utilexec.Interface
	fallback       bool
	timeout        time.Duration
	runtimeTimeout time.Duration
	log            *slog.Logger

	mu      sync.Mutex
	conn    Runtime
	own     *cri.Conn // the connection the resolver dialled, closed by Close
	closed  bool
	noCache bool
	cache   map[string]cached // plugin -> container found for a registration

	batchDir      string
	batchLeaders  int           // tests: batches in flight per container; default batchLeaders
	batchLook     func()        // tests: called at each look of a caller waiting for its batch
	batchExtra    time.Duration // tests: a batch's overhead; default batchOverhead
	batchWarn     sync.Once
	mode          ExecMode
	socketTimeout time.Duration
	procRoot      string
	sockets       map[string]*socketEntry // socket path -> client
	observer      Observer
}

// cached is the running container found for a registration.
type cached struct {
	reg         registration.Registration
	containerID string
	endpoint    string
	via         Via
	viaReason   string
	socket      string
}

// NewResolver returns a resolver. It does no I/O: the registration is read
// and the runtime dialled when a command runs.
func NewResolver(opts Options) *Resolver {
	r := &Resolver{
		dir:            opts.Dir,
		endpoint:       opts.Endpoint,
		host:           opts.Host,
		fallback:       opts.FallbackOnRuntimeError,
		timeout:        opts.Timeout,
		runtimeTimeout: opts.RuntimeTimeout,
		log:            opts.Logger,
		conn:           opts.Conn,
		noCache:        opts.NoContainerCache,
		cache:          map[string]cached{},
		mode:           opts.ExecMode,
		socketTimeout:  opts.SocketTimeout,
		procRoot:       opts.ProcRoot,
		batchDir:       opts.BatchDir,
		sockets:        map[string]*socketEntry{},
		observer:       opts.Observer,
	}
	if r.mode == "" {
		r.mode = ModeAuto
	}
	if r.socketTimeout <= 0 {
		r.socketTimeout = DefaultSocketTimeout
	}
	if r.procRoot == "" {
		r.procRoot = "/proc"
	}
	if r.dir == "" {
		r.dir = registration.DefaultDir
	}
	if r.host == nil {
		r.host = utilexec.New()
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	if r.runtimeTimeout <= 0 {
		r.runtimeTimeout = DefaultRuntimeTimeout
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.conn != nil {
		r.endpoint = r.conn.Endpoint()
	}
	return r
}

// For returns the executor of plugin, which must be a valid plugin name
// (see [registration.ValidatePluginName]).
func (r *Resolver) For(plugin string) (*Exec, error) {
	if err := registration.ValidatePluginName(plugin); err != nil {
		return nil, err
	}
	return &Exec{r: r, plugin: plugin}, nil
}

// Close closes the runtime connection the resolver opened. Executors handed
// out before keep working on the host; a decision that needs the runtime
// fails afterwards.
func (r *Resolver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for path, e := range r.sockets {
		e.c.Close()
		delete(r.sockets, path)
	}
	if r.own != nil {
		return r.own.Close()
	}
	return nil
}

// Runtime is what the resolver asks of a CRI runtime: [*cri.Conn] is the
// real one. A volume host that must test a fault a real runtime cannot
// produce on demand can pass its own, or serve package critest's FakeRuntime and
// set [Options.Endpoint].
type Runtime interface {
	// Endpoint names the runtime in errors and decisions.
	Endpoint() string
	// FindRunning lists the running containers of a pod by name.
	FindRunning(ctx context.Context, podUID, containerName string) ([]*runtimeapi.Container, error)
	// ExecSync runs cmd in a container, bounded by timeout.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

var _ Runtime = (*cri.Conn)(nil)

// Reason says why a [Decision] was taken.
type Reason = boundary.Reason

// The reasons of a decision.
const (
	// ReasonRunning: the registered container is running; commands run in it.
	ReasonRunning = boundary.ReasonRunning
	// ReasonNotRegistered: there is no registration; commands run on the host.
	ReasonNotRegistered = boundary.ReasonNotRegistered
	// ReasonNotRunning: the registered pod has no running container of the
	// registered name (stopped, restarting, or the pod was replaced and its
	// successor has not registered yet); commands run on the host.
	ReasonNotRunning = boundary.ReasonNotRunning
	// ReasonRuntimeFallback: the runtime could not be asked and the caller
	// opted into falling back; commands run on the host.
	ReasonRuntimeFallback = boundary.ReasonRuntimeFallback
)

// Decision is where a plugin's commands run at one moment, and why.
type Decision struct {
	// Plugin is the volume plugin name.
	Plugin string
	// Registration is the plugin's registration; nil when not registered.
	Registration *registration.Registration
	// ContainerID is the container commands run in; empty for the host.
	ContainerID string
	// Endpoint is the runtime endpoint asked; empty when it was not needed.
	Endpoint string
	// Reason says why.
	Reason Reason
	// Detail is the runtime error behind [ReasonRuntimeFallback].
	Detail string
	// Cached is true when the container was the one found before for the
	// same registration rather than asked of the runtime this time.
	Cached bool
	// Via is how commands reach the container: [ViaSocket] or
	// [ViaExecSync]; empty on the host.
	Via Via
	// ViaReason says why Via was chosen (why the exec socket is not used,
	// when it is not).
	ViaReason string
	// Socket is the exec socket's path, when the registration advertises
	// one and it is inside the registration directory.
	Socket string
}

// OnHost reports whether commands run on the host.
func (d Decision) OnHost() bool { return d.ContainerID == "" }

// Where returns "container <ID>" or "host".
func (d Decision) Where() string {
	if d.OnHost() {
		return "host"
	}
	return "container " + d.ContainerID
}

// String returns a one-line summary for logs and the status command.
func (d Decision) String() string {
	s := fmt.Sprintf("plugin %s: %s (%s", d.Plugin, d.Where(), d.Reason)
	if d.Via != "" {
		s += fmt.Sprintf("; via %s: %s", d.Via, d.ViaReason)
	}
	if d.Registration != nil {
		s += "; pod " + d.Registration.String()
	}
	if d.Detail != "" {
		s += "; " + d.Detail
	}
	return s + ")"
}

// LogValue groups the decision's fields in structured logs.
func (d Decision) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("plugin", d.Plugin),
		slog.String("where", d.Where()),
		slog.String("reason", string(d.Reason)),
	}
	if d.Registration != nil {
		attrs = append(attrs,
			slog.String("pod", d.Registration.PodNamespace+"/"+d.Registration.PodName),
			slog.String("podUID", d.Registration.PodUID),
			slog.String("container", d.Registration.ContainerName))
	}
	if d.Detail != "" {
		attrs = append(attrs, slog.String("detail", d.Detail))
	}
	if d.Via != "" {
		attrs = append(attrs, slog.String("via", string(d.Via)), slog.String("viaReason", d.ViaReason))
	}
	return slog.GroupValue(attrs...)
}

// Resolve decides where plugin's commands run now: it reads the
// registration afresh and, if there is one, asks the runtime for the
// registered pod's running container (never from the cache). An untrusted or invalid registration,
// a running container of another pod name or namespace, and (unless the
// caller opted into falling back) a runtime that cannot be asked are errors:
// a registered plugin never silently runs on the host.
func (r *Resolver) Resolve(ctx context.Context, plugin string) (Decision, error) {
	return r.decide(ctx, plugin, false)
}

// decide is Resolve that may reuse the container found for the same
// registration when useCache is set.
func (r *Resolver) decide(ctx context.Context, plugin string, useCache bool) (Decision, error) {
	d, err := r.resolve(ctx, plugin, useCache && !r.noCache)
	if err != nil {
		r.log.DebugContext(ctx, "exec decision failed", "plugin", plugin, "err", err)
		return d, err
	}
	r.log.DebugContext(ctx, "exec decision", "decision", d)
	return d, nil
}

func (r *Resolver) resolve(ctx context.Context, plugin string, useCache bool) (Decision, error) {
	d := Decision{Plugin: plugin}
	reg, ok, err := registration.Read(r.dir, plugin)
	if err != nil {
		r.forget(plugin, "")
		return d, fmt.Errorf("plugin %s: %w", plugin, err)
	}
	if !ok {
		r.forget(plugin, "")
		d.Reason = ReasonNotRegistered
		return d, nil
	}
	d.Registration = &reg
	if useCache {
		r.mu.Lock()
		c, hit := r.cache[plugin]
		r.mu.Unlock()
		if hit && c.reg == reg {
			d.ContainerID, d.Endpoint, d.Reason, d.Cached = c.containerID, c.endpoint, ReasonRunning, true
			d.Via, d.ViaReason, d.Socket = c.via, c.viaReason, c.socket
			return d, nil
		}
	}
	r.forget(plugin, "")
	// A process of the registered container answering on its exec socket
	// proves the container runs: the runtime is asked only when the socket
	// cannot prove it (see "Decision").
	var probe socketProbe
	if r.mode != ModeCRI {
		probe = r.probeSocket(ctx, reg)
		if probe.proved() {
			d.ContainerID, d.Reason = probe.proof.ContainerID, ReasonRunning
			d.Via, d.ViaReason, d.Socket = ViaSocket, probe.proof.Reason(), probe.path
			r.remember(plugin, reg, d)
			return d, nil
		}
		if probe.why == "" {
			r.log.DebugContext(ctx, "exec socket answers, but the kernel does not prove its container runs; asking the runtime",
				"plugin", plugin, "pid", probe.proof.PID, "why", probe.proof.Unproved)
		}
	}
	d.Endpoint = r.endpoint
	conn, err := r.connection()
	if err != nil {
		return r.runtimeFailed(d, err)
	}
	d.Endpoint = conn.Endpoint()
	lctx, cancel := context.WithTimeout(ctx, r.runtimeTimeout)
	defer cancel()
	cs, err := conn.FindRunning(lctx, reg.PodUID, reg.ContainerName)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up; that says nothing about the runtime.
			return d, fmt.Errorf("plugin %s: %w: %w", plugin, ctx.Err(), err)
		}
		return r.runtimeFailed(d, err)
	}
	if len(cs) == 0 {
		d.Reason = ReasonNotRunning
		return d, nil
	}
	c := cs[0]
	l := c.GetLabels()
	if l[cri.LabelPodName] != reg.PodName || l[cri.LabelPodNamespace] != reg.PodNamespace {
		path, _ := registration.Path(r.dir, plugin)
		return d, fmt.Errorf("plugin %s: registration %s: %w: it names pod %s/%s but container %s of pod UID %s belongs to pod %s/%s",
			plugin, path, ErrMismatch, reg.PodNamespace, reg.PodName, c.GetId(), reg.PodUID,
			l[cri.LabelPodNamespace], l[cri.LabelPodName])
	}
	d.ContainerID = c.GetId()
	d.Reason = ReasonRunning
	if err := r.chooseVia(&d, reg, probe); err != nil {
		return d, err
	}
	r.remember(plugin, reg, d)
	return d, nil
}

// remember caches d, a decision for a running container, for reg.
func (r *Resolver) remember(plugin string, reg registration.Registration, d Decision) {
	r.mu.Lock()
	r.cache[plugin] = cached{reg: reg, containerID: d.ContainerID, endpoint: d.Endpoint, via: d.Via, viaReason: d.ViaReason, socket: d.Socket}
	r.mu.Unlock()
}

// forget drops the cached container of plugin (only if it is containerID,
// when that is not empty).
func (r *Resolver) forget(plugin, containerID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.cache[plugin]; ok && (containerID == "" || c.containerID == containerID) {
		delete(r.cache, plugin)
	}
}

// runtimeFailed fails closed, or falls back when the caller opted in.
func (r *Resolver) runtimeFailed(d Decision, err error) (Decision, error) {
	if r.fallback {
		d.Reason = ReasonRuntimeFallback
		d.Detail = err.Error()
		return d, nil
	}
	ep := d.Endpoint
	if ep == "" {
		ep = "(none found)"
	}
	return d, fmt.Errorf("plugin %s is registered to pod %s but runtime %s cannot be asked: %w: %w",
		d.Plugin, d.Registration, ep, ErrRuntimeUnavailable, err)
}

// connection returns the shared runtime connection, dialling it on first
// need. A failed dial (no endpoint found) is not remembered: the runtime may
// appear later.
func (r *Resolver) connection() (Runtime, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("resolver closed")
	}
	if r.conn == nil {
		c, err := cri.Dial(r.endpoint)
		if err != nil {
			return nil, err
		}
		r.conn, r.own = c, c
	}
	return r.conn, nil
}
