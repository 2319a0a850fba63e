//go:build e2e_conformance

package e2e

import (
	"context"
	"encoding/xml"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// The External Storage suite's test patterns that judge what the CSI
// driver claims (docs/csi.md), run every time; CONFORMANCE_SET=all (make
// conformance) runs everything the driver qualifies for, [Serial] and
// [Slow] included. [Disruptive] needs SSH to the node, which the bed does
// not offer, in both sets.
const (
	conformanceSuites = `volumes|volumeIO|subPath|multiVolume|provisioning|ephemeral|volume-stress|volumeMode`
	everyRunSkip      = `\[Disruptive\]|\[Serial\]|\[Slow\]|\[Feature:`
	allSkip           = `\[Disruptive\]`
)

// bedSkips are the specs the bed cannot run, each with why: they are
// skipped (--ginkgo.skip) and reported with the reason.
var bedSkips = []struct{ spec, why string }{
	{`provisioning should provision storage with any volume data source`,
		"[Serial]; runs sig-storage's hello-populator and volume-data-source-validator images, which the bed (no registry) does not have: their pods stay in ImagePullBackOff"},
	{`volumeMode should not mount / map unused volumes in a pod`,
		"looks at /var/lib/kubelet/pods through nsenter into the node's PID 1 mount namespace: the bed's kubelet directory is $BED_DIR/kubelet, and this machine's PID 1 cannot be read"},
}

// e2eImageNames are the images e2e.test's storage tests run (with
// test/conformance/repo-list.yaml's registry) and the bed image each is.
func e2eImageNames(bed *framework.Bed) map[string]string {
	return map[string]string{
		"localhost/e2e/busybox:1.37.0-1":        "localhost/mountcontainers/e2e-busybox:dev",
		"localhost/e2e/nginx:1.15-4":            bed.Env.BaseImage,
		"localhost/e2e/glibc-dns-testing:2.0.0": bed.Env.BaseImage,
		"localhost/e2e/agnhost:2.63.0":          "localhost/mountcontainers/e2e-agnhost:dev",
		"localhost/e2e/pause:3.10.2":            "localhost/mountcontainers/pause:dev",
	}
}

// TestConformance runs Kubernetes' own storage end-to-end tests, the
// External Storage part of e2e.test at the bed's Kubernetes version (built
// from its module, test/bed/build-e2e-test.sh), against each CSI driver on
// the bed's node (CONFORMANCE_DRIVERS narrows: glusterfs, cephfs): the
// driver registered with the kubelet, its controller and the real
// external-provisioner beside it, the real mount pod and server (GlusterFS,
// Ceph), once through each exec path (asserted from the driver's log). A
// driver's definition is test/conformance/<fs>. Every spec's outcome is
// logged (JUnit in the bed's log directory), every skip with its reason;
// one failed spec fails the test.
func TestConformance(t *testing.T) {
	bed := framework.Current(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := buildCmd(t, "csi-driver")
	provisioner := csiProvisioner(t, root)

	start := time.Now()
	out := strings.TrimSpace(run(t, 40*time.Minute, filepath.Join(root, "test/bed/build-e2e-test.sh")))
	e2eDir := out[strings.LastIndex(out, "\n")+1:]
	e2eTest := filepath.Join(e2eDir, "e2e.test")
	if _, err := os.Stat(e2eTest); err != nil {
		t.Fatalf("build-e2e-test.sh: %v\n%s", err, out)
	}
	t.Logf("e2e.test ready %s after the test asked for it", time.Since(start).Round(time.Millisecond))
	run(t, 10*time.Minute, filepath.Join(root, "test/bed/images.sh"), "build", "e2e-agnhost",
		filepath.Join(root, "test/images/e2e-agnhost/Dockerfile"), filepath.Join(e2eDir, "agnhost"))
	run(t, 10*time.Minute, filepath.Join(root, "test/bed/images.sh"), "build", "e2e-busybox",
		filepath.Join(root, "test/images/e2e-busybox/Dockerfile"), filepath.Join(root, "test/images/e2e-busybox"))
	run(t, 2*time.Minute, filepath.Join(root, "test/bed/images.sh"), "import", "e2e-agnhost", "e2e-busybox")
	for name, from := range e2eImageNames(bed) {
		run(t, time.Minute, "ctr", "-a", bed.Env.CRISocket, "-n", "k8s.io", "images", "tag", "--force", from, name)
	}

	set := os.Getenv("CONFORMANCE_SET")
	skip, only := everyRunSkip, ""
	switch set {
	case "", "every-run":
		set = "every-run"
	case "all":
		skip = allSkip
	case "all-but-serial":
		// make conformance's first pass, the four runs at once: the
		// [Serial] specs make cluster-wide objects (a
		// CustomResourceDefinition of one name) that runs at once share.
		skip = allSkip + `|\[Serial\]`
	case "serial":
		// Its second pass, one run at a time (e2e.sh: -parallel 1).
		skip, only = allSkip, `.*\[Serial\]`
	default:
		t.Fatalf("CONFORMANCE_SET=%q: want every-run (the default), all, all-but-serial or serial", set)
	}
	suites := conformanceSuites
	if v := os.Getenv("CONFORMANCE_SUITES"); v != "" {
		suites = v // e.g. subPath|volumes, while working on one
	}
	c := conformance{root: root, e2eTest: e2eTest, set: set, suites: suites, skip: skip, only: only}
	drivers := os.Getenv("CONFORMANCE_DRIVERS")
	for _, fs := range []string{"glusterfs", "cephfs"} {
		if drivers != "" && !slices.Contains(strings.Fields(drivers), fs) {
			continue
		}
		t.Run(fs, func(t *testing.T) {
			// The drivers at once too: each its own server, mount pod,
			// drivers and e2e.test processes.
			t.Parallel()
			// The file system's server and mount pod; start starts its
			// driver named name and the external-provisioner, and returns
			// the driver's log; vars are test/conformance/<fs>'s variables.
			var start func(t *testing.T, mode mcexec.ExecMode, name string) string
			var vars map[string]string
			switch fs {
			case "glusterfs":
				setupGlusterfs(t, bed)
				start = func(t *testing.T, mode mcexec.ExecMode, name string) string {
					return startProvisioner(t, bed, bin, provisioner, "conformance-"+string(mode), mode, name,
						"--filesystem", "glusterfs", "--allowed-servers", bed.Env.HostName, "--driver-name", name)
				}
				vars = map[string]string{"GLUSTER_SERVER": bed.Env.NodeName, "GLUSTER_VOLUME": glusterVolume}
			case "cephfs":
				cfs := setupCephFS(t, bed)
				start = func(t *testing.T, mode mcexec.ExecMode, name string) string {
					return startProvisioner(t, bed, bin, provisioner, "conformance-cephfs-"+string(mode), mode, name,
						append(cfs.cephfsDriverArgs(), "--driver-name", name)...)
				}
				vars = cfs.conformanceVars(t)
			}
			// The exec paths at once, each its own driver: the suite
			// mostly waits (for pods, provisioning, deletion); at once,
			// the two GlusterFS paths took 3 min 49 s, one after the
			// other about 7 min 40 s (test/README.md, "Conformance").
			t.Run("paths", func(t *testing.T) {
				for _, mode := range execModes {
					if v := os.Getenv("CONFORMANCE_EXEC_MODES"); v != "" && !slices.Contains(strings.Fields(v), string(mode)) {
						continue
					}
					t.Run(string(mode), func(t *testing.T) {
						t.Parallel()
						name := conformanceDriverName(fs, mode)
						applyCSIDriverNamed(t, bed, root, fs, name)
						vars := maps.Clone(vars)
						vars["DRIVER_NAME"] = name
						c.run(t, bed, fs, name, start(t, mode, name), vars, mode)
					})
				}
			})
		})
	}
}

// conformanceDriverName is the name of the driver of file system fs whose
// commands go through mode, in TestConformance: each exec path's driver
// runs at once with the other's, so each has a name of its own.
func conformanceDriverName(fs string, mode mcexec.ExecMode) string {
	return fs + "-" + string(mode) + ".mountcontainers.io"
}

// applyCSIDriverNamed applies deploy/csi/<fs>/csidriver.yaml as the
// CSIDriver object of the driver name, and deletes it when t ends.
func applyCSIDriverNamed(t *testing.T, bed *framework.Bed, root, fs, name string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "deploy/csi", fs, "csidriver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	canonical := "name: " + fs + ".mountcontainers.io\n"
	if !strings.Contains(string(raw), canonical) {
		t.Fatalf("deploy/csi/%s/csidriver.yaml has no %q", fs, strings.TrimSpace(canonical))
	}
	manifest := strings.Replace(string(raw), canonical, "name: "+name+"\n", 1)
	bed.Apply(t, manifest)
	t.Cleanup(func() { bed.Kubectl(t, "delete", "--ignore-not-found", "csidriver", name) })
}

// conformance is what every run of e2e.test shares.
type conformance struct {
	root, e2eTest, set, suites, skip string
	only                             string // appended to the focus: what of the suites runs
}

// run runs e2e.test's External Storage specs against the driver of file
// system fs named driver, defined by test/conformance/<fs> with vars, whose
// log is logPath, its commands placed in mode.
func (c conformance) run(t *testing.T, bed *framework.Bed, fs, driver, logPath string, vars map[string]string, mode mcexec.ExecMode) {
	root, e2eTest, set, suites, skip := c.root, c.e2eTest, c.set, c.suites, c.skip

	// The driver's definition and StorageClass, for this bed.
	dir := t.TempDir()
	vars["CONFORMANCE_DIR"] = dir
	for _, f := range []string{"driver.yaml", "storageclass.yaml"} {
		raw, err := os.ReadFile(filepath.Join(root, "test/conformance", fs, f))
		if err != nil {
			t.Fatal(err)
		}
		expanded := os.Expand(string(raw), func(k string) string {
			v, ok := vars[k]
			if !ok {
				t.Fatalf("test/conformance/%s/%s names ${%s}, which the test does not set", fs, f, k)
			}
			return v
		})
		if err := os.WriteFile(filepath.Join(dir, f), []byte(expanded), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	reportDir := filepath.Join(bed.Env.LogDir, "conformance-"+fs+"-"+string(mode))
	if set != "every-run" {
		reportDir += "-" + set
	}
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range bedSkips {
		skip += "|" + regexp.QuoteMeta(b.spec)
	}
	focus := `External.Storage \[Driver: ` + regexp.QuoteMeta(driver) + `\].* (` + suites + `) ` + c.only
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e2eTest,
		"--kubeconfig="+bed.Env.Kubeconfig, "--provider=skeleton", "--report-dir="+reportDir,
		"--storage.testdriver="+filepath.Join(dir, "driver.yaml"),
		"--ginkgo.focus="+focus, "--ginkgo.skip="+skip,
		"--ginkgo.no-color", "--ginkgo.v", "--ginkgo.timeout=85m")
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+filepath.Join(root, "test/conformance/repo-list.yaml"))
	outPath := filepath.Join(reportDir, "e2e.test.log")
	outFile, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	start := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(start).Round(time.Second)

	res, err := readJUnit(reportDir, driver)
	if err != nil {
		t.Fatalf("e2e.test (%v, %s; output %s): %v", runErr, elapsed, outPath, err)
	}
	t.Logf("External Storage (%s set) of %s through %s in %s: %d passed, %d failed, %d skipped (JUnit and output in %s)",
		set, driver, mode, elapsed, len(res.passed), len(res.failed), res.skippedCount(), reportDir)
	for _, l := range res.skipLines() {
		t.Log("  skipped: " + l)
	}
	for _, f := range res.failed {
		t.Errorf("failed: %s\n%s", f.name, f.message)
	}
	if runErr != nil && len(res.failed) == 0 {
		t.Errorf("e2e.test ended with %v and no failed spec in its report (output %s)", runErr, outPath)
	}
	if len(res.passed) == 0 {
		t.Errorf("no spec of the External Storage suite passed (output %s)", outPath)
	}
	if n := stagedVia(t, logPath, viaOf(t, mode)); n == 0 {
		t.Errorf("the driver's log %s shows no staging mount", logPath)
	} else {
		t.Logf("%d staging mounts, every one in the mount pod via %s", n, viaOf(t, mode))
	}
}

// junitResult is the outcome of the External Storage specs of one driver.
type junitResult struct {
	passed, failed []junitCase
	skipped        map[string][]string // reason -> specs
}

type junitCase struct{ name, message string }

func (r junitResult) skippedCount() int {
	n := 0
	for _, specs := range r.skipped {
		n += len(specs)
	}
	return n
}

// skipLines is one line per skip reason: how many specs, the reason, and
// the first spec.
func (r junitResult) skipLines() []string {
	var lines []string
	for reason, specs := range r.skipped {
		lines = append(lines, fmt.Sprintf("%d × %s (e.g. %s)", len(specs), reason, specs[0]))
	}
	sort.Strings(lines)
	return lines
}

// readJUnit reads the JUnit reports e2e.test wrote into dir, keeping the
// specs of driver.
func readJUnit(dir, driver string) (junitResult, error) {
	type testcase struct {
		Name    string `xml:"name,attr"`
		Status  string `xml:"status,attr"`
		Skipped *struct {
			Message string `xml:"message,attr"`
		} `xml:"skipped"`
		Failure *struct {
			Message string `xml:"message,attr"`
			Text    string `xml:",chardata"`
		} `xml:"failure"`
		Error *struct {
			Message string `xml:"message,attr"`
			Text    string `xml:",chardata"`
		} `xml:"error"`
	}
	type testsuites struct {
		Suites []struct {
			Cases []testcase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	files, err := filepath.Glob(filepath.Join(dir, "junit*.xml"))
	if err != nil || len(files) == 0 {
		return junitResult{}, fmt.Errorf("no JUnit report in %s", dir)
	}
	res := junitResult{skipped: map[string][]string{}}
	marker := "[Driver: " + driver + "]"
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return res, err
		}
		var ts testsuites
		if err := xml.Unmarshal(raw, &ts); err != nil {
			return res, fmt.Errorf("%s: %w", f, err)
		}
		for _, s := range ts.Suites {
			for _, c := range s.Cases {
				if !strings.Contains(c.Name, marker) {
					continue
				}
				switch {
				case c.Failure != nil:
					res.failed = append(res.failed, junitCase{c.Name, firstLines(c.Failure.Message+"\n"+c.Failure.Text, 8)})
				case c.Error != nil:
					res.failed = append(res.failed, junitCase{c.Name, firstLines(c.Error.Message+"\n"+c.Error.Text, 8)})
				case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
					reason := "not selected (focus or skip)"
					for _, b := range bedSkips {
						if strings.Contains(c.Name, b.spec) {
							reason = "not run on the bed: " + b.why
						}
					}
					if c.Skipped != nil && strings.TrimSpace(c.Skipped.Message) != "" && strings.TrimSpace(c.Skipped.Message) != "skipped" {
						reason = firstLines(strings.TrimPrefix(strings.TrimSpace(c.Skipped.Message), "skipped - "), 1)
					}
					res.skipped[reason] = append(res.skipped[reason], c.Name)
				default:
					res.passed = append(res.passed, junitCase{name: c.Name})
				}
			}
		}
	}
	return res, nil
}

// firstLines is s's first n non-empty lines.
func firstLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		keep = append(keep, l)
		if len(keep) == n {
			break
		}
	}
	return strings.Join(keep, "\n")
}
