package crihelper

import (
	"slices"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/pkg/cri"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// The shim checks its flags without linking package exec or cri; what it
// accepts must be what they accept.
func TestShimFlagsMatchTheRuntimePackages(t *testing.T) {
	if shim.EnvRuntimeEndpoint != cri.EnvEndpoint {
		t.Errorf("shim reads %s, package cri %s", shim.EnvRuntimeEndpoint, cri.EnvEndpoint)
	}
	want := []string{string(mcexec.ModeAuto), string(mcexec.ModeCRI), string(mcexec.ModeSocket)}
	if !slices.Equal(shim.ExecModes, want) {
		t.Errorf("shim exec modes %v, package exec %v (the default first)", shim.ExecModes, want)
	}
	for _, m := range shim.ExecModes {
		if _, err := mcexec.ParseExecMode(m); err != nil {
			t.Errorf("shim accepts --exec-mode %s, package exec does not: %v", m, err)
		}
	}
}
