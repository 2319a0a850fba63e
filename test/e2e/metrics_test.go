//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// metricsPort is the glusterfs mount pod's metrics port (deploy/base's
// default; deploy/rbd uses 9642).
const metricsPort = "9641"

// TestMetrics scrapes the glusterfs mount pod of deploy/glusterfs at the
// node's address (the pod is on the node's network) from this process,
// before and after a workload mounts a GlusterFS volume through it over
// the exec socket: the plugin's registration gauge is 1, the exec counter
// of the mount tool went up (and its histogram, and nothing stays in
// flight), the live mount is counted, no argument of any command shows,
// and the Prometheus project's own linter (promlint, what `promtool check
// metrics` runs) parses the text and finds no problem.
func TestMetrics(t *testing.T) {
	bed := framework.Current(t)
	g := setupGlusterfs(t, bed)
	base := "http://" + net.JoinHostPort(bed.Env.NodeIP, metricsPort)

	var before string
	if err := framework.Poll(context.Background(), "metrics at "+base, 200*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			text, err := get(base + "/metrics")
			before = text
			return err == nil, fmt.Sprint(err), nil
		}); err != nil {
		t.Fatal(err)
	}
	if h, err := get(base + "/healthz"); err != nil || h != "ok\n" {
		t.Fatalf("GET /healthz = %q, %v", h, err)
	}
	registered := sampleOf{"mountcontainers_registration_state", map[string]string{"plugin": glusterPlugin, "state": "registered"}}
	if v := registered.value(t, before); v != 1 {
		t.Fatalf("%s = %v, want 1", registered, v)
	}
	mounts := sampleOf{"mountcontainers_exec_commands_total", map[string]string{"plugin": glusterPlugin, "tool": "mount", "result": "ok"}}
	mountDurations := sampleOf{"mountcontainers_exec_duration_seconds_count", map[string]string{"plugin": glusterPlugin, "tool": "mount"}}
	mountsBefore, durationsBefore := mounts.valueOr(before, 0), mountDurations.valueOr(before, 0)
	build := sampleOf{"mountcontainers_build_info", nil}
	if v := build.value(t, before); v != 1 {
		t.Fatalf("%s = %v, want 1", build, v)
	}

	mp := g.mountPod(t)
	mountCtr := bed.RunningContainerID(t, mp.UID, "mount", 30*time.Second)
	driverLog := g.setDriverMode(t, mcexec.ModeSocket)
	p := g.workload(t, "metrics")
	dir := g.volumeDir(p)
	if fs := hostMount(t, dir); fs != "fuse.glusterfs" {
		t.Fatalf("host mount table: %s is %q, want fuse.glusterfs", dir, fs)
	}
	live := sampleOf{"mountcontainers_live_mounts", map[string]string{"plugin": glusterPlugin}}
	var after string
	// The live-mount gauge moves at the keeper's next survey (every 10 s).
	if err := framework.Poll(context.Background(), "metrics after the mount", time.Second, time.Minute,
		func(context.Context) (bool, string, error) {
			text, err := get(base + "/metrics")
			if err != nil {
				return false, err.Error(), nil
			}
			after = text
			n := live.valueOr(text, 0)
			// The node's mount of the volume and the pod's bind of it
			// (the driver's default, shared mounts).
			return n >= 2, fmt.Sprintf("%s = %v", live, n), nil
		}); err != nil {
		t.Fatal(err)
	}
	// The bind is served by the node's mount's daemon, in its scope.
	unscoped := sampleOf{"mountcontainers_live_mounts_unscoped", map[string]string{"plugin": glusterPlugin}}
	if v := unscoped.valueOr(after, 0); v != 0 {
		t.Errorf("%s = %v after the mount, want 0", unscoped, v)
	}
	if v := mounts.valueOr(after, 0); v < mountsBefore+1 {
		t.Errorf("%s went from %v to %v, want at least one more", mounts, mountsBefore, v)
	}
	if v := mountDurations.valueOr(after, 0); v < durationsBefore+1 {
		t.Errorf("%s went from %v to %v, want at least one more", mountDurations, durationsBefore, v)
	}
	inFlight := sampleOf{"mountcontainers_exec_in_flight_commands", map[string]string{"plugin": glusterPlugin}}
	if v := inFlight.value(t, after); v != 0 {
		t.Errorf("%s = %v after the mount, want 0", inFlight, v)
	}
	if v := registered.value(t, after); v != 1 {
		t.Errorf("%s = %v after the mount, want 1", registered, v)
	}
	// The mount's arguments (its server, volume, target) never show.
	for _, arg := range []string{bed.Env.NodeName + ":", glusterVolume, dir, "log-level"} {
		if strings.Contains(after, arg) {
			t.Errorf("the scrape shows %q, an argument of the mount", arg)
		}
	}
	t.Logf("after the workload's mount: %s %v -> %v, %s %v, %s %v",
		mounts, mountsBefore, mounts.valueOr(after, 0), live, live.valueOr(after, 0), registered, registered.valueOr(after, 0))

	problems, err := promlint.New(strings.NewReader(after)).Lint()
	if err != nil {
		t.Fatalf("promlint cannot parse the scrape: %v\nscraped:\n%s", err, after)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if len(problems) > 0 {
		t.Logf("scraped:\n%s", after)
	}
	t.Logf("promlint: %d metric families, no problem", strings.Count(after, "# TYPE "))

	// The workload goes before the mount pod does (its cleanup), so that
	// its volume is unmounted while the pod serves.
	if err := bed.Client.CoreV1().Pods(g.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bed.WaitPodGone(t, g.ns, p.Name, p.UID, 2*time.Minute)
	if err := framework.Poll(context.Background(), "unmount of "+dir, 200*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			fs := hostMount(t, dir)
			return fs == "", fmt.Sprintf("mount %q", fs), nil
		}); err != nil {
		t.Fatal(err)
	}
	// The counters above are the exec service's: the driver's log says the
	// mount took the socket, in the mount container (and the unmount was
	// umount2 on the node).
	checkDriverLog(t, driverLog, dir, mountCtr, mcexec.ViaSocket)
}

// get returns the body of a GET of url, which must answer 200.
func get(url string) (string, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), nil
}

// sampleOf names a series of the text exposition format: a metric name and
// some of its labels.
type sampleOf struct {
	name   string
	labels map[string]string
}

func (s sampleOf) String() string {
	var l []string
	for k, v := range s.labels {
		l = append(l, fmt.Sprintf("%s=%q", k, v))
	}
	return s.name + "{" + strings.Join(l, ",") + "}"
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// lookup returns the value of the first line of text that is s.
func (s sampleOf) lookup(text string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, s.name+"{") && !strings.HasPrefix(line, s.name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series, value := line[:i], line[i+1:]
		have := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(series, -1) {
			have[m[1]] = m[2]
		}
		match := true
		for k, v := range s.labels {
			match = match && have[k] == v
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		return f, err == nil
	}
	return 0, false
}

func (s sampleOf) value(t *testing.T, text string) float64 {
	t.Helper()
	v, ok := s.lookup(text)
	if !ok {
		t.Fatalf("no %s in the scrape:\n%s", s, text)
	}
	return v
}

func (s sampleOf) valueOr(text string, def float64) float64 {
	if v, ok := s.lookup(text); ok {
		return v
	}
	return def
}
