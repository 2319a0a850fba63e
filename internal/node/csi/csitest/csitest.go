// Package csitest runs csi-sanity (github.com/kubernetes-csi/csi-test's
// pkg/sanity) against a CSI driver from a Go test and accounts for it:
// how many of its specs passed, failed, were skipped and why. The unit
// tests of package csi and the end-to-end tests on the bed use it. Only
// tests link it.
package csitest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
)

// Result is what a csi-sanity run did.
type Result struct {
	Passed, Failed, Skipped, Pending int
	// Skips lists the skipped specs by the reason csi-sanity gave.
	Skips map[string][]string
	// NodeLifecycle counts the passed specs of the Node service that stage
	// or publish a volume (they need CreateVolume).
	NodeLifecycle int
}

// Sanity runs every csi-sanity spec against the driver cfg names, fails t
// with each failed spec, logs what was skipped and why, and returns the
// accounting. A process runs one csi-sanity suite: call it once per test
// binary run.
func Sanity(t *testing.T, cfg sanity.TestConfig) Result {
	t.Helper()
	sc := sanity.GinkgoTest(&cfg)
	res := Result{Skips: map[string][]string{}}
	ginkgo.ReportAfterSuite("csi-sanity accounting", func(r ginkgo.Report) {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt {
				continue
			}
			switch {
			case s.State == types.SpecStatePassed:
				res.Passed++
				if name := s.FullText(); strings.Contains(name, "Node Service") && (strings.Contains(name, "Stage") || strings.Contains(name, "Publish")) {
					res.NodeLifecycle++
				}
			case s.State == types.SpecStateSkipped:
				res.Skipped++
				why := strings.TrimSpace(s.Failure.Message)
				if why == "" {
					why = "(no reason given)"
				}
				res.Skips[why] = append(res.Skips[why], s.FullText())
			case s.State == types.SpecStatePending:
				res.Pending++
			case s.State.Is(types.SpecStateFailureStates):
				res.Failed++
			}
		}
	})
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "csi-sanity")
	sc.Finalize()
	t.Log(res.Summary())
	return res
}

// Summary is the accounting in a few lines: the counts, then each reason
// of a skip with how many specs it skipped.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "csi-sanity: %d passed (%d of the node's stage/publish lifecycle), %d failed, %d skipped, %d pending",
		r.Passed, r.NodeLifecycle, r.Failed, r.Skipped, r.Pending)
	for _, why := range slices.Sorted(maps.Keys(r.Skips)) {
		fmt.Fprintf(&b, "\n  skipped %2d: %s", len(r.Skips[why]), why)
	}
	return b.String()
}
