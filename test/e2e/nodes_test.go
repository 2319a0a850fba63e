//go:build e2e && e2e_nodes

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestNodes runs the glusterfs mount pod of deploy/glusterfs on a bed of three
// nodes (BED_NODES=3, make e2e-nodes) and upgrades it with mountpod-rollout
// while three writers, spread over the nodes, stream numbered, checksummed
// lines into one GlusterFS volume under a lock they share: each rollout moves
// the writers off the node it fences, and afterwards every line verifies and
// no sequence number was written twice.
func TestNodes(t *testing.T) {
	bed := framework.CurrentNodes(t, 3)
	g := setupGlusterfs(t, bed)
	// Three clients of one volume on three nodes: no client-side cache may
	// serve a line count another client has moved past.
	for _, o := range []string{"quick-read", "io-cache", "stat-prefetch", "read-ahead", "write-behind", "readdir-ahead", "open-behind"} {
		bed.MustExec(t, g.ns, "glusterfs-server", "server", "gluster", "volume", "set", glusterVolume, "performance."+o, "off")
	}
	n := &nodesEnv{glusterEnv: g, bin: buildRollout(t), sa: rolloutServiceAccount(t, bed, mountpodNS, "-"+g.ns)}
	t.Cleanup(func() { bed.RemoveTaints(t, rollout.TaintKey, "") })

	t.Run("EachNodeRegistersItsOwnMountPod", n.testRegistrations)

	n.startWriters(t)
	// Each rollout starts from where the one before left the cluster: after
	// a failure the rest would only fail for it.
	for _, st := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"RolloutOneNodeAtATime", func(t *testing.T) { n.testDrainRollout(t, 1) }},
		{"RolloutTwoNodesAtATimeWaitsForTheBudget", func(t *testing.T) { n.testDrainRollout(t, 2) }},
		{"RolloutKilledMidNodeResumes", n.testKilledRollout},
		{"TwoRolloutsAtOnceOneRuns", n.testTwoRollouts},
		{"InPlaceMovesNoWriter", n.testInPlace},
	} {
		if !t.Run(st.name, st.f) {
			t.Fatalf("%s failed: the rollouts after it are not run", st.name)
		}
	}
	// Last: it leaves 500 nodes with no kubelet behind until its cleanup.
	t.Run("PlanAtScale", n.testPlanAtScale)
}

type nodesEnv struct {
	*glusterEnv
	bin  string
	sa   *framework.ServiceAccountKubeconfig
	tags int
}

// mountPods returns the Ready mount pods by node name.
func (n *nodesEnv) mountPods(t *testing.T) map[string]corev1.Pod {
	t.Helper()
	pods := n.bed.WaitPodsBySelector(t, mountpodNS, mountpodSelect, len(n.bed.Env.Nodes), true, 3*time.Minute)
	byNode := map[string]corev1.Pod{}
	for _, p := range pods {
		if _, dup := byNode[p.Spec.NodeName]; dup {
			t.Fatalf("two mount pods on node %s", p.Spec.NodeName)
		}
		byNode[p.Spec.NodeName] = p
	}
	return byNode
}

// testRegistrations: every node runs a mount pod, and each node's
// registration names that node's pod, and no other node's.
func (n *nodesEnv) testRegistrations(t *testing.T) {
	pods := n.mountPods(t)
	uids := map[string]string{}
	for _, node := range n.bed.Env.Nodes {
		p, ok := pods[node.Name]
		if !ok {
			t.Fatalf("no mount pod on node %s (pods on %v)", node.Name, keys(pods))
		}
		uids[string(p.UID)] = node.Name
	}
	for _, node := range n.bed.Env.Nodes {
		reg, ok, err := registration.Read(node.RegistrationDir, glusterPlugin)
		if err != nil || !ok {
			t.Fatalf("node %s: registration in %s: %v (found %v)", node.Name, node.RegistrationDir, err, ok)
		}
		if want := pods[node.Name]; reg.PodUID != string(want.UID) || reg.PodName != want.Name {
			t.Errorf("node %s: registration names pod %s (%s) of node %s, want %s (%s)",
				node.Name, reg.PodName, reg.PodUID, uids[reg.PodUID], want.Name, want.UID)
		}
		if _, err := os.Stat(node.VolumePluginDir + "/mountcontainers.io~glusterfs/glusterfs"); err != nil {
			t.Errorf("node %s: the Flexvolume driver is not installed: %v", node.Name, err)
		}
	}
}

// writersScript appends, under a lock on the volume, a line numbered by the
// lines already there (the format of writerScript, so verifyStream reads
// it) every 100 ms.
const writersScript = `trap 'exit 0' TERM
while :; do
  flock /data/stream.lock sh -c '
    i=$(wc -l < /data/stream 2>/dev/null || echo 0)
    line="$i $(date +%s%N) $HOSTNAME"
    sum=$(printf "%s" "$line" | sha256sum | cut -c1-16)
    printf "%s %s\n" "$line" "$sum" >> /data/stream' || echo "$(date +%s%N) write failed" >> /scratch/errors
  sleep 0.1
done`

// startWriters starts three writers, spread over the nodes by a preferred
// anti-affinity (an evicted one may join another's node), with a
// PodDisruptionBudget that keeps two of them up.
func (n *nodesEnv) startWriters(t *testing.T) {
	t.Helper()
	n.bed.Apply(t, fmt.Sprintf(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: writers
  namespace: %[1]s
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: writers}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: writers
  namespace: %[1]s
spec:
  replicas: 3
  selector:
    matchLabels: {app: writers}
  template:
    metadata:
      labels: {app: writers}
    spec:
      terminationGracePeriodSeconds: 2
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              labelSelector: {matchLabels: {app: writers}}
              topologyKey: kubernetes.io/hostname
      containers:
      - name: main
        image: %[2]s
        imagePullPolicy: Never
        command: ["sh", "-c", %[3]q]
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: scratch, mountPath: /scratch}
      volumes:
      - name: data
        flexVolume:
          driver: %[4]s
          # Three clients of one volume: what one wrote, the next reads.
          options: {server: %[5]q, volume: %[6]s, mountOptions: "direct-io-mode=enable,attribute-timeout=0,entry-timeout=0,negative-timeout=0"}
      - name: scratch
        emptyDir: {}
`, n.ns, n.bed.Env.BaseImage, writersScript, glusterDriver, n.bed.Env.HostName, glusterVolume))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if r := n.bed.RunKubectl(ctx, "", "-n", n.ns, "delete", "deployment", "writers", "--wait", "--timeout=90s"); r.Err != nil {
			t.Logf("delete writers: %v", r.Err)
		}
		_ = framework.Poll(ctx, "writer pods gone", 250*time.Millisecond, 90*time.Second,
			func(ctx context.Context) (bool, string, error) {
				pods, err := n.bed.Client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writers"})
				if err != nil {
					return false, err.Error(), nil
				}
				return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
			})
	})
	ws := n.writers(t)
	on := map[string]bool{}
	for _, w := range ws {
		on[w.Spec.NodeName] = true
	}
	if len(on) != 3 {
		t.Fatalf("writers on %v, want one on each of the three nodes", keys(on))
	}
	n.waitLines(t, 30)
}

// writers waits for the three writers to run and returns them.
func (n *nodesEnv) writers(t *testing.T) []corev1.Pod {
	t.Helper()
	return n.bed.WaitPodsBySelector(t, n.ns, "app=writers", 3, true, 3*time.Minute)
}

// stream verifies the stream on the brick (what the storage holds) and
// returns its lines and how many each writer wrote.
func (n *nodesEnv) stream(t *testing.T) (int, map[string]int) {
	t.Helper()
	out := n.bed.MustExec(t, n.ns, "glusterfs-server", "server", "cat", n.brick+"/stream")
	return verifyStream(t, []byte(out))
}

func (n *nodesEnv) waitLines(t *testing.T, want int) {
	t.Helper()
	err := framework.Poll(context.Background(), fmt.Sprintf("%d lines on the brick", want), 250*time.Millisecond, 2*time.Minute,
		func(context.Context) (bool, string, error) {
			got, _ := n.stream(t)
			return got >= want, fmt.Sprintf("%d lines", got), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// newImage tags the mount-pod image anew on every node and sets it in the
// DaemonSet (which replaces nothing: OnDelete).
func (n *nodesEnv) newImage(t *testing.T) string {
	t.Helper()
	n.tags++
	tag := tagMountpodImage(t, n.bed, fmt.Sprintf("nodes-%d", n.tags))
	n.bed.Kubectl(t, "-n", mountpodNS, "set", "image", "ds/glusterfs-mountpod", "mount="+tag)
	return tag
}

// rolloutRun is one mountpod-rollout process.
type rolloutRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	start          time.Time
	err            error
	took           time.Duration
}

func (n *nodesEnv) startRollout(t *testing.T, args ...string) *rolloutRun {
	t.Helper()
	r := &rolloutRun{}
	// A short lock: --resume after a kill takes the dead rollout's over once
	// it has gone unrenewed that long.
	all := append([]string{"-n", mountpodNS, "-o", "json", "--poll-interval", "500ms", "--evict-retry-delay", "2s", "--lock-lease", "15s",
		"--drain-timeout", "4m", "--unmount-timeout", "2m", "--ready-timeout", "2m", "--delete-emptydir-data"}, args...)
	// On this bed every mount pod sees every node's tree (one hostPath
	// serves them all), so its mount table holds the other nodes' mounts
	// too, which a node's own table never does: the mount table the
	// rollout reads is the node's own part of it, the lines under the
	// pod's kubelet directory (the parent of its registration directory).
	all = append(all, "--mounts-command", "sh", "--mounts-command", "-c",
		"--mounts-command", `grep -F " ${MOUNTPOD_REGISTRATION_DIR%/*}/" /proc/self/mountinfo || true`)
	r.cmd = exec.Command(n.bin, append(all, "glusterfs-mountpod")...)
	r.cmd.Env = append(os.Environ(), "KUBECONFIG="+n.sa.Path)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start mountpod-rollout: %v", err)
	}
	return r
}

// wait waits for the rollout (at most 10 minutes) and logs its output.
func (r *rolloutRun) wait(t *testing.T) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case r.err = <-done:
	case <-time.After(10 * time.Minute):
		_ = r.cmd.Process.Kill()
		r.err = fmt.Errorf("still running after 10 minutes: killed; %v", <-done)
	}
	r.took = time.Since(r.start)
	t.Logf("mountpod-rollout %v: %v after %s\nstderr:\n%s", r.cmd.Args[1:], r.err, r.took.Round(time.Millisecond), r.stderr.String())
	return r.err
}

// events decodes the rollout's JSON progress.
func (r *rolloutRun) events(t *testing.T) []rollout.Event {
	t.Helper()
	var evs []rollout.Event
	sc := bufio.NewScanner(bytes.NewReader(r.stdout.Bytes()))
	for sc.Scan() {
		var ev rollout.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("progress line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// nodeTimes returns the seconds each node took, as the rollout reports
// them, and logs how long each of its steps took.
func (r *rolloutRun) nodeTimes(t *testing.T) map[string]float64 {
	t.Helper()
	times := map[string]float64{}
	steps := map[string][]string{}
	for _, ev := range r.events(t) {
		if ev.Node != "" && ev.NodeSeconds > times[ev.Node] {
			times[ev.Node] = ev.NodeSeconds
		}
		if ev.Node != "" && ev.Step != "" && (ev.Status == rollout.StatusDone || ev.Status == rollout.StatusFailed) {
			steps[ev.Node] = append(steps[ev.Node], fmt.Sprintf("%s %.1fs", ev.Step, ev.StepSeconds))
		}
	}
	for _, node := range keys(steps) {
		t.Logf("  %s: %s", node, strings.Join(steps[node], ", "))
	}
	return times
}

// taintWatch samples the nodes every 100 ms while a rollout runs: how many
// are fenced at once, how many writers are up, and, whenever a node's fence
// goes, whether that node's mount pod runs the target image and is Ready.
type taintWatch struct {
	mu          sync.Mutex
	maxFenced   int
	minWriters  int
	fencedOnce  map[string]bool
	fenced      map[string]bool
	violations  []string
	samples     int
	stop        context.CancelFunc
	done        chan struct{}
	image       string
	writersWant bool
}

func (n *nodesEnv) watchTaints(image string, countWriters bool) *taintWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &taintWatch{minWriters: 3, fencedOnce: map[string]bool{}, fenced: map[string]bool{}, stop: cancel,
		done: make(chan struct{}), image: image, writersWant: countWriters}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			w.sample(ctx, n)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *taintWatch) sample(ctx context.Context, n *nodesEnv) {
	nodes, err := n.bed.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	var writers int
	if w.writersWant {
		pods, err := n.bed.Client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=writers"})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				writers++
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	fenced := 0
	for _, node := range nodes.Items {
		on := false
		for _, tn := range node.Spec.Taints {
			on = on || tn.Key == rollout.TaintKey
		}
		if on {
			fenced++
			w.fencedOnce[node.Name] = true
		} else if w.fenced[node.Name] {
			// The fence just went: the node's new mount pod must be Ready.
			pods, err := n.bed.Client.CoreV1().Pods(mountpodNS).List(ctx, metav1.ListOptions{LabelSelector: mountpodSelect,
				FieldSelector: "spec.nodeName=" + node.Name})
			ok := false
			for _, p := range pods.Items {
				ok = ok || p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == w.image && podReady(&p)
			}
			if err == nil && !ok {
				w.violations = append(w.violations, fmt.Sprintf("node %s was opened with no Ready mount pod of %s", node.Name, w.image))
			}
		}
		w.fenced[node.Name] = on
	}
	w.maxFenced = max(w.maxFenced, fenced)
	if w.writersWant {
		w.minWriters = min(w.minWriters, writers)
	}
}

func (w *taintWatch) finish(t *testing.T) {
	t.Helper()
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("sampled %d times: at most %d node(s) fenced at once, nodes fenced %v, at least %d writer(s) up",
		w.samples, w.maxFenced, keys(w.fencedOnce), w.minWriters)
	for _, v := range w.violations {
		t.Error(v)
	}
}

// checkUpgraded: every node runs a Ready mount pod of image that is not
// one of before, and no node is fenced.
func (n *nodesEnv) checkUpgraded(t *testing.T, image string, before map[string]corev1.Pod) map[string]corev1.Pod {
	t.Helper()
	after := n.mountPods(t)
	for _, node := range n.bed.Env.Nodes {
		p := after[node.Name]
		if p.Spec.Containers[0].Image != image || p.UID == before[node.Name].UID {
			t.Errorf("node %s: mount pod %s of %s, want a new one of %s", node.Name, p.Name, p.Spec.Containers[0].Image, image)
		}
		reg, ok, err := registration.Read(node.RegistrationDir, glusterPlugin)
		if err != nil || !ok || reg.PodUID != string(p.UID) {
			t.Errorf("node %s: registration %+v (%v, %v) does not name its new mount pod %s", node.Name, reg, ok, err, p.UID)
		}
	}
	if taints := n.fencedNodes(t); len(taints) > 0 {
		t.Errorf("nodes still fenced: %v", taints)
	}
	return after
}

func (n *nodesEnv) fencedNodes(t *testing.T) []string {
	t.Helper()
	nodes, err := n.bed.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, node := range nodes.Items {
		for _, tn := range node.Spec.Taints {
			if tn.Key == rollout.TaintKey {
				out = append(out, node.Name)
			}
		}
	}
	return out
}

// checkStream: the stream grew past before+30 lines after the rollout, every
// line verifies (none lost or written twice), and the writers logged no
// failed write.
func (n *nodesEnv) checkStream(t *testing.T, before int) {
	t.Helper()
	n.waitLines(t, before+30)
	lines, by := n.stream(t)
	t.Logf("brick stream: %d lines verified (%d before the rollout), %d writers so far", lines, before, len(by))
	for _, w := range n.writers(t) {
		out, _, err := n.bed.Exec(context.Background(), 30*time.Second, n.ns, w.Name, "main", "sh", "-c", "cat /scratch/errors 2>/dev/null || true")
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("writer %s: failed writes %q (%v)", w.Name, out, err)
		}
	}
}

// testDrainRollout upgrades every node, maxUnavailable at a time, draining
// each: every writer is evicted once and comes back on a node not fenced;
// the PodDisruptionBudget keeps two writers up throughout.
func (n *nodesEnv) testDrainRollout(t *testing.T, maxUnavailable int) {
	before := n.mountPods(t)
	oldWriters := uids(n.writers(t))
	image := n.newImage(t)
	lines, _ := n.stream(t)
	watch := n.watchTaints(image, true)
	r := n.startRollout(t, "--max-unavailable", fmt.Sprint(maxUnavailable))
	err := r.wait(t)
	watch.finish(t)
	if err != nil {
		t.Fatalf("mountpod-rollout: %v", err)
	}
	times := r.nodeTimes(t)
	t.Logf("--max-unavailable %d: %s in all; per node (s): %v", maxUnavailable, r.took.Round(time.Millisecond), times)
	if len(times) != 3 {
		t.Errorf("the rollout reported %d node(s): %v", len(times), times)
	}
	if watch.maxFenced > maxUnavailable || watch.maxFenced == 0 {
		t.Errorf("%d node(s) fenced at once, want at most --max-unavailable %d (and some)", watch.maxFenced, maxUnavailable)
	}
	if watch.minWriters < 2 {
		t.Errorf("only %d writer(s) up at one moment: the budget keeps two", watch.minWriters)
	}
	if maxUnavailable > 1 {
		// Two nodes fenced with three writers: the budget must have made the
		// rollout wait for an evicted writer to come back before the next.
		if watch.maxFenced < 2 {
			t.Errorf("never two nodes fenced at once with --max-unavailable %d", maxUnavailable)
		}
		refused := 0
		for _, ev := range r.events(t) {
			if strings.HasPrefix(ev.Message, "eviction refused, retrying: ") {
				refused++
			}
		}
		t.Logf("evictions refused by the budget and retried: %d", refused)
		if refused == 0 {
			t.Error("no eviction was refused: the budget never held the second node's writer")
		}
	}
	n.checkUpgraded(t, image, before)
	for _, w := range n.writers(t) {
		if oldWriters[string(w.UID)] {
			t.Errorf("writer %s on %s was never evicted", w.Name, w.Spec.NodeName)
		}
	}
	n.checkStream(t, lines)
}

// testKilledRollout kills the rollout with SIGKILL while it works on its
// second node; the node stays fenced; --resume finishes, and no node is
// opened before its new mount pod is Ready.
func (n *nodesEnv) testKilledRollout(t *testing.T) {
	before := n.mountPods(t)
	image := n.newImage(t)
	lines, _ := n.stream(t)
	watch := n.watchTaints(image, true)
	r := n.startRollout(t)
	// Kill it once a second node has been fenced.
	var killedOn string
	err := framework.Poll(context.Background(), "the rollout on its second node", 100*time.Millisecond, 5*time.Minute,
		func(context.Context) (bool, string, error) {
			watch.mu.Lock()
			defer watch.mu.Unlock()
			if len(watch.fencedOnce) < 2 {
				return false, fmt.Sprintf("nodes fenced so far: %v", keys(watch.fencedOnce)), nil
			}
			for node, on := range watch.fenced {
				if on {
					killedOn = node
				}
			}
			return killedOn != "", "", nil
		})
	if err != nil {
		_ = r.cmd.Process.Kill()
		_ = r.wait(t)
		watch.finish(t)
		t.Fatal(err)
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(t); err == nil {
		t.Fatal("the rollout finished before it could be killed")
	}
	t.Logf("killed the rollout on node %s", killedOn)
	if fenced := n.fencedNodes(t); len(fenced) != 1 || fenced[0] != killedOn {
		t.Errorf("after the kill, fenced %v, want %s alone", fenced, killedOn)
	}
	resumed := n.startRollout(t, "--resume")
	err = resumed.wait(t)
	watch.finish(t)
	if err != nil {
		t.Fatalf("mountpod-rollout --resume: %v", err)
	}
	t.Logf("resumed: %s; per node (s): %v", resumed.took.Round(time.Millisecond), resumed.nodeTimes(t))
	if watch.maxFenced > 1 {
		t.Errorf("%d nodes fenced at once, want one", watch.maxFenced)
	}
	n.checkUpgraded(t, image, before)
	n.checkStream(t, lines)
}

// testTwoRollouts starts two rollouts at once: one takes the lock and
// finishes, the other is refused and never acts (it fences nothing, evicts
// nothing, deletes no mount pod).
func (n *nodesEnv) testTwoRollouts(t *testing.T) {
	before := n.mountPods(t)
	image := n.newImage(t)
	lines, _ := n.stream(t)
	a, b := n.startRollout(t), n.startRollout(t)
	errA, errB := a.wait(t), b.wait(t)
	if (errA == nil) == (errB == nil) {
		t.Fatalf("rollouts ended with %v and %v: want one done and one refused", errA, errB)
	}
	refused := b
	if errA != nil {
		refused = a
	}
	if ee, ok := refused.err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Errorf("the refused rollout: %v", refused.err)
	}
	if said := refused.stdout.String() + refused.stderr.String(); !strings.Contains(said, "another rollout") {
		t.Errorf("the refused rollout does not say another one runs:\n%s", said)
	}
	for _, ev := range refused.events(t) {
		if ev.Node != "" && ev.Status != rollout.StatusInfo {
			t.Errorf("the refused rollout acted on node %s: %+v", ev.Node, ev)
		}
	}
	n.checkUpgraded(t, image, before)
	n.checkStream(t, lines)
}

// testInPlace replaces every node's mount pod under its live, scoped mounts:
// no taint, no eviction, no writer restarted or failing a write.
func (n *nodesEnv) testInPlace(t *testing.T) {
	before := n.mountPods(t)
	ws := n.writers(t)
	image := n.newImage(t)
	lines, _ := n.stream(t)
	watch := n.watchTaints(image, true)
	r := n.startRollout(t, "--strategy", "in-place", "--unscoped", "refuse")
	err := r.wait(t)
	watch.finish(t)
	if err != nil {
		t.Fatalf("mountpod-rollout --strategy in-place: %v", err)
	}
	t.Logf("in place: %s in all; per node (s): %v", r.took.Round(time.Millisecond), r.nodeTimes(t))
	if watch.maxFenced != 0 {
		t.Errorf("%d node(s) fenced during an in-place rollout", watch.maxFenced)
	}
	if watch.minWriters < 3 {
		t.Errorf("only %d writer(s) up at one moment of an in-place rollout", watch.minWriters)
	}
	n.checkUpgraded(t, image, before)
	after := n.writers(t)
	if got, want := uids(after), uids(ws); !sameKeys(got, want) {
		t.Errorf("writers %v after the in-place rollout, were %v: none may move", keys(got), keys(want))
	}
	for _, w := range after {
		for _, cs := range w.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("writer %s restarted %d time(s)", w.Name, cs.RestartCount)
			}
		}
	}
	n.checkStream(t, lines)
}

func uids(pods []corev1.Pod) map[string]bool {
	m := map[string]bool{}
	for _, p := range pods {
		m[string(p.UID)] = true
	}
	return m
}

func sameKeys(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
