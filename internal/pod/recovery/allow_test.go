package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// observed is an Observer that keeps what it is told.
type observed struct {
	mu   sync.Mutex
	seen []string
}

var _ Observer = (*observed)(nil)

func (o *observed) DeadMountFound(plugin string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, "dead "+plugin)
}

func (o *observed) RecoveryAttempted(plugin string, out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, fmt.Sprintf("attempt %s %s", plugin, out))
}

func (o *observed) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// TestRefusedRecordStaysDead: a dead mount whose record Allow refuses
// (its server was removed from the allow-list) is neither detached, nor
// are its leftovers killed, nor is it mounted again; the refusal is
// reported once, however many passes see it, and once Allow lets it
// through, the mount comes back at the next pass.
func TestRefusedRecordStaysDead(t *testing.T) {
	b := newBed(t)
	rec := glusterRecord()
	rec.Source = "10.0.0.9:/vol"
	b.record(rec)
	var obs observed
	b.r.Observer = &obs
	b.r.StopLeftovers = func(_ context.Context, tgt string) ([]int, error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.calls = append(b.calls, "stop "+tgt)
		return nil, nil
	}
	var mu sync.Mutex
	refusal := errors.New("server 10.0.0.9 is not allowed")
	var asked []string
	b.r.Allow = func(_ context.Context, r mountrecord.Record) error {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, r.Source)
		return refusal
	}
	setRefusal := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		refusal = err
	}

	if res := b.pass(); res.Action != "healthy" || len(asked) != 0 {
		t.Fatalf("healthy mount: %+v; Allow asked for %q (only a dead mount is checked)", res, asked)
	}
	b.kill()
	for i := range 5 {
		res := b.pass()
		if res.Action != "refused" || !errors.Is(res.Err, refusal) {
			t.Fatalf("pass %d: %+v; want refused with Allow's error", i, res)
		}
	}
	if len(b.calls) != 0 {
		t.Fatalf("a refused record ran %q; want nothing detached, killed or mounted", b.calls)
	}
	if len(asked) != 5 || asked[0] != "10.0.0.9:/vol" {
		t.Errorf("Allow asked for %q; want the record at each of the 5 passes", asked)
	}
	if got, want := b.reports.get(), []string{"refused " + target + ": server 10.0.0.9 is not allowed"}; !slices.Equal(got, want) {
		t.Errorf("reported %q, want %q (once)", got, want)
	}
	wantObs := []string{"dead " + plugin, "attempt " + plugin + " not_recoverable"}
	if got := obs.get(); !slices.Equal(got, wantObs) {
		t.Errorf("observed %q, want %q", got, wantObs)
	}

	// The administrator allows the server again.
	setRefusal(nil)
	if res := b.pass(); res.Action != "recovered" {
		t.Fatalf("allowed again: %+v; want recovered", res)
	}
	if want := []string{"umount -l " + target, "stop " + target, "mount -t glusterfs -o log-level=WARNING,ro 10.0.0.9:/vol " + target}; !slices.Equal(b.calls, want) {
		t.Errorf("commands %q, want %q", b.calls, want)
	}
	wantObs = append(wantObs, "attempt "+plugin+" recovered") // the same death: not found dead twice
	if got := obs.get(); !slices.Equal(got, wantObs) {
		t.Errorf("observed %q, want %q", got, wantObs)
	}

	// Refused again at its next death: reported again.
	setRefusal(errors.New("server 10.0.0.9 is not allowed any more"))
	b.kill()
	b.calls = nil
	if res := b.pass(); res.Action != "refused" || len(b.calls) != 0 {
		t.Fatalf("second death: %+v, commands %q", res, b.calls)
	}
	got := b.reports.get()
	if len(got) != 3 || !strings.HasPrefix(got[1], "recovered ") || got[2] != "refused "+target+": server 10.0.0.9 is not allowed any more" {
		t.Errorf("reported %q; want the refusal, the recovery, the second refusal", got)
	}
}

// TestKeptAttrs: a replaced mount keeps nosuid, nodev and noexec, and
// nothing else of its options becomes a flag.
func TestKeptAttrs(t *testing.T) {
	for opts, want := range map[string]uint64{
		"rw,nosuid,nodev,relatime": unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		"ro,noexec":                unix.MOUNT_ATTR_NOEXEC,
		"rw,relatime":              0,
		"":                         0,
	} {
		if got := keptAttrs(strings.Split(opts, ",")); got != want {
			t.Errorf("keptAttrs(%q) = %#x, want %#x", opts, got, want)
		}
	}
}
