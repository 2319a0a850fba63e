package exec

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
)

// Benchmarks report the ratio of the resolver's path to the raw operation
// it wraps, both measured in the same run and interleaved iteration by
// iteration so that drift of a shared machine hits both alike. With
// MC_TEST_CRI_ENDPOINT they use a real runtime (see realruntime_test.go);
// without, the in-process fake that runs commands locally, which only
// shows the resolver's own cost.

// benchTarget returns an executor of a registered, running container and
// the raw ExecSync on the same connection.
func benchTarget(b *testing.B, opts Options) (*Exec, func() error) {
	b.Helper()
	var (
		r  *Resolver
		id string
	)
	if p := realRuntimeOrNil(b); p != nil {
		r, id = p.resolver(b, opts), p.containerID
	} else {
		e := &env{dir: b.TempDir() + "/plugin-containers", rt: crifake.NewFakeRuntime()}
		e.endpoint = e.rt.Serve(b)
		e.register(b, testReg)
		id = "abc"
		e.rt.SetContainers(crifake.Container(id, testReg.PodNamespace, testReg.PodName, testReg.PodUID, testReg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
		e.rt.SetExec(crifake.RunLocally)
		opts.Dir, opts.Endpoint = e.dir, e.endpoint
		r = NewResolver(opts)
		b.Cleanup(func() { r.Close() })
	}
	x, err := r.For(testPlugin)
	if err != nil {
		b.Fatal(err)
	}
	if err := x.Command("true").Run(); err != nil { // dial and warm up
		b.Fatal(err)
	}
	if _, err := r.connection(); err != nil {
		b.Fatal(err)
	}
	raw := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout+5*time.Second)
		defer cancel()
		_, err := r.own.Runtime().ExecSync(ctx, &runtimeapi.ExecSyncRequest{
			ContainerId: id, Cmd: []string{"true"}, Timeout: cri.TimeoutSeconds(DefaultTimeout),
		})
		return err
	}
	return x, raw
}

func realRuntimeOrNil(b *testing.B) *realPod {
	if !realRuntimeConfigured() {
		return nil
	}
	return realRuntime(b)
}

// pair times a and b alternately, b.N times each, and reports both and
// their ratio.
func pair(b *testing.B, rawName, oursName string, raw, ours func() error) (tRaw, tOurs time.Duration) {
	b.Helper()
	b.ResetTimer()
	for i := range b.N {
		first, second := raw, ours
		if i%2 == 1 { // alternate the order too
			first, second = ours, raw
		}
		s := time.Now()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		m := time.Now()
		if err := second(); err != nil {
			b.Fatal(err)
		}
		e := time.Now()
		if i%2 == 0 {
			tRaw += m.Sub(s)
			tOurs += e.Sub(m)
		} else {
			tOurs += m.Sub(s)
			tRaw += e.Sub(m)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), rawName+"-ns/op")
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), oursName+"-ns/op")
	b.ReportMetric(100*(float64(tOurs)/float64(tRaw)-1), "overhead-%")
	return tRaw, tOurs
}

// BenchmarkLive: a command in the registered container through the
// resolver (registration read, cached container, ExecSync) against a raw
// ExecSync on the same connection.
func BenchmarkLive(b *testing.B) {
	x, raw := benchTarget(b, Options{})
	pair(b, "raw-execsync", "resolver", raw, func() error { return x.Command("true").Run() })
}

// BenchmarkLiveUncached is BenchmarkLive asking the runtime for the
// container every time (NoContainerCache).
func BenchmarkLiveUncached(b *testing.B) {
	x, raw := benchTarget(b, Options{NoContainerCache: true})
	pair(b, "raw-execsync", "resolver", raw, func() error { return x.Command("true").Run() })
}

// BenchmarkFallback: a command of an unregistered plugin through the
// resolver (registration read, host exec) against a raw os/exec.
func BenchmarkFallback(b *testing.B) {
	r := NewResolver(Options{Dir: b.TempDir() + "/plugin-containers"})
	defer r.Close()
	x, err := r.For(testPlugin)
	if err != nil {
		b.Fatal(err)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	pair(b, "raw-osexec", "resolver",
		func() error { return exec.Command(truePath).Run() },
		func() error { return x.Command(truePath).Run() })
}

// BenchmarkParallel16: batches of 16 concurrent commands through the
// resolver against batches of 16 concurrent raw ExecSync calls; reports
// the resolver's throughput relative to raw.
func BenchmarkParallel16(b *testing.B) {
	x, raw := benchTarget(b, Options{})
	batch := func(f func() error) func() error {
		return func() error {
			var wg sync.WaitGroup
			errs := make([]error, 16)
			for i := range 16 {
				wg.Go(func() { errs[i] = f() })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	tRaw, tOurs := pair(b, "raw-batch", "resolver-batch", batch(raw), batch(func() error { return x.Command("true").Run() }))
	b.ReportMetric(float64(tRaw)/float64(tOurs), "throughput-ratio")
}
