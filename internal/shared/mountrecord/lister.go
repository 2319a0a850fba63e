package mountrecord

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Lister lists a directory's records as [List] does, for a caller that
// lists the same directory again and again (the recovery, up to every
// second):
// a record whose file is the version it read at an earlier listing is not
// read and decoded again. Every file is still checked against the trust
// rules at every listing, by a stat of it then. Only a version whose
// ctime was more than a second before its read is taken as read (see
// [registration.FileVersion]): a record written again within the tick of
// the clock that stamped it could otherwise look unchanged. The first
// listing fullAfter (a minute) or more after the last that read every
// record reads every record all the same: on a file system whose clock
// is not the node's (a network one) or whose times are coarser than a
// second, that bounds how long a change can go unseen, however often the
// caller lists. The zero Lister is ready; it is safe for concurrent use.
type Lister struct {
	mu       sync.Mutex
	dir      string
	known    map[string]knownRecord
	lastFull time.Time
	// now tells the time of the full reads; default time.Now.
	now func() time.Time
	// decoded counts the records read and decoded (for the tests).
	decoded int
}

type knownRecord struct {
	version registration.FileVersion
	entry   Entry
}

// settleWindow is how long before its read a record's ctime must be for
// the Lister to keep it; a listing fullAfter after the last full one
// reads every record. Variables for the tests.
var (
	settleWindow = time.Second
	fullAfter    = time.Minute
)

// List returns what [List] of dir returns. The records it returns are the
// caller's: none is shared with an earlier or a later listing.
func (l *Lister) List(dir string) ([]Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if dir != l.dir {
		l.dir, l.known = dir, nil
	}
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	if t := now(); l.known == nil || t.Sub(l.lastFull) >= fullAfter {
		l.known, l.lastFull = nil, t
	}
	readAt := time.Now()
	files, err := registration.ReadTrustedDirChanged(dir, MaxSize, isRecordName, func(name string, v registration.FileVersion) bool {
		k, ok := l.known[name]
		return ok && k.version == v
	})
	if err != nil {
		return nil, fmt.Errorf("list mount records in %s: %w", dir, err)
	}
	known := make(map[string]knownRecord, len(files))
	out := make([]Entry, 0, len(files))
	for _, f := range files {
		var e Entry
		if f.Unchanged {
			e = l.known[f.Name].entry
		} else {
			e = entryOf(dir, f)
			if f.Err == nil {
				l.decoded++
			}
		}
		if e.Err == nil && (f.Unchanged || f.Version.Settled(readAt, settleWindow)) {
			known[f.Name] = knownRecord{version: f.Version, entry: e}
		}
		e.Record = e.Record.clone()
		out = append(out, e)
	}
	l.known = known
	return out, nil
}

// clone returns a copy of r that shares nothing with it.
func (r Record) clone() Record {
	r.Options = slices.Clone(r.Options)
	if r.Pod != nil {
		p := *r.Pod
		r.Pod = &p
	}
	return r
}
