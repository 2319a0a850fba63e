package mountrecord

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// settled makes the Lister keep what it reads at once (its window of a
// second is what lets the clock's tick pass; the tests wait out the tick
// themselves where they change a file).
func settled(t testing.TB, d time.Duration) {
	old := settleWindow
	settleWindow = d
	t.Cleanup(func() { settleWindow = old })
}

// tick waits until the coarse clock that stamps ctimes has moved on.
func tick() { time.Sleep(30 * time.Millisecond) }

// listedEqual fails unless the Lister's listing of dir is List's.
func listedEqual(t *testing.T, l *Lister, dir string) []Entry {
	t.Helper()
	want, werr := List(dir)
	got, gerr := l.List(dir)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) || len(got) != len(want) {
		t.Fatalf("Lister.List = %+v, %v; List = %+v, %v", got, gerr, want, werr)
	}
	for i := range got {
		if got[i].Path != want[i].Path || fmt.Sprint(got[i].Err) != fmt.Sprint(want[i].Err) || !reflect.DeepEqual(got[i].Record, want[i].Record) {
			t.Fatalf("entry %d: Lister %+v, List %+v", i, got[i], want[i])
		}
	}
	return got
}

// A listing reads again only the records whose file changed, whatever
// the change: written again in place (the same size, the times put
// back), replaced, made untrusted, removed; and what it returns is the
// caller's.
func TestListerReadsOnlyWhatChanged(t *testing.T) {
	settled(t, 0)
	dir := filepath.Join(t.TempDir(), Dir)
	var targets []string
	for i := range 5 {
		targets = append(targets, fmt.Sprintf("/k/pods/%d/volumes/x", i))
		r := glusterRecord(targets[i])
		r.Pod = &Pod{Namespace: "default", Name: fmt.Sprint("p", i), UID: "6a1f9c5e-9e3b-4f3a-8d3c-1b2a3c4d5e6f"}
		if err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	tick()
	var l Lister
	decoded := func(want int, after string) {
		t.Helper()
		if l.decoded != want {
			t.Fatalf("%s: %d records decoded in all, want %d", after, l.decoded, want)
		}
	}
	es := listedEqual(t, &l, dir)
	decoded(5, "the first listing")
	es[0].Record.Options[0] = "changed by the caller"
	es[0].Record.Pod.Name = "changed by the caller"
	listedEqual(t, &l, dir)
	decoded(5, "a listing of the same files")

	// In place, the same length, the times put back: the ctime moved.
	p := filepath.Join(dir, FileName(targets[1]))
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	tick()
	same := strings.Replace(string(data), "srv:/vol", "new:/vol", 1)
	if len(same) != len(data) {
		t.Fatal("the test's rewrite changed the length")
	}
	if err := os.WriteFile(p, []byte(same), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.UtimesNano(p, []unix.Timespec{st.Atim, st.Mtim}); err != nil {
		t.Fatal(err)
	}
	// Replaced, as Write does; made untrusted; removed.
	r := glusterRecord(targets[2])
	r.Source = "other:/vol"
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, FileName(targets[3])), 0o622); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, targets[4]); err != nil {
		t.Fatal(err)
	}
	es = listedEqual(t, &l, dir)
	decoded(7, "a rewrite and a replacement")
	byPath := map[string]Entry{}
	for _, e := range es {
		byPath[e.Path] = e
	}
	at := func(i int) Entry { return byPath[filepath.Join(dir, FileName(targets[i]))] }
	if len(es) != 4 || at(1).Record.Source != "new:/vol" || at(2).Record.Source != "other:/vol" || at(3).Err == nil || at(0).Record.Source != "srv:/vol" {
		t.Fatalf("after the changes: %+v", es)
	}
	tick()
	listedEqual(t, &l, dir)
	decoded(7, "a listing after the changes")

	// Untrusted again in place: refused at once, though its version was
	// read, and read again once trusted.
	if err := os.Chmod(filepath.Join(dir, FileName(targets[0])), 0o602); err != nil {
		t.Fatal(err)
	}
	for _, e := range listedEqual(t, &l, dir) {
		if e.Path == filepath.Join(dir, FileName(targets[0])) && e.Err == nil {
			t.Fatalf("a record others may write, listed: %+v", e)
		}
	}
	if err := os.Chmod(filepath.Join(dir, FileName(targets[0])), 0o600); err != nil {
		t.Fatal(err)
	}
	tick()
	listedEqual(t, &l, dir)
	decoded(8, "a record trusted again")
}

// A record whose ctime is within the window of its read is read again at
// every listing, until it has settled.
func TestListerReadsAgainWhatIsNotSettled(t *testing.T) {
	settled(t, time.Hour)
	dir := filepath.Join(t.TempDir(), Dir)
	if err := Write(dir, glusterRecord("/k/pods/a/volumes/x")); err != nil {
		t.Fatal(err)
	}
	var l Lister
	for range 3 {
		listedEqual(t, &l, dir)
	}
	if l.decoded != 3 {
		t.Fatalf("%d decoded in three listings of a record written within the window, want 3", l.decoded)
	}
	settleWindow = 0
	tick()
	for range 3 {
		listedEqual(t, &l, dir)
	}
	if l.decoded != 4 {
		t.Fatalf("%d decoded in all after three listings of a settled record, want 4", l.decoded)
	}
	// Another directory: nothing of the first is taken as read.
	other := filepath.Join(t.TempDir(), Dir)
	if err := Write(other, glusterRecord("/k/pods/a/volumes/x")); err != nil {
		t.Fatal(err)
	}
	listedEqual(t, &l, other)
	if l.decoded != 5 {
		t.Fatalf("%d decoded in all after a listing of another directory, want 5", l.decoded)
	}
}

// The first listing fullAfter or more after the last full one reads every
// record, changed or not, however often the caller lists.
func TestListerReadsAllNowAndThen(t *testing.T) {
	settled(t, 0)
	dir := filepath.Join(t.TempDir(), Dir)
	for _, target := range []string{"/k/pods/a/volumes/x", "/k/pods/b/volumes/x"} {
		if err := Write(dir, glusterRecord(target)); err != nil {
			t.Fatal(err)
		}
	}
	tick()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	l := Lister{now: func() time.Time { return now }}
	var got []int
	for _, d := range []time.Duration{0, time.Second, fullAfter - time.Second - time.Millisecond, time.Millisecond, time.Second, 5 * time.Minute, 0} {
		now = now.Add(d)
		listedEqual(t, &l, dir)
		got = append(got, l.decoded)
	}
	if want := []int{2, 2, 2, 4, 4, 6, 6}; !reflect.DeepEqual(got, want) {
		t.Fatalf("records decoded in all after each listing: %v, want %v", got, want)
	}
}

// BenchmarkLister: the recovery's listing of 100 records that have not
// changed ("unchanged", Lister, without its full read once a minute,
// which adds a sixtieth of "read-all" when it lists every second),
// against reading and decoding them all ("read-all", List).
func BenchmarkLister(b *testing.B) {
	settled(b, 0)
	old := fullAfter
	b.Cleanup(func() { fullAfter = old })
	fullAfter = math.MaxInt64
	dir := filepath.Join(b.TempDir(), "kubelet", "plugin-containers", Dir)
	for i := range 100 {
		if err := Write(dir, glusterRecord(fmt.Sprintf("/var/lib/kubelet/pods/%d/volumes/kubernetes.io~glusterfs/v", i))); err != nil {
			b.Fatal(err)
		}
	}
	tick()
	b.Run("unchanged", func(b *testing.B) {
		var l Lister
		for b.Loop() {
			if es, err := l.List(dir); err != nil || len(es) != 100 {
				b.Fatalf("%d records, %v", len(es), err)
			}
		}
		if l.decoded != 100 {
			b.Fatalf("%d decoded, want 100", l.decoded)
		}
	})
	b.Run("read-all", func(b *testing.B) {
		for b.Loop() {
			if es, err := List(dir); err != nil || len(es) != 100 {
				b.Fatalf("%d records, %v", len(es), err)
			}
		}
	})
}
