package shim

import (
	"testing"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// The shim proves an exec socket live itself (without importing package
// exec, to stay small), with the library's bound.
func TestSocketProbeTimeoutIsTheLibrarys(t *testing.T) {
	if socketProbeTimeout != mcexec.DefaultSocketTimeout {
		t.Errorf("socketProbeTimeout = %s, package exec's DefaultSocketTimeout = %s", socketProbeTimeout, mcexec.DefaultSocketTimeout)
	}
}
