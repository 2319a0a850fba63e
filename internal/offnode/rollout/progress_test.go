package rollout

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestTextReporter(t *testing.T) {
	var b bytes.Buffer
	rep, err := NewReporter(&b, "text")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rep.Event(Event{Time: at, Node: "node-1", Step: StepUnmount, Status: StatusDone, StepSeconds: 2.25, NodeSeconds: 7.5, TotalSeconds: 9, Message: "no mount of the plugin left on the node"})
	rep.Event(Event{Time: at, Status: StatusFailed, TotalSeconds: 10, Message: "line one\nline two"})
	got := b.String()
	t.Logf("\n%s", got)
	for _, want := range []string{
		"03:04:05  node-1               wait-unmount   done        2.2s  node 7.5s  total 9.0s  no mount of the plugin left on the node\n",
		"03:04:05  -                                   failed    total 10.0s  line one\n    line two\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if _, err := NewReporter(&b, "yaml"); err == nil {
		t.Error("format yaml accepted")
	}
}
