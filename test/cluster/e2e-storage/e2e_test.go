// Package e2estorage is Kubernetes' end-to-end suite with only its External
// Storage part registered: the TestMain of k8s.io/kubernetes/test/e2e (its
// flags, less -version, -list-conformance-tests and the log checker's; its
// embedded manifests) and that package's RunE2ETests and suite set-up, with
// test/e2e/storage/external as the one source of specs. A driver definition
// given by --storage.testdriver makes the same specs as in the full
// e2e.test, from the same code; the specs of the other areas (apps,
// network, node, the in-tree storage drivers ...) are not compiled in.
// test/bed/build-e2e-test.sh builds it as e2e.test; test/README.md
// ("Conformance") says why, and how its spec list was compared with the
// full binary's.
package e2estorage

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// As in k8s.io/kubernetes/test/e2e/e2e_test.go: define and freeze the
	// feature constants, then the specs, then reconfigure the framework.
	_ "k8s.io/kubernetes/test/e2e/feature"

	_ "k8s.io/kubernetes/test/e2e/storage/external"

	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/format"
)

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()

	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s\n", flag.CommandLine.Args())
		os.Exit(1)
	}

	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())

	framework.AfterReadingAllFlags(&framework.TestContext)
	if framework.TestContext.RepoRoot != "" {
		testfiles.AddFileSource(testfiles.RootFileSource{Root: framework.TestContext.RepoRoot})
	}

	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
