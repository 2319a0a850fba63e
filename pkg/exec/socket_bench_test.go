package exec

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// socketBenchTargets returns two executors of the same registered, running
// container: one through its exec socket, one through CRI ExecSync (mode
// cri). With MC_TEST_CRI_ENDPOINT the container is real and ExecSync goes
// to the real runtime; the exec service runs in this process (on the host,
// answering as the pod), which costs what it costs in the mount pod: a
// gRPC stream and a fork/exec.
func socketBenchTargets(b *testing.B) (viaSocket, viaCRI *Exec) {
	b.Helper()
	base, err := os.MkdirTemp("", "mcb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "pc")
	reg := testReg
	var opts Options
	if p := realRuntimeOrNil(b); p != nil {
		reg = p.reg
		opts.Conn = p.conn
	} else {
		rt := crifake.NewFakeRuntime()
		opts.Endpoint = rt.Serve(b)
		rt.SetContainers(crifake.Container("abc", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
		rt.SetExec(crifake.RunLocally)
	}
	reg.ExecSocket = execclient.SocketName(reg.PodUID)
	if err := registration.Write(dir, testPlugin, reg); err != nil {
		b.Fatal(err)
	}
	execservertest.Serve(b, filepath.Join(dir, reg.ExecSocket), execserver.Config{Identity: execserver.Identity{
		PodNamespace: reg.PodNamespace, PodName: reg.PodName, PodUID: reg.PodUID, ContainerName: reg.ContainerName,
	}})
	opts.Dir = dir
	// The service runs in this process, not in the container: no process
	// table, so the peer check cannot tell and the Identity answer decides.
	opts.ProcRoot = filepath.Join(base, "no-proc")
	for _, t := range []struct {
		mode ExecMode
		x    **Exec
		via  Via
	}{{ModeSocket, &viaSocket, ViaSocket}, {ModeCRI, &viaCRI, ViaExecSync}} {
		o := opts
		o.ExecMode = t.mode
		r := NewResolver(o)
		b.Cleanup(func() { r.Close() })
		x, err := r.For(testPlugin)
		if err != nil {
			b.Fatal(err)
		}
		cmd := x.Command("true")
		if err := cmd.Run(); err != nil { // dial and warm up
			b.Fatal(err)
		}
		if d, _ := cmd.(*Cmd).Decision(); d.Via != t.via {
			b.Fatalf("warm-up ran via %s, want %s", d.Via, t.via)
		}
		*t.x = x
	}
	return viaSocket, viaCRI
}

// pairMedians times cri and socket alternately (and in alternating order),
// b.N times each, and reports both medians, both means and the speed-up of
// the socket path (ExecSync mean / socket mean).
func pairMedians(b *testing.B, cri, socket func() error) {
	b.Helper()
	tc, ts := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	timeIt := func(f func() error) time.Duration {
		s := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(s)
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			tc = append(tc, timeIt(cri))
			ts = append(ts, timeIt(socket))
		} else {
			ts = append(ts, timeIt(socket))
			tc = append(tc, timeIt(cri))
		}
	}
	b.StopTimer()
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	var sc, ss time.Duration
	for i := range tc {
		sc += tc[i]
		ss += ts[i]
	}
	b.ReportMetric(float64(median(tc).Microseconds())/1000, "execsync-median-ms")
	b.ReportMetric(float64(median(ts).Microseconds())/1000, "socket-median-ms")
	b.ReportMetric(float64(sc.Microseconds())/1000/float64(b.N), "execsync-mean-ms")
	b.ReportMetric(float64(ss.Microseconds())/1000/float64(b.N), "socket-mean-ms")
	b.ReportMetric(float64(sc)/float64(ss), "speedup-x")
}

// BenchmarkSocketTrue: `true` in the registered container through the exec
// socket against through CRI ExecSync, both through the resolver.
func BenchmarkSocketTrue(b *testing.B) {
	s, c := socketBenchTargets(b)
	pairMedians(b, func() error { return c.Command("true").Run() }, func() error { return s.Command("true").Run() })
}

// BenchmarkSocketMount100: one op is 100 sequential mount-like calls
// (`mount --fake`, which parses its arguments and fstab and changes
// nothing), as a node mounting 100 volumes after a reboot makes.
func BenchmarkSocketMount100(b *testing.B) {
	s, c := socketBenchTargets(b)
	hundred := func(x *Exec) func() error {
		return func() error {
			for range 100 {
				if err := x.Command("mount", "--fake", "-t", "tmpfs", "none", "/mnt").Run(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	pairMedians(b, hundred(c), hundred(s))
}

// BenchmarkSocketParallel16: one op is a batch of 16 concurrent `true`;
// speedup-x is the throughput of the socket path relative to ExecSync.
func BenchmarkSocketParallel16(b *testing.B) {
	s, c := socketBenchTargets(b)
	batch := func(x *Exec) func() error {
		return func() error {
			var wg sync.WaitGroup
			errs := make([]error, 16)
			for i := range 16 {
				wg.Go(func() { errs[i] = x.Command("true").Run() })
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
	pairMedians(b, batch(c), batch(s))
}
