package main

import (
	"errors"
	"testing"
)

// TestCommandSlotsSetting: a bad MOUNTPOD_COMMAND_SLOTS is an error naming
// the variable (serve refuses to start); 0 turns the bound off.
func TestCommandSlotsSetting(t *testing.T) {
	for _, v := range []string{"x", "-1", "1025", "1.5", ""} {
		t.Setenv(envCommandSlots, v)
		if s, err := openCommandSlots(); !errors.Is(err, errBadCommandSlots) || s != nil {
			t.Errorf("%s=%q: %v, want %v", envCommandSlots, v, err, errBadCommandSlots)
		}
	}
	t.Setenv(envCommandSlots, "0")
	if s, err := openCommandSlots(); s != nil || err != nil {
		t.Errorf("%s=0: %v, %v, want no slots and no error", envCommandSlots, s, err)
	}
}
