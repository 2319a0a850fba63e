package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/atomicfile"
	"github.com/mountcontainers/mountcontainers/internal/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// A recovery's state lives next to its record, in a file of its own
// ("<record>.recovering", holding the dead mount's devices, "MAJOR:MINOR"
// each, separated by spaces: see [DeadMount]): written
// before the dead mount is detached from the node, removed once every
// container has the new mount. A pass that finds the node's target not
// mounted, or mounted but still held dead in containers, carries on from
// it, even in the next mount pod. It is not in the record itself so that
// the volume host's removal of the record (an unmount) is never undone by a
// write of the recovery's.

const stateSuffix = ".recovering"

func statePath(dir, target string) string {
	return filepath.Join(dir, mountrecord.FileName(target)+stateSuffix)
}

// readState returns the dead mount a recovery of target left, if any. A
// state file that cannot be trusted or read is ignored (and so is its
// recovery): it is never worth a remount.
func readState(dir, target string) (DeadMount, bool) {
	data, ok, err := registration.ReadTrusted(statePath(dir, target), stateMax)
	if err != nil || !ok {
		return DeadMount{}, false
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 || len(fields) > maxDevices {
		return DeadMount{}, false
	}
	d := DeadMount{Target: target}
	for _, f := range fields {
		var dev Device
		var rest string
		if n, _ := fmt.Sscanf(f, "%d:%d%s", &dev.Major, &dev.Minor, &rest); n != 2 || dev.Major < 0 || dev.Minor < 0 {
			return DeadMount{}, false
		}
		d = d.with(dev)
	}
	return d, true
}

// Unfinished reports whether a recovery of target's mount is under way, by
// the state file in the records directory dir.
func Unfinished(dir, target string) bool {
	_, ok := readState(dir, target)
	return ok
}

// stateMax bounds a state file: maxDevices of "4095:1048575 ".
const stateMax = maxDevices * 13

func writeState(dir string, d DeadMount) error {
	devs := make([]string, len(d.Devices))
	for i, dev := range d.Devices {
		devs[i] = dev.String()
	}
	err := atomicfile.WriteFile(statePath(dir, d.Target), []byte(strings.Join(devs, " ")+"\n"), 0o600)
	if err != nil {
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
