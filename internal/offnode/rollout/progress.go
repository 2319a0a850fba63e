package rollout

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Status is what a progress [Event] reports about its step.
type Status string

// The statuses of an Event.
const (
	StatusStarted Status = "started"
	StatusDone    Status = "done"
	StatusFailed  Status = "failed"
	StatusInfo    Status = "info"
)

// Event is one line of progress.
type Event struct {
	Time time.Time `json:"time"`
	// Node is empty for events about the whole rollout.
	Node   string `json:"node,omitempty"`
	Step   Step   `json:"step,omitempty"`
	Status Status `json:"status"`
	// StepSeconds is how long the step took (done, failed) or has been
	// running (info); NodeSeconds the same for the node, TotalSeconds for
	// the rollout.
	StepSeconds  float64 `json:"stepSeconds,omitempty"`
	NodeSeconds  float64 `json:"nodeSeconds,omitempty"`
	TotalSeconds float64 `json:"totalSeconds"`
	Message      string  `json:"message,omitempty"`
}

// Reporter receives the progress of a rollout and its plan. Implementations
// must be safe for concurrent use: nodes run in parallel.
type Reporter interface {
	Plan(*Plan)
	Event(Event)
}

// NewReporter returns a Reporter writing to w: one line a person can read
// per event when format is "text", one JSON object per line when it is
// "json".
func NewReporter(w io.Writer, format string) (Reporter, error) {
	switch format {
	case "", "text":
		return &textReporter{w: w}, nil
	case "json":
		return &jsonReporter{enc: json.NewEncoder(w)}, nil
	}
	return nil, fmt.Errorf("output format %q: want text or json", format)
}

type textReporter struct {
	mu sync.Mutex
	w  io.Writer
}

// Plan prints the plan as [Plan.String] renders it.
func (t *textReporter) Plan(p *Plan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprint(t.w, p.String())
}

// Event prints one line: time, node, step, status, elapsed times, message.
func (t *textReporter) Event(e Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	node := e.Node
	if node == "" {
		node = "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-20s %-14s %-8s", e.Time.Format("15:04:05"), node, e.Step, e.Status)
	if e.StepSeconds > 0 {
		fmt.Fprintf(&b, " %6.1fs", e.StepSeconds)
	}
	if e.Node != "" {
		fmt.Fprintf(&b, "  node %.1fs", e.NodeSeconds)
	}
	fmt.Fprintf(&b, "  total %.1fs", e.TotalSeconds)
	if e.Message != "" {
		b.WriteString("  " + strings.ReplaceAll(e.Message, "\n", "\n    "))
	}
	fmt.Fprintln(t.w, b.String())
}

type jsonReporter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// Plan prints {"plan": p}.
func (j *jsonReporter) Plan(p *Plan) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.enc.Encode(map[string]any{"plan": p})
}

// Event prints e as one JSON object.
func (j *jsonReporter) Event(e Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.enc.Encode(e)
}

// discard is a Reporter that drops everything.
type discard struct{}

var (
	_ Reporter = (*textReporter)(nil)
	_ Reporter = (*jsonReporter)(nil)
	_ Reporter = discard{}
)

// Plan drops the plan.
func (discard) Plan(*Plan) {}

// Event drops the event.
func (discard) Event(Event) {}
