package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestHelpAndUsageExit: --help lists the exit codes, and bad input exits
// with the usage code, naming the flag.
func TestHelpAndUsageExit(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"csi-driver", "--help"}, &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), fmt.Sprintf("%d the driver failed while serving; %d bad flags", exitFailure, exitUsage)) {
		t.Errorf("--help = %d, %s; want 0 and the exit codes listed", code, stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"csi-driver", "--filesystem", "nfs", "--node-id", "n"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "--filesystem") {
		t.Errorf("--filesystem nfs = %d, %s; want %d naming the flag", code, stderr.String(), exitUsage)
	}
}
