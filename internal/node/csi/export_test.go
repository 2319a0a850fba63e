package csi

import (
	"os"
	"testing"
)

// HoldCreateDir runs hold before CreateVolume's directory work on the
// administrator's volume, until t ends: a test holds the work there as a
// server that does not answer lookups would.
func HoldCreateDir(t testing.TB, hold func()) {
	createDirOf = func(root *os.Root, dir string, capacity int64) error {
		hold()
		return createDir(root, dir, capacity)
	}
	t.Cleanup(func() { createDirOf = createDir })
}
