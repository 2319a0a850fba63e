package livemount

import (
	"sync"
	"time"

	"k8s.io/mount-utils"
)

// MaxAnswerAge is the oldest answer a survey with [Options.Answers] takes
// for a mount's health. The recovery's poll stats each mount it watches at
// least once every five seconds (recovery.ProbeEvery): this leaves room
// for a slow pass.
const MaxAnswerAge = 10 * time.Second

// Answers are the mounts' last answers to a stat made by another part of
// the process: in the mount pod, the recovery's probes. A survey with
// [Options.Answers] takes a mount's answer of less than [MaxAnswerAge]
// for its health rather than stat it again (a FUSE stat is a round trip
// to the daemon, and a hundred of them every survey kept the runtime
// busy while they lasted). A mount is known by its target, its mount ID,
// its parent's, its device number and its source, so that a mount made at
// the target since is not taken for the one that answered (mount IDs and
// the device numbers of FUSE mounts are both given out again, the lowest
// free first). Its methods are safe for
// concurrent use; the zero value is ready.
type Answers struct {
	mu sync.Mutex
	at map[string]answer
}

type answer struct {
	id, parent, major, minor int
	source                   string
	at                       time.Time
}

func answerOf(mi mount.MountInfo, at time.Time) answer {
	return answer{id: mi.ID, parent: mi.ParentID, major: mi.Major, minor: mi.Minor, source: mi.Source, at: at}
}

// Note records that the mount mi answered a stat made at t (the time
// before the stat, not after its answer), or, when err is not nil,
// forgets its last answer.
func (a *Answers) Note(mi mount.MountInfo, t time.Time, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		delete(a.at, mi.MountPoint)
		return
	}
	if a.at == nil {
		a.at = map[string]answer{}
	}
	a.at[mi.MountPoint] = answerOf(mi, t)
}

// Retain forgets the answers of the targets that keep does not keep.
func (a *Answers) Retain(keep func(target string) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for t := range a.at {
		if !keep(t) {
			delete(a.at, t)
		}
	}
}

// AnsweredSince reports whether the mount mi answered a stat at or after
// t. A nil a knows of no answer.
func (a *Answers) AnsweredSince(mi mount.MountInfo, t time.Time) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	got, ok := a.at[mi.MountPoint]
	want := answerOf(mi, got.at)
	return ok && got == want && !got.at.Before(t)
}
