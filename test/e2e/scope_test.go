//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	"github.com/mountcontainers/mountcontainers/internal/offnode/rollout"
	"github.com/mountcontainers/mountcontainers/internal/pod/livemount"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestScopes proves that a live GlusterFS mount does not depend on the life
// of the mount pod that made it: the glusterfs mount pod of deploy/glusterfs
// (hostPID, scopes on) mounts a workload's volume (the node's mount of it,
// which the pod's directory binds: the driver's default); its FUSE daemon
// runs in a scope of its own, outside the mount pod's cgroup and in the
// host's PID namespace. Then the mount pod is ended in every way a node ends it (its
// daemon killed, the pod deleted, the container OOM-killed, an upgrade with
// mountpod-rollout --strategy in-place, which never fences the node) while the
// workload writes a numbered, checksummed, fsynced line every 100 ms: the
// workload sees no I/O error, is never restarted, and every line verifies on
// the brick. Deleting the workload then unmounts the volume through the new
// mount pod, and the daemon and its scope go away.
//
// The workload's mount runs through the driver's default path (the exec
// socket); that a mount gets its scope through each path, cri and socket,
// is asserted per mode in TestGlusterfs/WorkloadMountsThroughMountPod.
// `mountpod status` here is read through pods/exec, as an operator would.
func TestScopes(t *testing.T) {
	bed := framework.Current(t)
	parent := bed.Env.Vars["BED_SCOPE_PARENT"]
	if parent == "" {
		t.Fatal("the bed's env file has no BED_SCOPE_PARENT: an older up.sh")
	}
	g := setupGlusterfs(t, bed)
	w := g.startStreamWriter(t, "scoped-writer")
	dir := g.volumeDir(w.pod)
	w.waitLines(t, 20)

	// The pod's directory binds the node's mount of the volume (the
	// driver's default), whose daemon is in the node's mount's scope; the
	// pod's bind is reported with it (assertAdopted).
	served := servedAt(t, dir)
	daemon := g.scopedDaemon(t, served, parent)
	t.Logf("FUSE daemon of %s (%s): pid %d, cgroups %v", dir, served, daemon, procCgroups(t, daemon))
	unit := assertScopeUnit(t, bed.Env, "kubernetes.io/glusterfs", served, daemon)
	shimBin := buildShim(t)

	disrupt := func(name string, end func(t *testing.T, mp corev1.Pod)) {
		t.Run(name, func(t *testing.T) {
			mp := g.mountPod(t)
			before := w.lines(t)
			start := time.Now()
			end(t, mp)
			// A new container (or pod) registered: the mount pod is back.
			g.waitRegisteredAfter(t, mp)
			t.Logf("mount pod back in %s", time.Since(start).Round(time.Millisecond))
			w.waitLines(t, before+30)
			if !processAlive(daemon) {
				t.Fatalf("the FUSE daemon (pid %d) died with the mount pod", daemon)
			}
			w.assertHealthy(t)
			if u := assertScopeUnit(t, bed.Env, "kubernetes.io/glusterfs", served, daemon); u != unit {
				t.Errorf("the daemon's scope unit is %s, was %s", u, unit)
			}
			g.assertAdopted(t, dir, daemon)
			g.assertShimLists(t, shimBin, dir, daemon)
			t.Logf("longest write stall around %s: %s", name, w.longestStall(t, before))
		})
	}

	disrupt("KillMountpod", func(t *testing.T, mp corev1.Pod) {
		pid := podProcess(t, mp.UID, "mountpod", "serve")
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		t.Logf("killed mountpod (pid %d) of %s", pid, mp.Name)
	})
	disrupt("DeleteMountPod", func(t *testing.T, mp corev1.Pod) {
		// The replacement gets a memory limit, for the OOM case next.
		bed.Kubectl(t, "-n", mountpodNS, "patch", "ds", "glusterfs-mountpod", "--type=json", "-p",
			`[{"op":"add","path":"/spec/template/spec/containers/0/resources/limits","value":{"memory":"96Mi"}}]`)
		if err := bed.Client.CoreV1().Pods(mp.Namespace).Delete(context.Background(), mp.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bed.WaitPodGone(t, mp.Namespace, mp.Name, mp.UID, 2*time.Minute)
	})
	disrupt("OOMKillMountContainer", func(t *testing.T, mp corev1.Pod) {
		if l := mp.Spec.Containers[0].Resources.Limits.Memory(); l.IsZero() {
			t.Fatalf("mount pod %s has no memory limit", mp.Name)
		}
		// mountpod is made the OOM killer's first choice (raising a score
		// needs no privilege), then a process in its container eats memory
		// until the container's limit is hit.
		pid := podProcess(t, mp.UID, "mountpod", "serve")
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte("1000"), 0); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_, _, _ = bed.Exec(ctx, 60*time.Second, mp.Namespace, mp.Name, "mount", "sh", "-c", "tail /dev/zero")
		err := framework.Poll(context.Background(), "the mount container OOM-killed", 250*time.Millisecond, time.Minute,
			func(ctx context.Context) (bool, string, error) {
				p, err := bed.Client.CoreV1().Pods(mp.Namespace).Get(ctx, mp.Name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				for _, cs := range p.Status.ContainerStatuses {
					if cs.LastTerminationState.Terminated != nil {
						r := cs.LastTerminationState.Terminated.Reason
						return true, r, nil
					}
				}
				return false, "no termination yet", nil
			})
		if err != nil {
			t.Fatal(err)
		}
		p, err := bed.Client.CoreV1().Pods(mp.Namespace).Get(context.Background(), mp.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		term := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
		t.Logf("mount container of %s ended: %s (exit %d)", mp.Name, term.Reason, term.ExitCode)
		if term.Reason != "OOMKilled" {
			t.Errorf("the mount container ended with %q, want OOMKilled", term.Reason)
		}
	})

	rolloutBin := buildRollout(t)
	rolloutSA := rolloutServiceAccount(t, bed, mountpodNS, "-"+g.ns)
	newTag := tagMountpodImage(t, bed, "inplace-"+g.ns)
	t.Cleanup(func() { bed.RemoveTaints(t, rollout.TaintKey, "") })
	disrupt("InPlaceUpgrade", func(t *testing.T, mp corev1.Pod) {
		bed.Kubectl(t, "-n", mountpodNS, "set", "image", "ds/glusterfs-mountpod", "mount="+newTag)
		// Sample the node's taints while the rollout runs: in place means
		// never fenced.
		ctx, cancel := context.WithCancel(context.Background())
		tainted := make(chan string, 1)
		go func() {
			defer close(tainted)
			for ctx.Err() == nil {
				n, err := bed.Client.CoreV1().Nodes().Get(ctx, bed.Env.NodeName, metav1.GetOptions{})
				if err == nil {
					for _, taint := range n.Spec.Taints {
						if taint.Key == rollout.TaintKey {
							tainted <- taint.String()
							return
						}
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		rctx, rcancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer rcancel()
		cmd := exec.CommandContext(rctx, rolloutBin, "-n", mountpodNS, "--strategy", "in-place", "--unscoped", "refuse",
			"--poll-interval", "500ms", "--ready-timeout", "2m", "glusterfs-mountpod")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+rolloutSA.Path)
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("mountpod-rollout --strategy in-place: %v\n%s", err, out)
		if err != nil {
			t.Fatalf("mountpod-rollout: %v", err)
		}
		if taint, ok := <-tainted; ok {
			t.Errorf("the node was tainted during an in-place rollout: %s", taint)
		}
		if !strings.Contains(string(out), "verify-mounts") {
			t.Errorf("the rollout's output does not show the mounts verified through the new pod")
		}
		nmp := g.mountPod(t)
		if nmp.UID == mp.UID || nmp.Spec.Containers[0].Image != newTag {
			t.Errorf("mount pod %s (image %s) after the rollout, was %s", nmp.Name, nmp.Spec.Containers[0].Image, mp.Name)
		}
	})

	t.Run("WorkloadDeletedLeavesNothing", func(t *testing.T) {
		n, writers := w.verify(t)
		t.Logf("brick stream: %d lines verified, writers %v", n, writers)
		w.delete(t)
		if err := framework.Poll(context.Background(), "volume unmounted, daemon and scope gone", 250*time.Millisecond, time.Minute,
			func(context.Context) (bool, string, error) {
				switch {
				case hostMount(t, dir) != "" || hostMount(t, served) != "":
					return false, "still mounted", nil
				case processAlive(daemon):
					return false, fmt.Sprintf("daemon %d alive", daemon), nil
				}
				left := append(scopeDirs(t, parent), nodeScopeUnits(t, bed.Env)...)
				return len(left) == 0, fmt.Sprintf("scopes left: %v", left), nil
			}); err != nil {
			t.Fatal(err)
		}
	})

	// The negative control: with scopes off, the same kill breaks the mount,
	// so the proof above can fail.
	t.Run("NegativeControlScopesOff", func(t *testing.T) {
		mp := g.mountPod(t)
		bed.Kubectl(t, "-n", mountpodNS, "set", "env", "ds/glusterfs-mountpod", "MOUNTPOD_SCOPES=false")
		if err := bed.Client.CoreV1().Pods(mp.Namespace).Delete(context.Background(), mp.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bed.WaitPodGone(t, mp.Namespace, mp.Name, mp.UID, 2*time.Minute)
		g.waitRegisteredAfter(t, mp)
		mp = g.mountPod(t)

		p := g.workload(t, "unscoped")
		pdir := g.volumeDir(p)
		pids := fuseProcesses(t, servedAt(t, pdir))
		if len(pids) != 1 {
			t.Fatalf("%d glusterfs processes serve %s, want 1", len(pids), servedAt(t, pdir))
		}
		if cg := procCgroups(t, pids[0]); !inPodCgroup(cg["memory"], string(mp.UID)) {
			t.Fatalf("with scopes off the daemon should be in the mount pod's cgroup; it is in %v", cg)
		}
		bed.MustExec(t, g.ns, p.Name, "main", "sh", "-c", "echo before > /data/unscoped.txt && sync")
		pid := podProcess(t, mp.UID, "mountpod", "serve")
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := framework.Poll(context.Background(), "the workload to see the broken mount", 250*time.Millisecond, 60*time.Second,
			func(ctx context.Context) (bool, string, error) {
				_, se, err := bed.Exec(ctx, 20*time.Second, g.ns, p.Name, "main", "cat", "/data/unscoped.txt")
				return err != nil && strings.Contains(se, "Transport endpoint is not connected"), se, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("scopes off: killing mountpod of %s broke the workload's mount, as expected", mp.Name)
		g.waitRegisteredAfter(t, mp)
		if err := bed.Client.CoreV1().Pods(g.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bed.WaitPodGone(t, g.ns, p.Name, p.UID, 2*time.Minute)
		if err := framework.Poll(context.Background(), "dead mount removed", 250*time.Millisecond, time.Minute,
			func(context.Context) (bool, string, error) {
				fs := hostMount(t, pdir)
				return fs == "", fs, nil
			}); err != nil {
			t.Fatal(err)
		}
	})
}

// assertAdopted fails unless the current mount pod's `mountpod status`
// lists the mount at dir as scoped and healthy, served by daemon.
func (g *glusterEnv) assertAdopted(t *testing.T, dir string, daemon int) {
	t.Helper()
	daemon = nodePID(t, daemon) // the mount pod's PIDs are the node's
	mp := g.mountPod(t)
	status := g.bed.MustExec(t, mp.Namespace, mp.Name, "mount", "mountpod", "status", "-o", "json")
	var r livemount.Report
	if err := json.Unmarshal([]byte(status), &r); err != nil {
		t.Fatalf("mountpod status: %v\n%s", err, status)
	}
	for _, m := range r.Mounts {
		if m.Target == dir {
			if !m.Scoped || !m.Healthy || !slices.Contains(m.Daemons, daemon) {
				t.Errorf("%s reports the workload's mount as %+v; want scoped, healthy, daemon %d", mp.Name, m, daemon)
			}
			return
		}
	}
	t.Errorf("the status of %s does not list %s:\n%s", mp.Name, dir, status)
}

// assertShimLists fails unless `kubelet-exec-shim status -o json` on the
// host lists the mount at dir, served by daemon, under the glusterfs
// plugin's live registration, asking the mount pod through each path.
func (g *glusterEnv) assertShimLists(t *testing.T, bin, dir string, daemon int) {
	t.Helper()
	daemon = nodePID(t, daemon) // the shim runs on the node
	const plugin = "kubernetes.io/glusterfs"
	for _, mode := range execModes {
		env := []string{
			"CONTAINER_RUNTIME_ENDPOINT=" + g.bed.Env.CRIEndpoint,
			shim.EnvRegistrationDir + "=" + g.bed.Env.RegistrationDir,
			shim.EnvExecMode + "=" + string(mode),
		}
		r := runShim(t, env, bin, "status", "--plugin", plugin, "-o", "json")
		var sts []shim.Status
		if err := json.Unmarshal([]byte(r.stdout), &sts); err != nil || r.code != 0 || len(sts) != 1 {
			t.Fatalf("%s: kubelet-exec-shim status: code %d, %v: %q %q", mode, r.code, err, r.stdout, r.stderr)
		}
		st := sts[0]
		if !st.Live || st.Via != string(viaOf(t, mode)) || st.MountsError != "" {
			t.Errorf("%s: kubelet-exec-shim status of %s = %+v; want live via %s, with its mounts", mode, plugin, st, viaOf(t, mode))
			continue
		}
		i := slices.IndexFunc(st.Mounts, func(m shim.Mount) bool { return m.Target == dir })
		if i < 0 || !st.Mounts[i].Scoped || !st.Mounts[i].Healthy || !slices.Contains(st.Mounts[i].Daemons, daemon) {
			t.Errorf("%s: kubelet-exec-shim status lists %+v; want %s scoped, healthy, daemon %d", mode, st.Mounts, dir, daemon)
		}
	}
}

// scopedDaemon returns the PID of the one glusterfs FUSE daemon serving dir
// after checking that it runs outside every cgroup of the mount pod, in a
// scope under parent, and in the host's PID namespace.
func (g *glusterEnv) scopedDaemon(t *testing.T, dir, parent string) int {
	t.Helper()
	pids := fuseProcesses(t, dir)
	if len(pids) != 1 {
		t.Fatalf("%d glusterfs processes serve %s, want 1", len(pids), dir)
	}
	pid := pids[0]
	mp := g.mountPod(t)
	for hier, path := range procCgroups(t, pid) {
		if inPodCgroup(path, string(mp.UID)) || strings.Contains(path, "kubepods") {
			t.Errorf("the FUSE daemon %d is in the mount pod's cgroup %s:%s", pid, hier, path)
		}
		// On a systemd node the scope is a unit of the node's systemd
		// (assertScopeUnit), its cgroups where systemd puts them.
		if hier != "" && !g.bed.Env.SystemdNode() && !strings.HasPrefix(path, "/"+parent+"/") {
			t.Errorf("the FUSE daemon %d is in %s:%s, not in a scope under /%s", pid, hier, path, parent)
		}
	}
	// The node's PID namespace: the host's, or a systemd node's own.
	self, err1 := os.Readlink(framework.NodeProcOf() + "/ns/pid")
	its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err1 != nil || err2 != nil || self != its {
		t.Errorf("the FUSE daemon %d is in PID namespace %s, the node's is %s (%v, %v)", pid, its, self, err1, err2)
	}
	return pid
}

// waitRegisteredAfter waits until the glusterfs registration names a ready
// mount pod whose container started after old's.
func (g *glusterEnv) waitRegisteredAfter(t *testing.T, old corev1.Pod) {
	t.Helper()
	oldStart := containerStart(old)
	err := framework.Poll(context.Background(), "a new mount pod container registered", 250*time.Millisecond, 3*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			pods, err := g.bed.Client.CoreV1().Pods(g.mountNS).List(ctx, metav1.ListOptions{LabelSelector: mountpodSelect})
			if err != nil {
				return false, err.Error(), nil
			}
			reg, ok, err := registration.Read(g.bed.Env.RegistrationDir, glusterPlugin)
			if err != nil || !ok {
				return false, fmt.Sprintf("registration: %v %v", ok, err), nil
			}
			for _, p := range pods.Items {
				if string(p.UID) != reg.PodUID || !podIsReady(&p) {
					continue
				}
				if p.UID != old.UID || containerStart(p).After(oldStart) {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("registration names %s", reg), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func containerStart(p corev1.Pod) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// procCgroups returns /proc/PID/cgroup as hierarchy (controller list, "" for
// cgroup2) -> path.
func procCgroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 {
			m[f[1]] = f[2]
		}
	}
	return m
}

// podProcess returns the PID of the process of the pod with this UID whose
// command is name (base name) with args: the pods run with hostPID, so the
// host's /proc shows them, and their cgroups name the pod.
func podProcess(t *testing.T, uid types.UID, name string, args ...string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []int
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if filepath.Base(argv[0]) != name || !slices.Equal(argv[1:], args) {
			continue
		}
		cg, err := os.ReadFile(filepath.Join(filepath.Dir(p), "cgroup"))
		if err != nil || !inPodCgroup(string(cg), string(uid)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		found = append(found, pid)
	}
	if len(found) != 1 {
		t.Fatalf("%d processes %s %v in pod %s, want 1", len(found), name, args, uid)
	}
	return found[0]
}

func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie is not serving anything.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// scopeDirs lists the scope cgroups left under parent in every hierarchy;
// on a systemd node, every mount scope's cgroup in the node's tree.
func scopeDirs(t *testing.T, parent string) []string {
	t.Helper()
	var left []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + parent)
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		roots = []string{"/sys/fs/cgroup/" + parent}
	}
	if env := framework.CurrentEnv(); env != nil && env.SystemdNode() {
		roots, _ = filepath.Glob("/sys/fs/cgroup/*/" + env.Vars["NODE_1_CGROUP"])
	}
	for _, r := range roots {
		_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "mount-") {
				left = append(left, p)
			}
			return nil
		})
	}
	return left
}

// streamWriter is a pod that appends a numbered, checksummed line to
// /data/stream every 100 ms, each with its own fsync, and records every
// failed write in /scratch/errors. Each line is one write(2): dd reads
// the whole line first (iflag=fullblock), since printf may hand the pipe
// a line in two pieces, which dd would otherwise write as two, and a
// daemon dying between them left half a line on the brick (seen under
// CPU stress).
type streamWriter struct {
	g   *glusterEnv
	pod *corev1.Pod
	// retried: the writer's mount may die under it (TestRecovery), and a
	// write the daemon applied just before it died, whose fsync then
	// failed, is written again under the same number: a number may repeat
	// right after itself, once for each write of it the writer saw fail
	// (checked against the writer's error log by repeatsWereRetries).
	retried bool
	// container writes the stream into file (relative to the volume's
	// root) and logs its failed writes in errors; by default "main",
	// "stream", "/scratch/errors".
	container, file, errors string
}

func (w *streamWriter) ctr() string { return cmp.Or(w.container, "main") }

func (w *streamWriter) errorLog() string { return cmp.Or(w.errors, "/scratch/errors") }

const streamWriterScript = `trap 'exit 0' TERM
: > /scratch/errors
i=$(wc -l < /data/stream 2>/dev/null || echo 0)
while :; do
  line="$i $(date +%s%N) $HOSTNAME"
  sum=$(printf '%s' "$line" | sha256sum | cut -c1-16)
  if printf '%s %s\n' "$line" "$sum" | dd iflag=fullblock of=/data/stream oflag=append conv=notrunc,fsync status=none 2>/scratch/err; then
    i=$((i+1))
  else
    printf '%s line %s: %s\n' "$(date +%s%N)" "$i" "$(cat /scratch/err)" >> /scratch/errors
  fi
  sleep 0.1
done`

func (g *glusterEnv) startStreamWriter(t *testing.T, name string) *streamWriter {
	t.Helper()
	return g.startStreamWriterWith(t, name, "")
}

// startStreamWriterWith starts a stream writer pod (container "main") with
// more containers, given as YAML list items indented for spec.containers,
// which may mount the volume "data" too.
func (g *glusterEnv) startStreamWriterWith(t *testing.T, name, moreContainers string) *streamWriter {
	t.Helper()
	return g.startStreamWriterScript(t, name, streamWriterScript, moreContainers)
}

// startOwnStreamWriter starts a stream writer whose stream is a file of its
// own, stream-NAME: a writer continues the count of the lines it finds, and
// the repeats of another writer's retried lines would skip numbers.
func (g *glusterEnv) startOwnStreamWriter(t *testing.T, name string) *streamWriter {
	t.Helper()
	file := "stream-" + name
	w := g.startStreamWriterScript(t, name, strings.ReplaceAll(streamWriterScript, "/data/stream", "/data/"+file), "")
	w.file = file
	return w
}

func (g *glusterEnv) startStreamWriterScript(t *testing.T, name, script, moreContainers string) *streamWriter {
	t.Helper()
	g.bed.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: %[3]s
      imagePullPolicy: Never
      command: ["sh", "-c", %[4]q]
      volumeMounts:
        - {name: data, mountPath: /data}
        - {name: scratch, mountPath: /scratch}
%[8]s  volumes:
    - name: data
      flexVolume:
        driver: %[5]s
        options: {server: %[6]q, volume: %[7]s}
    - name: scratch
      emptyDir: {}
`, name, g.ns, g.bed.Env.BaseImage, script, glusterDriver, g.bed.Env.NodeName, glusterVolume, moreContainers))
	w := &streamWriter{g: g, pod: g.bed.WaitPod(t, g.ns, name, true, 2*time.Minute)}
	t.Cleanup(func() { w.delete(t) })
	return w
}

// stream returns the stream as the brick holds it.
func (w *streamWriter) stream(t *testing.T) []byte {
	t.Helper()
	return []byte(w.g.bed.MustExec(t, w.g.ns, "glusterfs-server", "server", "cat", w.g.brick+"/"+cmp.Or(w.file, "stream")))
}

func (w *streamWriter) verify(t *testing.T) (int, map[string]int) {
	t.Helper()
	if w.retried {
		s := w.retriedStream(t)
		return s.n, s.writers
	}
	return verifyStream(t, w.stream(t))
}

func (w *streamWriter) lines(t *testing.T) int {
	t.Helper()
	n, _ := w.verify(t)
	return n
}

func (w *streamWriter) waitLines(t *testing.T, n int) {
	t.Helper()
	err := framework.Poll(context.Background(), fmt.Sprintf("%d lines on the brick", n), 250*time.Millisecond, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			// The writer's first line creates the stream: none yet is
			// no line yet (a loaded machine starts the pod's shell late).
			if _, _, err := w.g.bed.Exec(ctx, 20*time.Second, w.g.ns, "glusterfs-server", "server", "test", "-e", w.g.brick+"/"+cmp.Or(w.file, "stream")); err != nil {
				return false, "no stream yet", nil
			}
			got := w.lines(t)
			return got >= n, fmt.Sprintf("%d lines", got), nil
		})
	if err != nil {
		w.assertHealthy(t)
		t.Fatal(err)
	}
}

// assertHealthy fails unless the writer has seen no I/O error and was never
// restarted.
func (w *streamWriter) assertHealthy(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs, stderr, err := w.g.bed.Exec(ctx, 30*time.Second, w.g.ns, w.pod.Name, w.ctr(), "cat", w.errorLog())
	if err != nil {
		t.Errorf("read the writer's error log: %v: %s", err, stderr)
	} else if strings.TrimSpace(errs) != "" {
		t.Errorf("the workload saw I/O errors:\n%s", errs)
	}
	p, err := w.g.bed.Client.CoreV1().Pods(w.g.ns).Get(ctx, w.pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.UID != w.pod.UID {
		t.Fatalf("the workload pod was replaced")
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("the workload's container %s restarted %d times", cs.Name, cs.RestartCount)
		}
	}
}

// longestStall returns the longest gap between consecutive lines from line
// `from` on (their timestamps are the writer's clock).
func (w *streamWriter) longestStall(t *testing.T, from int) time.Duration {
	t.Helper()
	var longest time.Duration
	var prev int64
	for i, line := range strings.Split(strings.TrimSpace(string(w.stream(t))), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || i < from {
			continue
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("line %d: bad timestamp %q", i, f[1])
		}
		if prev != 0 && time.Duration(ns-prev) > longest {
			longest = time.Duration(ns - prev)
		}
		prev = ns
	}
	return longest
}

// delete deletes the writer and waits until its pod is gone.
func (w *streamWriter) delete(t *testing.T) {
	t.Helper()
	err := w.g.bed.Client.CoreV1().Pods(w.g.ns).Delete(context.Background(), w.pod.Name, metav1.DeleteOptions{})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	w.g.bed.WaitPodGone(t, w.g.ns, w.pod.Name, w.pod.UID, 2*time.Minute)
}
