// Package execbatch is the wire format of a batch of commands run in a
// mount container by one CRI ExecSync: the volume host's resolver
// (package exec) sends the commands that wait for the same container at
// once as the arguments of the program the registration advertises
// (registration.Registration's ExecBatch, e.g. `mountpod exec-batch`), which
// runs them side by side and prints their results on its standard output.
//
// Why: a runtime may start the execs of one container one at a time (the
// runc shim of containerd before 1.6.22 and 1.7.3 holds a lock across
// `runc exec`, about a second each on a loaded node), so a hundred mounts
// asked at once queue for a hundred seconds; in batches they take a few
// execs. See BENCHMARKS.md, "A node under load".
package execbatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Subcommand is the argument after the advertised program that asks for a
// batch; the requests follow, one JSON [Request] per argument.
const Subcommand = "exec-batch"

// Limits of a batch.
const (
	// MaxRequests is the most commands a batch carries.
	MaxRequests = 64
	// MaxRequestSize bounds one request's JSON (an argument: Linux allows
	// 128 KiB).
	MaxRequestSize = 64 << 10
	// MaxBatchSize bounds the requests of a batch together (its argv:
	// Linux allows a quarter of the stack limit, 2 MiB by default).
	MaxBatchSize = 512 << 10
	// MaxOutput bounds what a result keeps of each of a command's outputs
	// (a batch's whole output, base64 in JSON, stays under the 16 MiB a
	// CRI response may have); the end is kept, where utilities say why
	// they failed.
	MaxOutput = 64 << 10
)

// Request is one command of a batch.
type Request struct {
	// Argv is the command line; Argv[0] is looked up in the container's
	// PATH.
	Argv []string `json:"argv"`
	// TimeoutMs bounds the command, in milliseconds.
	TimeoutMs int64 `json:"timeoutMs"`
}

// Timeout returns the request's bound.
func (r Request) Timeout() time.Duration { return time.Duration(r.TimeoutMs) * time.Millisecond }

// Validate checks a request: a command, a positive timeout.
func (r Request) Validate() error {
	switch {
	case len(r.Argv) == 0 || r.Argv[0] == "":
		return errors.New("no command")
	case r.TimeoutMs <= 0:
		return fmt.Errorf("%s: timeout %d ms, want a positive one", r.Argv[0], r.TimeoutMs)
	}
	return nil
}

// What went wrong with a command that has no exit code ([Result].Failure).
const (
	// FailureNotFound: the executable was not found.
	FailureNotFound = "not-found"
	// FailureTimeout: the command did not end within its timeout and was
	// killed.
	FailureTimeout = "timeout"
	// FailureStart: the command could not be started otherwise, or the
	// request was refused.
	FailureStart = "start"
)

// Result is the outcome of one request, in the request's position.
type Result struct {
	// ExitCode is the command's exit status (128+N when signal N ended it);
	// meaningless when Failure is set.
	ExitCode int `json:"exitCode"`
	// Stdout and Stderr are the command's outputs, each cut to its last
	// [MaxOutput] bytes.
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	// Failure, when set, says why the command has no exit code (see the
	// Failure constants), Error the details.
	Failure string `json:"failure,omitempty"`
	Error   string `json:"error,omitempty"`
}

// EncodeRequests returns the arguments that carry reqs.
func EncodeRequests(reqs []Request) ([]string, error) {
	if len(reqs) == 0 || len(reqs) > MaxRequests {
		return nil, fmt.Errorf("a batch of %d commands: want 1 to %d", len(reqs), MaxRequests)
	}
	args := make([]string, len(reqs))
	total := 0
	for i, r := range reqs {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		data, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if len(data) > MaxRequestSize {
			return nil, fmt.Errorf("request %d (%s): %d bytes, more than %d", i, r.Argv[0], len(data), MaxRequestSize)
		}
		if total += len(data); total > MaxBatchSize {
			return nil, fmt.Errorf("requests 0 to %d: %d bytes, more than a batch's %d", i, total, MaxBatchSize)
		}
		args[i] = string(data)
	}
	return args, nil
}

// DecodeRequest decodes one argument. A request that does not decode or
// validate is the error of its result, not of the batch.
func DecodeRequest(arg string) (Request, error) {
	var r Request
	if len(arg) > MaxRequestSize {
		return r, fmt.Errorf("%d bytes, more than %d", len(arg), MaxRequestSize)
	}
	if err := json.Unmarshal([]byte(arg), &r); err != nil {
		return r, err
	}
	return r, r.Validate()
}

// DecodeResults decodes the standard output of a batch of n requests.
func DecodeResults(out []byte, n int) ([]Result, error) {
	var rs []Result
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("the batch's output is not its results: %w", err)
	}
	if len(rs) != n {
		return nil, fmt.Errorf("the batch gave %d results for %d commands", len(rs), n)
	}
	return rs, nil
}

// Tail returns the last max bytes of b.
func Tail(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	return b[len(b)-max:]
}

// Size returns the size of r's JSON, as [EncodeRequests] counts it.
func (r Request) Size() int {
	data, _ := json.Marshal(r)
	return len(data)
}
