package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/mountcontainers/mountcontainers/internal/shared/atomicfile"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// A recovery's state lives next to its record, in a file of its own
// ("<record>.recovering"): written before the dead mount is detached from
// the node, narrowed at each attempt to the dead mounts that some other
// mount namespace still holds, and removed once every container has the new
// mount or none holds a dead one any more. A pass that finds the node's
// target not mounted, or mounted but still held dead in containers, carries
// on from it, even in the next mount pod. It is not in the record itself so
// that the volume host's removal of the record (an unmount) is never undone
// by a write of the recovery's.
//
// The file's first line is stateVersion; each further line is a dead mount
// ([Identity]), "MAJOR:MINOR FSTYPE SOURCE", the fields as mountinfo shows
// them. A file with no further line is a recovery whose node mount is still
// to be made again, with nothing left to attach. A FUSE mount is written
// only when root made it ([identityOf]), and a line names no owner: the
// check is made again on every mount a holder shows, so a file of an
// earlier build, which did not check, never lets another user's mount be
// taken for a dead one either.
//
// A file of an earlier version holds only device numbers, "MAJOR:MINOR"
// separated by spaces. It is read as a recovery under way with no dead
// mount to attach: a number alone may be another mount's by now, and the
// record's type and source cannot stand in for what mountinfo showed (a
// record's glusterfs is mountinfo's fuse.glusterfs, and a FUSE daemon names
// its mount's source as it likes). It is not dropped either: a target it
// detached would then look unmounted by other means, and its record would
// be dropped without the remount. So the node's mount is made again, and
// the containers that still hold the dead mount keep it, dead, until they
// restart.

const (
	stateSuffix  = ".recovering"
	stateVersion = "v2"
	// maxField bounds a dead mount's type and source: the kernel takes a
	// source of up to 4095 bytes, and mountinfo shows a space, tab, newline
	// or backslash in it as four.
	maxField = 4 * 4096
	// stateMax bounds a state file: its version line and maxDevices lines
	// of dead mounts with the largest device numbers and fields.
	stateMax = len(stateVersion) + 1 + maxDevices*(len("4095:1048575")+2*maxField+3)
)

func statePath(dir, target string) string {
	return filepath.Join(dir, mountrecord.FileName(target)+stateSuffix)
}

// readState returns the dead mount a recovery of target left, if any. A
// state file that cannot be trusted or read is ignored (and so is its
// recovery): it is never worth a remount.
func readState(dir, target string) (DeadMount, bool) {
	data, ok, err := registration.ReadTrusted(statePath(dir, target), int64(stateMax))
	if err != nil || !ok {
		return DeadMount{}, false
	}
	return parseState(target, string(data))
}

// passStates are the state files of a records directory, read once for a
// pass ([readStates]) rather than once per record: most records have none,
// and looking for each one walked the directory's path from / again (on a
// node with 100 mounts, 100 walks a second, a tenth of what the mount
// pod's daemon did under a wave of mounts). Nil: the directory could not be
// read as a whole, and each record's is looked for by [readState].
type passStates map[string]string

// readStates reads every state file of the records directory dir, under
// the rules of [readState] (a file that cannot be trusted or read is
// left out, as readState ignores it). Only the recovery, while its pod
// holds the registration, writes them, and a pass holds the recoverer's
// lock: what it reads stays true for the pass.
func readStates(dir string) passStates {
	files, err := registration.ReadTrustedDir(dir, int64(stateMax), func(name string) bool {
		return !strings.HasPrefix(name, ".") && strings.HasSuffix(name, stateSuffix)
	})
	if err != nil {
		return nil
	}
	states := passStates{}
	for _, f := range files {
		if f.Err == nil {
			states[f.Name] = string(f.Data)
		}
	}
	return states
}

// of returns the dead mount a recovery of target left, if any, as
// [readState] does.
func (p passStates) of(dir, target string) (DeadMount, bool) {
	if p == nil {
		return readState(dir, target)
	}
	data, ok := p[filepath.Base(statePath(dir, target))]
	if !ok {
		return DeadMount{}, false
	}
	return parseState(target, data)
}

// parseState reads the content s of target's state file.
func parseState(target, s string) (DeadMount, bool) {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if lines[0] != stateVersion {
		return parseDevicesOnly(target, s)
	}
	d := DeadMount{Target: target}
	for _, line := range lines[1:] {
		id, ok := parseIdentity(line)
		if !ok || len(d.Mounts) == maxDevices {
			return DeadMount{}, false
		}
		d = d.with(id)
	}
	return d, true
}

// parseDevicesOnly reads a state file of the earlier version: device
// numbers only, whose recovery goes on with no dead mount to attach.
func parseDevicesOnly(target, s string) (DeadMount, bool) {
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > maxDevices {
		return DeadMount{}, false
	}
	for _, f := range fields {
		if _, ok := parseDevice(f); !ok {
			return DeadMount{}, false
		}
	}
	return DeadMount{Target: target}, true
}

// parseIdentity reads a dead mount's line, "MAJOR:MINOR FSTYPE SOURCE".
func parseIdentity(line string) (Identity, bool) {
	f := strings.Split(line, " ")
	if len(f) != 3 {
		return Identity{}, false
	}
	dev, ok := parseDevice(f[0])
	id := Identity{Device: dev, FSType: f[1], Source: f[2]}
	return id, ok && id.valid()
}

// parseDevice reads "MAJOR:MINOR", in decimal, within the kernel's ranges
// (12 and 20 bits).
func parseDevice(s string) (Device, bool) {
	major, minor, ok := strings.Cut(s, ":")
	ma, err1 := strconv.ParseUint(major, 10, 12)
	mi, err2 := strconv.ParseUint(minor, 10, 20)
	if !ok || err1 != nil || err2 != nil {
		return Device{}, false
	}
	return Device{int(ma), int(mi)}, true
}

// valid reports whether id can be kept in a state file and read back the
// same: a device number within the kernel's ranges, and a type and a source
// that are not empty, hold no white space and are at most maxField long.
func (id Identity) valid() bool {
	field := func(s string) bool {
		return s != "" && len(s) <= maxField && !strings.ContainsFunc(s, unicode.IsSpace)
	}
	d := id.Device
	return d.Major >= 0 && d.Major < 1<<12 && d.Minor >= 0 && d.Minor < 1<<20 && field(id.FSType) && field(id.Source)
}

// Unfinished reports whether a recovery of target's mount is under way, by
// the state file in the records directory dir.
func Unfinished(dir, target string) bool {
	_, ok := readState(dir, target)
	return ok
}

func writeState(dir string, d DeadMount) error {
	var b strings.Builder
	b.WriteString(stateVersion + "\n")
	for _, id := range d.Mounts {
		if !id.valid() {
			return fmt.Errorf("keep the recovery's state: the dead mount %q cannot be kept", id)
		}
		b.WriteString(id.String() + "\n")
	}
	if err := atomicfile.WriteFile(statePath(dir, d.Target), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("keep the recovery's state: %w", err)
	}
	return nil
}

// clearState removes target's recovery state; one that cannot be removed
// is found again by the next pass, which then finds nothing to do.
func clearState(dir, target string) {
	_ = os.Remove(statePath(dir, target))
}

// removeOrphanStates removes the state files whose record is gone (the
// volume host unmounted while a recovery was under way).
func removeOrphanStates(dir string) {
	states, _ := filepath.Glob(filepath.Join(dir, "*.json"+stateSuffix))
	for _, s := range states {
		if _, err := os.Lstat(strings.TrimSuffix(s, stateSuffix)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(s)
		}
	}
}
