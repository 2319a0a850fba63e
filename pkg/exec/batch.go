package exec

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/pkg/cri"
	"github.com/mountcontainers/mountcontainers/pkg/execbatch"
)

// Batches of ExecSync calls (Options.BatchDir): the commands that wait for
// the same container at once, in this process and in others (the
// Flexvolume driver is a process per call), go to the container in one
// ExecSync of the program its registration advertises
// (registration.Registration's ExecBatch), which runs them side by side.
//
// Through files in BatchDir/<container ID>/, a directory only root may
// write: a caller writes its request (ID.req, the ID starting with the
// request's deadline) and then either leads a batch or waits for its
// result (ID.res). A leader holds one of batchLeaders lock files
// (flock(2), released by the kernel if it dies), claims its own request
// first and then the others waiting, oldest deadline first, by renaming
// them (ID.taken: a request is claimed once), answers those whose deadline
// passed without running them, runs the rest with what is left of their
// time (a lone request of its own as a plain ExecSync) and writes each
// other caller's result. So while execs of the container queue in the
// runtime, the commands that arrive meanwhile wait for the next batch
// instead of an exec each. A batch that could not start (its program
// missing or refusing, the runtime unavailable) tells each caller to run
// its command alone.
const (
	// DefaultBatchDir is the batch directory of this project's volume
	// hosts: on the node's /run, a tmpfs.
	DefaultBatchDir = "/run/mountcontainers/exec-batch"
	// batchLeaders is how many batches of one container may be in flight.
	batchLeaders = 4
	// batchPoll is how soon a waiting caller looks again for its result
	// or a free leader's lock; each wait is twice the one before, up to
	// batchPollMax. A hundred callers that waited a minute each, looking
	// every 25 ms, took 74 s of CPU between them (BENCHMARKS.md, "the
	// waiters' looks"); a short wait stays short.
	batchPoll    = 25 * time.Millisecond
	batchPollMax = 200 * time.Millisecond
	// batchStale is how long after its deadline a leader removes a file
	// that no caller will collect (a waiter that gave up, a leader that
	// died).
	batchStale = 10 * time.Minute
	// batchOverhead is what a batch's ExecSync may take beyond its longest
	// command: the runtime's start of the exec (about a second each on a
	// loaded node, queued), and the runner's wait for outputs a daemon
	// holds (2 s).
	batchOverhead = 10 * time.Second
)

// validContainerID reports whether id may name a directory:
// [0-9a-zA-Z][0-9a-zA-Z_.-]{0,127}. (Written out: the regular expression
// took half a millisecond of every start of a volume host to compile.)
func validContainerID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// batchResult is what a leader writes for another caller: the command's
// result, or the error of the ExecSync that carried it.
type batchResult struct {
	Result execbatch.Result `json:"result"`
	// Err is the ExecSync's error; Gone when it failed because the
	// container was gone (the caller decides again), Timeout when it
	// timed out.
	Err     string `json:"err,omitempty"`
	Gone    bool   `json:"gone,omitempty"`
	Timeout bool   `json:"timeout,omitempty"`
	// Alone: the batch did not start; the caller runs its command alone.
	Alone bool `json:"alone,omitempty"`
}

// batchRequest is a request file: the command and the caller's deadline.
type batchRequest struct {
	execbatch.Request
	// DeadlineMs is when the caller stops waiting (Unix milliseconds).
	DeadlineMs int64 `json:"deadlineMs"`
}

// batching reports whether argv for d goes through a batch: not when the
// registration advertises no batch program, nor for a command too large to
// share one.
func (r *Resolver) batching(d Decision, argv []string) bool {
	return r.batchDir != "" && d.Via == ViaExecSync && d.Registration != nil &&
		d.Registration.ExecBatch != "" && validContainerID(d.ContainerID) &&
		(execbatch.Request{Argv: argv, TimeoutMs: 1}).Size() < execbatch.MaxRequestSize-32
}

// execSyncBatched runs argv in d's container as part of a batch (see
// above); its results are execSync's.
func (r *Resolver) execSyncBatched(ctx context.Context, d Decision, argv []string, timeout time.Duration, publish func(context.CancelFunc)) (stdout, stderr []byte, err error) {
	// A batch directory that cannot be used (missing, read-only, or one
	// that others could write) is not used: the command goes alone, as
	// without batches, and the reason is logged.
	dir, err := r.batchContainerDir(d.ContainerID)
	if err != nil {
		r.batchUnusable(ctx, d, err)
		return r.execSyncOne(ctx, d, argv, timeout, publish)
	}
	// The command's deadline: a leader runs it with what is left of it,
	// or answers that it passed.
	cmdDeadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(cmdDeadline) {
		cmdDeadline = dl
	}
	id, err := writeRequest(dir, batchRequest{Request: execbatch.Request{Argv: argv, TimeoutMs: max(timeout.Milliseconds(), 1)}, DeadlineMs: cmdDeadline.UnixMilli()})
	if err != nil {
		r.batchUnusable(ctx, d, err)
		return r.execSyncOne(ctx, d, argv, timeout, publish)
	}
	// Once claimed, a batch answers within the command's time and its own
	// overhead, or by the end its leader wrote (a batch runs to its
	// longest command, whose deadline may be later than this one's).
	deadline := cmdDeadline.Add(r.overhead() + grace(timeout))
	leaders := r.batchLeaders
	if leaders <= 0 {
		leaders = batchLeaders
	}
	var locks []*os.File
	defer func() {
		for _, f := range locks {
			f.Close()
		}
	}()
	for slot := range leaders {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("lead-%d", slot)), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			os.Remove(filepath.Join(dir, id+".req"))
			r.batchUnusable(ctx, d, err)
			return r.execSyncOne(ctx, d, argv, timeout, publish)
		}
		locks = append(locks, f)
	}
	poll := time.NewTimer(batchPoll)
	defer poll.Stop()
	ctxDone := ctx.Done()
	for wait := batchPoll; ; wait = min(2*wait, batchPollMax) {
		if r.batchLook != nil {
			r.batchLook()
		}
		if res, ok, err := takeResult(dir, id); err != nil || ok {
			os.Remove(filepath.Join(dir, id+".end"))
			if err != nil {
				return nil, nil, fmt.Errorf("exec %s in %s of plugin %s: the result of its batch: %w", argv[0], d.Where(), d.Plugin, err)
			}
			if res.Alone {
				return r.execSyncUntil(ctx, d, argv, cmdDeadline, publish)
			}
			return res.outcome(argv[0], d, timeout)
		}
		if out, errOut, done, lerr := r.tryLead(ctx, d, locks, dir, id, argv, timeout, publish); done {
			return out, errOut, lerr
		}
		if ctx.Err() != nil || time.Now().After(cmdDeadline) {
			// Still waiting: give up. Not claimed yet, it never runs;
			// claimed, its batch may still run it.
			if os.Remove(filepath.Join(dir, id+".req")) == nil {
				if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
					return nil, nil, fmt.Errorf("exec %s in %s of plugin %s: %w", argv[0], d.Where(), d.Plugin, context.Canceled)
				}
				return nil, nil, fmt.Errorf("exec %s in %s of plugin %s: %w after %s waiting for a batch of the container's commands: %w", argv[0], d.Where(), d.Plugin, ErrTimeout, timeout, context.DeadlineExceeded)
			}
			if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				// Cancelled: its batch runs it still, nobody takes
				// the result (removeStale does).
				return nil, nil, fmt.Errorf("exec %s in %s of plugin %s: %w", argv[0], d.Where(), d.Plugin, context.Canceled)
			}
			if time.Now().After(deadline) {
				if end, ok := readBatchEnd(dir, id); ok && end.After(deadline) {
					deadline = end
				} else {
					return nil, nil, fmt.Errorf("exec %s in %s of plugin %s: %w after %s: the batch that took it gave no result: %w", argv[0], d.Where(), d.Plugin, ErrTimeout, timeout, context.DeadlineExceeded)
				}
			}
		}
		// The call's end is looked at at once, but only once: a request
		// a batch claimed is waited for on the schedule.
		select {
		case <-poll.C:
		case <-ctxDone:
			ctxDone = nil
		}
		poll.Reset(wait)
	}
}

// batchUnusable logs, once per resolver, why commands do not go in batches.
func (r *Resolver) batchUnusable(ctx context.Context, d Decision, err error) {
	r.batchWarn.Do(func() {
		if r.log != nil {
			r.log.WarnContext(ctx, "exec batches unusable: every command through ExecSync goes alone", "plugin", d.Plugin, "batchDir", r.batchDir, "err", err)
		}
	})
}

// tryLead takes a free leader's lock, if any, and runs the waiting
// requests. done is true when the caller's own request was among them
// (its outcome is returned).
func (r *Resolver) tryLead(ctx context.Context, d Decision, locks []*os.File, dir, id string, argv []string, timeout time.Duration, publish func(context.CancelFunc)) (stdout, stderr []byte, done bool, err error) {
	for _, f := range locks {
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			continue
		}
		stdout, stderr, done, err = r.lead(ctx, d, dir, id, argv, timeout, publish)
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return stdout, stderr, done, err
	}
	return nil, nil, false, nil
}

// lead claims the caller's own request, then the others waiting (the
// earliest deadlines first), and runs them. done is false when the
// caller's request was claimed by another batch: it leads nothing then.
func (r *Resolver) lead(ctx context.Context, d Decision, dir, id string, argv []string, timeout time.Duration, publish func(context.CancelFunc)) (stdout, stderr []byte, done bool, err error) {
	if os.Rename(filepath.Join(dir, id+".req"), filepath.Join(dir, id+".taken")) != nil {
		// Another batch took it: its result comes.
		return nil, nil, false, nil
	}
	removeStale(dir)
	ids, reqs := []string{id}, []batchRequest{{}}
	if own, rerr := readRequest(filepath.Join(dir, id+".taken")); rerr == nil {
		reqs[0] = own
	} else {
		os.Remove(filepath.Join(dir, id+".taken"))
		return nil, nil, true, fmt.Errorf("exec %s in %s of plugin %s: its batch request: %w", argv[0], d.Where(), d.Plugin, rerr)
	}
	ents, _ := os.ReadDir(dir) // sorted by name: by deadline
	size := reqs[0].Size()
	for _, e := range ents {
		other, ok := strings.CutSuffix(e.Name(), ".req")
		if !ok {
			continue
		}
		if len(reqs) == execbatch.MaxRequests || size > execbatch.MaxBatchSize-execbatch.MaxRequestSize {
			break
		}
		if os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dir, other+".taken")) != nil {
			continue // another leader claimed it, or its caller gave up
		}
		req, rerr := readRequest(filepath.Join(dir, other+".taken"))
		if rerr != nil {
			// Unreadable: its caller gets the error.
			writeResult(dir, other, batchResult{Err: "its batch request: " + rerr.Error()})
			os.Remove(filepath.Join(dir, other+".taken"))
			continue
		}
		size += req.Size()
		ids = append(ids, other)
		reqs = append(reqs, req)
	}
	if len(reqs) == 1 {
		os.Remove(filepath.Join(dir, id+".taken"))
		stdout, stderr, err = r.execSyncUntil(ctx, d, argv, time.UnixMilli(reqs[0].DeadlineMs), publish)
		return stdout, stderr, true, err
	}
	res := r.runBatch(ctx, d, dir, ids, reqs)
	if res.Alone {
		stdout, stderr, err = r.execSyncUntil(ctx, d, argv, time.UnixMilli(reqs[0].DeadlineMs), publish)
		return stdout, stderr, true, err
	}
	stdout, stderr, err = res.outcome(argv[0], d, timeout)
	return stdout, stderr, true, err
}

// maxBatchWarnings bounds what the volume host logs of a batch's standard
// error.
const maxBatchWarnings = 4 << 10

// runBatch runs reqs (reqs[0] the leader's own) in one ExecSync, each with
// what is left of its time, writes the result of every request but the
// leader's to its caller's file and returns the leader's. A request whose
// deadline passed while it waited is answered without running.
func (r *Resolver) runBatch(ctx context.Context, d Decision, dir string, ids []string, reqs []batchRequest) batchResult {
	results := make([]batchResult, len(reqs))
	var run []execbatch.Request
	var runIdx []int
	var longest time.Duration
	now := time.Now()
	for i, q := range reqs {
		left := time.UnixMilli(q.DeadlineMs).Sub(now)
		if left < time.Millisecond {
			results[i] = batchResult{Err: "its deadline passed while it waited for a batch; it did not run", Timeout: true}
			continue
		}
		q.Request.TimeoutMs = left.Milliseconds()
		run = append(run, q.Request)
		runIdx = append(runIdx, i)
		longest = max(longest, left)
	}
	if len(run) > 0 {
		args, err := execbatch.EncodeRequests(run)
		var out []byte
		if err == nil {
			argv := append([]string{d.Registration.ExecBatch, execbatch.Subcommand}, args...)
			// The runtime's bound covers the longest command and what
			// the batch adds (batchOverhead): the runner bounds each
			// command itself, so a slow one is its own caller's timeout,
			// not the others'. Not the leader's context: the batch
			// carries others' commands, which its caller's end must not
			// cut short.
			bound := longest + r.overhead()
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound+grace(bound))
			// The batch's results come when its longest command ends:
			// its other callers wait for that, not only for their own
			// deadline.
			end := time.Now().Add(bound + grace(bound) + r.overhead())
			for _, i := range runIdx {
				if i != 0 {
					_ = writeNew(dir, ids[i]+".end", strconv.AppendInt(nil, end.UnixMilli(), 10))
				}
			}
			start := time.Now()
			var said []byte
			out, said, err = r.execSyncOne(bctx, d, argv, bound, nil)
			cancel()
			if r.log != nil {
				r.log.DebugContext(ctx, "exec batch", "plugin", d.Plugin, "container", d.ContainerID, "commands", len(run),
					"took", time.Since(start).Round(time.Millisecond).String(), "err", errString(err))
				if len(said) > 0 && err == nil {
					// The batch's own warnings (its commands' output is
					// in their results), which name a command by argv0
					// only: a command started untraced after its traced
					// execve was refused, say.
					r.log.WarnContext(ctx, "the mount pod's exec batch warned", "plugin", d.Plugin, "container", d.ContainerID,
						"stderr", string(said[:min(len(said), maxBatchWarnings)]))
				}
			}
		}
		var rs []execbatch.Result
		if err == nil {
			rs, err = execbatch.DecodeResults(out, len(run))
		}
		for k, i := range runIdx {
			switch {
			case err == nil:
				results[i].Result = rs[k]
			case batchNotStarted(err):
				// Nothing ran: each caller runs its command alone.
				results[i] = batchResult{Alone: true}
			default:
				results[i] = batchResult{Err: err.Error(), Gone: errors.Is(err, errGone), Timeout: errors.Is(err, ErrTimeout)}
			}
		}
	}
	for i, other := range ids {
		if i != 0 {
			writeResult(dir, other, results[i])
		}
		os.Remove(filepath.Join(dir, other+".taken"))
	}
	return results[0]
}

// execSyncUntil runs argv alone in one ExecSync bounded by deadline.
func (r *Resolver) execSyncUntil(ctx context.Context, d Decision, argv []string, deadline time.Time, publish func(context.CancelFunc)) (stdout, stderr []byte, err error) {
	left := time.Until(deadline)
	if left < time.Millisecond {
		return nil, nil, fmt.Errorf("exec %s in %s of plugin %s: %w: its deadline passed while it waited for a batch of the container's commands: %w", argv[0], d.Where(), d.Plugin, ErrTimeout, context.DeadlineExceeded)
	}
	return r.execSyncOne(ctx, d, argv, left, publish)
}

// batchNotStarted reports whether a batch's ExecSync failed before any of
// its commands could run: its program is missing or refused the batch (a
// usage error, exit 2, as `mountpod exec-batch` gives), or the runtime is
// unavailable.
func batchNotStarted(err error) bool {
	var exit utilexec.CodeExitError
	return errors.Is(err, utilexec.ErrExecutableNotFound) || cri.IsUnavailable(err) ||
		errors.As(err, &exit) && exit.Code == 2
}

// outcome turns a batch's result into execSync's.
func (b batchResult) outcome(name string, d Decision, timeout time.Duration) (stdout, stderr []byte, err error) {
	where := fmt.Sprintf("exec %s in %s of plugin %s (in a batch)", name, d.Where(), d.Plugin)
	switch {
	case b.Gone:
		return nil, nil, fmt.Errorf("%s: %w: %s", where, errGone, b.Err)
	case b.Timeout:
		return nil, nil, fmt.Errorf("%s: %w after %s: %s: %w", where, ErrTimeout, timeout, b.Err, context.DeadlineExceeded)
	case b.Err != "":
		return nil, nil, fmt.Errorf("%s: %s", where, b.Err)
	}
	res := b.Result
	switch res.Failure {
	case "":
	case execbatch.FailureNotFound:
		return res.Stdout, res.Stderr, utilexec.ErrExecutableNotFound
	case execbatch.FailureTimeout:
		return res.Stdout, res.Stderr, fmt.Errorf("%s: %w after %s: %w", where, ErrTimeout, timeout, context.DeadlineExceeded)
	default:
		return res.Stdout, res.Stderr, fmt.Errorf("%s: %s", where, res.Error)
	}
	if res.ExitCode != 0 {
		return res.Stdout, res.Stderr, utilexec.CodeExitError{
			Err:  fmt.Errorf("exit status %d (in %s of plugin %s)", res.ExitCode, d.Where(), d.Plugin),
			Code: res.ExitCode,
		}
	}
	return res.Stdout, res.Stderr, nil
}

// batchContainerDir returns the batch directory of a container, made if
// missing. Both it and BatchDir must be directories (not symbolic links)
// of this process's user that nobody else may write: the files in them
// are commands run as root in the mount container, and their results.
func (r *Resolver) batchContainerDir(containerID string) (string, error) {
	dir := filepath.Join(r.batchDir, containerID)
	if err := os.MkdirAll(filepath.Dir(r.batchDir), 0o755); err != nil {
		return "", fmt.Errorf("batch directory: %w", err)
	}
	for _, p := range []string{r.batchDir, dir} {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("batch directory: %w", err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("batch directory: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !fi.IsDir():
			return "", fmt.Errorf("batch directory %s: not a directory", p)
		case !ok || int(st.Uid) != os.Geteuid():
			return "", fmt.Errorf("batch directory %s: not owned by uid %d", p, os.Geteuid())
		case fi.Mode().Perm()&0o022 != 0:
			return "", fmt.Errorf("batch directory %s: writable by group or others (%v)", p, fi.Mode().Perm())
		}
	}
	return dir, nil
}

// writeRequest writes req as a new request file and returns its ID: the
// deadline (zero-padded, so that names sort by it) and 16 random bytes.
func writeRequest(dir string, req batchRequest) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := fmt.Sprintf("%015d-%s", max(req.DeadlineMs, 0), hex.EncodeToString(b[:]))
	data, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	if err := writeNew(dir, id+".req", data); err != nil {
		return "", fmt.Errorf("batch request: %w", err)
	}
	return id, nil
}

// writeResult writes the result for the caller of request id; a caller
// that gave up leaves it to removeStale.
func writeResult(dir, id string, res batchResult) {
	data, err := json.Marshal(res)
	if err != nil {
		return
	}
	_ = writeNew(dir, id+".res", data)
}

// writeNew writes name in dir whole: a temporary file renamed into place,
// so that a reader sees all of it or nothing.
func writeNew(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// maxBatchFile bounds what is read of a request or result file.
const maxBatchFile = 4 * execbatch.MaxOutput

func readRequest(path string) (batchRequest, error) {
	var req batchRequest
	data, err := readSmall(path)
	if err != nil {
		return req, err
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return req, err
	}
	return req, req.Validate()
}

// takeResult reads and removes the result of request id, if written.
func takeResult(dir, id string) (batchResult, bool, error) {
	var res batchResult
	path := filepath.Join(dir, id+".res")
	data, err := readSmall(path)
	if errors.Is(err, os.ErrNotExist) {
		return res, false, nil
	}
	if err != nil {
		return res, false, err
	}
	os.Remove(path)
	return res, true, json.Unmarshal(data, &res)
}

// readBatchEnd reads when the batch that claimed request id will have
// written its result, as its leader wrote it.
func readBatchEnd(dir, id string) (time.Time, bool) {
	data, err := readSmall(filepath.Join(dir, id+".end"))
	if err != nil {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// overhead is batchOverhead, or the tests' own.
func (r *Resolver) overhead() time.Duration {
	if r.batchExtra > 0 {
		return r.batchExtra
	}
	return batchOverhead
}

// readSmall reads a regular file of at most maxBatchFile bytes, not
// following a symbolic link and not blocking on a FIFO.
func readSmall(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file", path)
	case fi.Size() > maxBatchFile:
		return nil, fmt.Errorf("%s: %d bytes, more than %d", path, fi.Size(), maxBatchFile)
	}
	buf := make([]byte, fi.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && n != len(buf) {
		return nil, err
	}
	return buf, nil
}

// removeStale removes the files of dir that nobody will collect: those
// whose request's deadline (the start of the name) passed batchStale ago.
func removeStale(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		ms, _, ok := strings.Cut(e.Name(), "-")
		if !ok || strings.HasPrefix(e.Name(), "lead-") {
			continue
		}
		var deadline int64
		if _, err := fmt.Sscanf(ms, "%d", &deadline); err == nil && time.Since(time.UnixMilli(deadline)) > batchStale {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
