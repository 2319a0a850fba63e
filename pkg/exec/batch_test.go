package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/pod/execbatch"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	wire "github.com/mountcontainers/mountcontainers/pkg/execbatch"
)

const batchProgram = "/usr/local/bin/mountpod"

// batchEnv is a running mount container whose registration advertises a
// batch program, in a fake runtime that runs its commands here: a batch
// through package execbatch's Run (what `mountpod exec-batch` runs), a
// plain exec as it is. The first plain exec is held until release is
// closed, as a runtime that starts one exec at a time holds the others.
type batchEnv struct {
	*env
	dir     string // the batch directory
	release chan struct{}
	once    sync.Once

	mu      sync.Mutex
	plain   [][]string
	batches [][]string
	// batchStderr is what each batch writes to its standard error, as
	// `mountpod exec-batch` writes its warnings.
	batchStderr []byte
}

func newBatchEnv(t *testing.T) *batchEnv {
	t.Helper()
	b := &batchEnv{env: newEnv(t), dir: filepath.Join(t.TempDir(), "batch"), release: make(chan struct{})}
	reg := testReg
	reg.ExecBatch = batchProgram
	b.register(t, reg)
	b.rt.SetContainers(crifake.Container("ctr1", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	t.Cleanup(b.open)
	b.rt.SetExec(b.run)
	return b
}

// open lets the held exec go (once).
func (b *batchEnv) open() { b.once.Do(func() { close(b.release) }) }

func (b *batchEnv) run(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	argv := req.Cmd
	if argv[0] == "/missing/batch-program" {
		b.mu.Lock()
		b.batches = append(b.batches, argv)
		b.mu.Unlock()
		return nil, status.Error(codes.Unknown, `failed to exec in container: exec: "/missing/batch-program": stat /missing/batch-program: no such file or directory`)
	}
	if argv[0] == batchProgram && len(argv) > 1 && argv[1] == "exec-batch" {
		b.mu.Lock()
		b.batches = append(b.batches, argv)
		b.mu.Unlock()
		var out bytes.Buffer
		if err := execbatch.Run(ctx, argv[2:], &out, nil, nil, nil); err != nil {
			return &runtimeapi.ExecSyncResponse{ExitCode: 2, Stderr: []byte(err.Error())}, nil
		}
		b.mu.Lock()
		said := b.batchStderr
		b.mu.Unlock()
		return &runtimeapi.ExecSyncResponse{Stdout: out.Bytes(), Stderr: said}, nil
	}
	b.mu.Lock()
	first := len(b.plain) == 0
	b.plain = append(b.plain, argv)
	b.mu.Unlock()
	if first {
		<-b.release
	}
	cmd := osexec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *osexec.ExitError
	switch {
	case errors.As(err, &exit):
		return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(exit.ExitCode())}, nil
	case err != nil:
		return nil, status.Error(codes.Unknown, err.Error())
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// caller is a resolver of its own, as each Flexvolume driver process has,
// with one leader's lock per container.
func (b *batchEnv) caller(t *testing.T) *Exec {
	t.Helper()
	return b.callerLogging(t, nil)
}

// callerLogging is a caller whose resolver logs to log.
func (b *batchEnv) callerLogging(t *testing.T, log *slog.Logger) *Exec {
	t.Helper()
	r := b.resolver(t, Options{ExecMode: ModeCRI, BatchDir: b.dir, Logger: log})
	r.batchLeaders = 1
	x, err := r.For(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// waitFor polls cond with a hang guard (not a verdict on speed).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// files returns the names of the container's batch directory with suffix.
func (b *batchEnv) files(suffix string) []string {
	ents, _ := os.ReadDir(filepath.Join(b.dir, "ctr1"))
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// holdFirst runs a command that the runtime holds until release, and
// returns the channel of its error.
func (b *batchEnv) holdFirst(t *testing.T) chan error {
	t.Helper()
	done := make(chan error, 1)
	x := b.caller(t)
	go func() {
		out, err := x.Command("echo", "first").Output()
		if err == nil && string(out) != "first\n" {
			err = fmt.Errorf("output %q", out)
		}
		done <- err
	}()
	waitFor(t, "the first exec to reach the runtime", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.plain) == 1
	})
	return done
}

// TestBatch: while the runtime holds the one exec in flight, the commands
// of nine other callers (resolvers of their own, as processes) wait, and
// go to the container in one ExecSync of the registration's batch program
// once it is free; each caller gets its own command's output and exit
// code, and nothing is left in the batch directory.
func TestBatch(t *testing.T) {
	b := newBatchEnv(t)
	first := b.holdFirst(t)

	const n = 9
	type outcome struct {
		out []byte
		err error
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		x := b.caller(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := x.Command("sh", "-c", fmt.Sprintf("echo %d; exit %d", i, i%3)).Output()
			outcomes[i] = outcome{out, err}
		}()
	}
	waitFor(t, "nine requests waiting", func() bool { return len(b.files(".req")) == n })
	b.open()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("the first command: %v", err)
	}

	for i, o := range outcomes {
		if want := fmt.Sprintf("%d\n", i); string(o.out) != want {
			t.Errorf("caller %d: output %q, want %q", i, o.out, want)
		}
		var exit utilexec.ExitError
		switch code := i % 3; {
		case code == 0 && o.err != nil:
			t.Errorf("caller %d: %v, want success", i, o.err)
		case code != 0 && (!errors.As(o.err, &exit) || exit.ExitStatus() != code):
			t.Errorf("caller %d: %v, want exit status %d", i, o.err, code)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.plain) != 1 || len(b.batches) != 1 || len(b.batches[0]) != 2+n {
		t.Fatalf("%d plain execs and batches of %v; want the held one and one batch of %d", len(b.plain), batchSizes(b.batches), n)
	}
	if left := append(b.files(".req"), append(b.files(".taken"), append(b.files(".res"), append(b.files(".end"), b.files(".tmp")...)...)...)...); len(left) != 0 {
		t.Errorf("left in the batch directory: %q", left)
	}
	// The runtime's bound of the batch exceeds its commands' own (the
	// resolver's 2 minutes): a slow command times out in the runner, as
	// its own caller's failure, not the batch's.
	for _, req := range b.rt.ExecRequests() {
		if req.Cmd[0] == batchProgram && req.Timeout <= int64(DefaultTimeout/time.Second) {
			t.Errorf("the batch's ExecSync timeout is %d s, want more than its commands' %s", req.Timeout, DefaultTimeout)
		}
	}
	t.Logf("9 callers' commands in one ExecSync of %s %s", batchProgram, "exec-batch")
}

// TestBatchWarningsLogged: what the batch writes to its standard error
// (its warnings; its commands' output is in their results) is logged by
// the volume host that led the batch, with the plugin and the container,
// and the commands' results are as without it.
func TestBatchWarningsLogged(t *testing.T) {
	b := newBatchEnv(t)
	const warning = `level=WARN msg="a command could not run traced; it is started once more, untraced" argv0=mount`
	b.batchStderr = []byte(warning + "\n")
	first := b.holdFirst(t)
	var logs syncLog
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const n = 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		x := b.callerLogging(t, log)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := x.Command("echo", strconv.Itoa(i)).Output()
			if err == nil && string(out) != fmt.Sprintf("%d\n", i) {
				err = fmt.Errorf("output %q", out)
			}
			errs[i] = err
		}()
	}
	waitFor(t, "three requests waiting", func() bool { return len(b.files(".req")) == n })
	b.open()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("the first command: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	got := logs.String()
	if strings.Count(got, "the mount pod's exec batch warned") != 1 || !strings.Contains(got, strconv.Quote(warning+"\n")) ||
		!strings.Contains(got, "plugin="+testPlugin) || !strings.Contains(got, "container=ctr1") {
		t.Errorf("the volume hosts logged:\n%s\nwant the batch's warning once, with plugin %s and container ctr1", got, testPlugin)
	}
}

func batchSizes(bs [][]string) []int {
	var n []int
	for _, b := range bs {
		n = append(n, len(b)-2)
	}
	return n
}

// TestBatchWaitEndsWithTheCall: a command whose caller's deadline passes
// while it waits for a batch is withdrawn (ErrTimeout): it never runs, not
// even once the container is free.
func TestBatchWaitEndsWithTheCall(t *testing.T) {
	b := newBatchEnv(t)
	first := b.holdFirst(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	marker := filepath.Join(t.TempDir(), "ran")
	err := b.caller(t).CommandContext(ctx, "touch", marker).Run()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("a command queued past its deadline: %v, want ErrTimeout", err)
	}
	if left := b.files(".req"); len(left) != 0 {
		t.Fatalf("its request stayed: %q", left)
	}
	b.open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Once the container is free, a new command leads; the withdrawn one
	// is not in its batch.
	if err := b.caller(t).Command("true").Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the withdrawn command ran: %v", err)
	}
}

// TestBatchWaitsForItsLongestCommand: a caller whose command a batch
// claimed gets its result when the batch ends with a longer command of
// another caller, though that is past its own deadline and the batch's
// overhead: its command ran, and a timeout would report a mount that
// succeeded as failed.
func TestBatchWaitsForItsLongestCommand(t *testing.T) {
	b := newBatchEnv(t)
	first := b.holdFirst(t)
	caller := func() *Exec {
		r := b.resolver(t, Options{ExecMode: ModeCRI, BatchDir: b.dir})
		r.batchLeaders = 1
		r.batchExtra = 200 * time.Millisecond
		x, err := r.For(testPlugin)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	long := make(chan error, 1)
	go func() { long <- caller().Command("sleep", "4").Run() }()
	waitFor(t, "the long command's request", func() bool { return len(b.files(".req")) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	short := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = caller().CommandContext(ctx, "echo", "short").Output()
		short <- err
	}()
	waitFor(t, "the short command's request", func() bool { return len(b.files(".req")) == 2 })
	// A third caller, cancelled once another caller's batch claimed its
	// command, does not wait for the batch: it returns Canceled (its
	// command still runs). It looks first only once that is so, and then
	// cancels: it cannot lead.
	ctx3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	r3 := b.resolver(t, Options{ExecMode: ModeCRI, BatchDir: b.dir})
	r3.batchLeaders = 1
	var once sync.Once
	r3.batchLook = func() {
		once.Do(func() {
			waitFor(t, "the requests claimed", func() bool { return len(b.files(".req")) == 0 })
			cancel3()
		})
	}
	x3, err := r3.For(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	third := make(chan error, 1)
	go func() { third <- x3.CommandContext(ctx3, "true").Run() }()
	waitFor(t, "the third command's request", func() bool { return len(b.files(".req")) == 3 })
	b.open()
	if err := <-third; !errors.Is(err, context.Canceled) {
		t.Errorf("a claimed command whose caller cancelled: %v, want Canceled", err)
	}
	if err := <-short; err != nil || string(out) != "short\n" {
		t.Fatalf("the short command, claimed by a batch that ran past its deadline: %q, %v; want its output", out, err)
	}
	if err := <-long; err != nil {
		t.Fatalf("the long command: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.batches) != 1 || len(b.batches[0]) != 5 {
		t.Fatalf("batches of %v; want one of the three commands", batchSizes(b.batches))
	}
}

// TestBatchWaitLooksLessOften: a caller that waits for its batch looks for
// its result and a free leader less and less often (25 ms, then twice as
// long each time, up to 200 ms): a hundred drivers waiting a minute each
// at 25 ms took 74 s of CPU between them. In 2 s that is at most 14 looks
// (80 at 25 ms); a loaded machine only makes them fewer.
func TestBatchWaitLooksLessOften(t *testing.T) {
	b := newBatchEnv(t)
	first := b.holdFirst(t)
	r := b.resolver(t, Options{ExecMode: ModeCRI, BatchDir: b.dir})
	r.batchLeaders = 1
	var mu sync.Mutex
	looks := 0
	r.batchLook = func() {
		mu.Lock()
		looks++
		mu.Unlock()
	}
	x, err := r.For(testPlugin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := x.CommandContext(ctx, "true").Run(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("a command queued past its deadline: %v, want ErrTimeout", err)
	}
	mu.Lock()
	n := looks
	mu.Unlock()
	t.Logf("%d looks in a wait of 2 s", n)
	if n < 2 || n > 20 {
		t.Errorf("%d looks in a wait of 2 s, want 2 to 20 (at most 14 on the schedule)", n)
	}
	b.open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestBatchDirRefused: a batch directory that someone else could write, or
// a symbolic link, is not used: the command goes alone, and the log says
// why, naming the directory.
func TestBatchDirRefused(t *testing.T) {
	b := newBatchEnv(t)
	b.open()
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for dir, says := range map[string]string{open: "writable by group or others", link: "not a directory"} {
		var log syncLog
		r := b.resolver(t, Options{ExecMode: ModeCRI, BatchDir: dir, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		x, err := r.For(testPlugin)
		if err != nil {
			t.Fatal(err)
		}
		before := len(b.rt.ExecRequests())
		if out, err := x.Command("echo", "alone").Output(); err != nil || string(out) != "alone\n" {
			t.Errorf("batch directory %s: %q, %v; want the command run alone", dir, out, err)
		}
		reqs := b.rt.ExecRequests()
		if len(reqs) != before+1 || reqs[len(reqs)-1].Cmd[0] != "echo" {
			t.Errorf("batch directory %s: ExecSync calls %v, want one plain echo", dir, reqs[before:])
		}
		if !strings.Contains(log.String(), dir) || !strings.Contains(log.String(), says) {
			t.Errorf("batch directory %s: log %q, want it named, saying %q", dir, log.String(), says)
		}
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Fatalf("written through the symbolic link: %v", ents)
	}
}

// syncLog is a log buffer for concurrent writers.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNoBatchWithoutProgram: a registration that advertises no batch
// program gets an exec per command, and no batch file is written.
func TestNoBatchWithoutProgram(t *testing.T) {
	b := newBatchEnv(t)
	b.open()
	b.register(t, testReg) // no ExecBatch
	if err := b.caller(t).Command("true").Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the batch directory was made (%v) for a registration with no batch program", err)
	}
	if reqs := b.rt.ExecRequests(); len(reqs) != 1 || reqs[0].Cmd[0] != "true" {
		t.Fatalf("ExecSync calls %v, want one of true", reqs)
	}
}

// TestBatchAnswersExpiredRequests: a request whose deadline passed before
// a leader claimed it (its caller gone: another process that died) is
// answered as timed out and does not run; the leader's own runs.
func TestBatchAnswersExpiredRequests(t *testing.T) {
	b := newBatchEnv(t)
	b.open()
	marker := filepath.Join(t.TempDir(), "ran")
	r := b.resolver(t, Options{ExecMode: ModeCRI, BatchDir: b.dir})
	if _, err := r.batchContainerDir("ctr1"); err != nil {
		t.Fatal(err)
	}
	id, err := writeRequest(filepath.Join(b.dir, "ctr1"), batchRequest{
		Request:    wire.Request{Argv: []string{"touch", marker}, TimeoutMs: 60_000},
		DeadlineMs: time.Now().Add(-time.Second).UnixMilli(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := b.caller(t).Command("echo", "mine").Output(); err != nil || string(out) != "mine\n" {
		t.Fatalf("the leader's command: %q, %v", out, err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the expired request ran: %v", err)
	}
	res, ok, err := takeResult(filepath.Join(b.dir, "ctr1"), id)
	if err != nil || !ok || !res.Timeout {
		t.Fatalf("the expired request's result: %+v, %t, %v; want a timeout", res, ok, err)
	}
}

// TestBatchProgramMissing: a batch whose program cannot start (a
// registration naming a program the container lacks) runs nothing; each
// caller then runs its command alone and gets its own result.
func TestBatchProgramMissing(t *testing.T) {
	b := newBatchEnv(t)
	reg := testReg
	reg.ExecBatch = "/missing/batch-program"
	b.register(t, reg)
	first := b.holdFirst(t)
	const n = 3
	errs := make([]error, n)
	outs := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		x := b.caller(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = x.Command("echo", fmt.Sprint(i)).Output()
		}()
	}
	waitFor(t, "three requests waiting", func() bool { return len(b.files(".req")) == n })
	b.open()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil || string(outs[i]) != fmt.Sprintf("%d\n", i) {
			t.Errorf("caller %d: %q, %v; want its own output", i, outs[i], errs[i])
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.batches) != 1 || len(b.plain) != 1+n {
		t.Errorf("%d batch attempts and %d plain execs; want the one batch that could not start and each command alone", len(b.batches), len(b.plain))
	}
}

// TestValidContainerID holds validContainerID to the pattern it spells out.
func TestValidContainerID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-zA-Z][0-9a-zA-Z_.-]{0,127}$`)
	cases := []string{"", "a", "0", "_", ".", "-", "a_b.c-d", "A9", "a/b", "a b", "a\x00", "é", "a..", "..",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129), "a" + strings.Repeat("-", 127), "-" + strings.Repeat("a", 10),
		"3f1c2a9b8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b"}
	for c := byte(0); c < 128; c++ {
		cases = append(cases, "x"+string(c), string(c))
	}
	for _, id := range cases {
		if got, want := validContainerID(id), re.MatchString(id); got != want {
			t.Errorf("validContainerID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
