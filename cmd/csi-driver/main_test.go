package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
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

// TestOldNames: NODE_NAME, the node ID's variable before the driver's
// variables had its prefix, still gives --node-id, and warns.
func TestOldNames(t *testing.T) {
	for _, r := range envRenames {
		t.Setenv(r.New, "")
		os.Unsetenv(r.New)
		t.Setenv(r.Old, "")
		os.Unsetenv(r.Old)
	}
	// --exec-mode is checked after --node-id: its error says the node ID
	// was found.
	args := []string{"csi-driver", "--filesystem", "glusterfs", "--exec-mode", "bogus"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--node-id (or CSI_DRIVER_NODE_ID) is required") {
		t.Fatalf("no node ID = %d, %s; want %d naming the flag and its variable", code, stderr.String(), exitUsage)
	}
	t.Setenv("NODE_NAME", "node-1")
	stderr.Reset()
	if code := run(context.Background(), args, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "--exec-mode") || !strings.Contains(stderr.String(), "NODE_NAME is deprecated: set CSI_DRIVER_NODE_ID") {
		t.Errorf("NODE_NAME set = %d, %s; want the node ID taken, the old name warned of", code, stderr.String())
	}
}
