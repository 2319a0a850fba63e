//go:build e2e

// Package e2e holds the end-to-end tests. They run against one real
// single-node Kubernetes test bed per `go test` run, brought up in TestMain by
// test/bed/up.sh and torn down afterwards; see test/README.md. Every test gets
// the bed with framework.Current(t). Do not add another TestMain here.
package e2e

import (
	"os"
	"testing"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunSuite(m))
}
