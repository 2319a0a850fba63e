package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ExitMissing is the exit status of test/bed/up.sh when a prerequisite (root,
// packages, Kubernetes binaries, image archives) is missing.
const ExitMissing = 3

var (
	current    *Bed
	skipReason string
)

// Current returns the suite's bed. When the suite found a prerequisite missing
// outside CI it skips the test, naming what is missing.
func Current(t testing.TB) *Bed {
	t.Helper()
	if skipReason != "" {
		t.Skipf("TEST BED UNAVAILABLE, SKIPPING: %s", skipReason)
	}
	if current == nil {
		t.Fatal("no test bed: the package's TestMain must call framework.RunSuite")
	}
	if n := len(current.Env.Nodes); n != 1 {
		t.Fatalf("this test needs a bed of one node; this one has %d (BED_NODES=%d): run it without BED_NODES", n, n)
	}
	return current
}

// CurrentNodes returns the suite's bed, which must have n nodes (test/bed/up.sh
// with BED_NODES=n); otherwise the test fails, naming how to run it.
func CurrentNodes(t testing.TB, n int) *Bed {
	t.Helper()
	if skipReason != "" {
		t.Skipf("TEST BED UNAVAILABLE, SKIPPING: %s", skipReason)
	}
	if current == nil {
		t.Fatal("no test bed: the package's TestMain must call framework.RunSuite")
	}
	if got := len(current.Env.Nodes); got != n {
		t.Fatalf("this test needs a bed of %d nodes; this one has %d: run it with BED_NODES=%d (make e2e-nodes)", n, got, n)
	}
	return current
}

// RunSuite is the body of an end-to-end package's TestMain: it brings a bed up
// with test/bed/up.sh (or reuses a running one when BED_REUSE=1), runs the
// tests, and tears the bed down with test/bed/down.sh unless BED_KEEP=1 or the
// bed was reused. A missing prerequisite skips every test loudly, or fails the
// suite when CI=true. It returns the exit code for os.Exit.
func RunSuite(m *testing.M) int {
	ci := os.Getenv("CI") == "true"
	unavailable := func(reason string) int {
		banner := strings.Repeat("!", 78)
		fmt.Fprintf(os.Stderr, "%s\n!!! TEST BED UNAVAILABLE: %s\n", banner, reason)
		if ci {
			fmt.Fprintf(os.Stderr, "!!! CI=true: failing instead of skipping\n%s\n", banner)
			return 1
		}
		fmt.Fprintf(os.Stderr, "!!! every end-to-end test will be SKIPPED (set CI=true to fail instead)\n%s\n", banner)
		skipReason = reason
		return m.Run()
	}
	if os.Geteuid() != 0 {
		return unavailable("not running as root")
	}
	root, err := RepoRoot()
	if err != nil {
		return unavailable(err.Error())
	}

	if os.Getenv("BED_REUSE") == "1" {
		if bed, err := Connect(EnvPath()); err == nil && bed.Healthy(context.Background()) == nil {
			fmt.Fprintf(os.Stderr, "framework: reusing the running bed of %s (left running afterwards)\n", bed.Env.BedDir)
			current = bed
			code := m.Run()
			if code != 0 {
				diagnose(root)
			}
			return code
		}
		fmt.Fprintln(os.Stderr, "framework: BED_REUSE=1 but no healthy bed is running; starting one")
	}

	down := func() error { return runScript(root, "down.sh") }
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-stop
		fmt.Fprintf(os.Stderr, "framework: %s: tearing the bed down\n", sig)
		if err := down(); err != nil {
			fmt.Fprintf(os.Stderr, "framework: %v\n", err)
		}
		os.Exit(2)
	}()

	start := time.Now()
	if err := runScript(root, "up.sh"); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == ExitMissing {
			return unavailable("a prerequisite is missing (see up.sh output above): run test/bed/e2e.sh, or setup.sh, build-kube.sh and images.sh")
		}
		fmt.Fprintf(os.Stderr, "framework: bringing the bed up failed: %v\n", err)
		if derr := down(); derr != nil {
			fmt.Fprintf(os.Stderr, "framework: %v\n", derr)
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "framework: bed up in %.1fs\n", time.Since(start).Seconds())
	bed, err := Connect(EnvPath())
	if err != nil {
		fmt.Fprintf(os.Stderr, "framework: %v\n", err)
		_ = down()
		return 1
	}
	current = bed

	suiteStart := time.Now()
	code := m.Run()
	fmt.Fprintf(os.Stderr, "framework: tests ran in %.1fs\n", time.Since(suiteStart).Seconds())
	if code != 0 {
		// Before the bed goes: its pods, events and mount pods' logs
		// go with it.
		diagnose(root)
	}
	signal.Stop(stop)
	if os.Getenv("BED_KEEP") == "1" {
		fmt.Fprintf(os.Stderr, "framework: BED_KEEP=1: bed left running; tear it down with test/bed/down.sh\n")
		return code
	}
	if err := down(); err != nil {
		fmt.Fprintf(os.Stderr, "framework: %v\n", err)
		return 1
	}
	return code
}

// diagnose runs test/bed/diagnose.sh, bounded to five minutes, unless
// BED_DIAGNOSE=0: what a reader of a failed run's log needs once the machine
// is gone. It never fails the suite.
func diagnose(root string) {
	if os.Getenv("BED_DIAGNOSE") == "0" {
		return
	}
	fmt.Fprintln(os.Stderr, "framework: the suite failed: test/bed/diagnose.sh (BED_DIAGNOSE=0 skips it)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "test", "bed", "diagnose.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Dir = root
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "framework: diagnose.sh: %v\n", err)
	}
}

// runScript runs test/bed/<name> with the suite's environment, its output
// going to the suite's standard error.
func runScript(root, name string) error {
	cmd := exec.Command("bash", filepath.Join(root, "test", "bed", name))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Dir = root
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
