//go:build e2e

// Package e2e holds the end-to-end tests. They run against one real
// Kubernetes test bed per `go test` run, brought up in TestMain by
// test/bed/up.sh and torn down afterwards (when a test failed, after
// test/bed/diagnose.sh); see test/README.md. The bed has
// one node unless BED_NODES says more: a test gets it with
// framework.Current(t) (one node) or framework.CurrentNodes(t, n) (TestNodes,
// build tag e2e_nodes). Do not add another TestMain here.
package e2e

import (
	"os"
	"testing"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

func TestMain(m *testing.M) {
	if os.Getenv(envSanityChild) != "" {
		// csi-sanity's own process (TestCSI/Sanity): it speaks to a driver
		// on the running bed and needs no bed of its own.
		os.Exit(m.Run())
	}
	os.Exit(framework.RunSuite(m))
}
