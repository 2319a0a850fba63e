//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// The mount-pod tests run the real image (images/Dockerfile) as the kubelet
// runs it: a DaemonSet with the downward-API environment, tini as PID 1 and
// `mountpod check` as readiness probe. Each test registers plugins whose
// names contain its namespace, so that it never touches another test's
// registrations in the bed's shared directory.

// mountpodSet describes the DaemonSet of one test.
type mountpodSet struct {
	ns      string
	plugins []string
	// nodeSelector, when set, is the DaemonSet's node selector: a label the
	// node lacks leaves it without pods.
	nodeSelector string
	// surge: see mountPodDS.Surge.
	surge bool
}

func (s mountpodSet) manifest(bed *framework.Bed) string {
	return mountPodDS{
		Namespace: s.ns, Name: "mountpod", App: "mountpod", Image: bed.Env.MountpodImage,
		Plugins: s.plugins, NodeSelector: s.nodeSelector, GracePeriod: 10, Readiness: true, Surge: s.surge,
		// The image's default registration directory, on the bed's.
		Mounts: []hostPathMount{{Name: "registrations", HostPath: bed.Env.RegistrationDir, MountPath: "/var/lib/kubelet/plugin-containers", Type: "DirectoryOrCreate"}},
	}.manifest()
}

// setUpMountpods creates a namespace and the plugins' names for one test,
// and removes at cleanup whatever registration of those plugins is left.
func setUpMountpods(t *testing.T, bed *framework.Bed, n int) mountpodSet {
	t.Helper()
	if bed.Env.MountpodImage == "" || bed.Env.RegistrationDir == "" {
		t.Fatal("the bed's env has no MOUNTPOD_IMAGE or REGISTRATION_DIR")
	}
	s := mountpodSet{ns: bed.CreateNamespace(t, "mountpod")}
	for i := range n {
		s.plugins = append(s.plugins, fmt.Sprintf("e2e.mountcontainers.io/%s-%c", s.ns, 'a'+i))
	}
	t.Cleanup(func() {
		for _, p := range append(s.plugins, s.other()) {
			if path, err := registration.Path(bed.Env.RegistrationDir, p); err == nil {
				_ = os.Remove(path)
			}
		}
	})
	return s
}

// other is a plugin of the test's namespace that the DaemonSet does not serve.
func (s mountpodSet) other() string { return "e2e.mountcontainers.io/" + s.ns + "-other" }

// waitRegistered waits until plugin's registration names pod and returns
// when the test first saw it.
func waitRegistered(t *testing.T, bed *framework.Bed, plugin string, pod registration.Registration, timeout time.Duration) time.Time {
	t.Helper()
	var seen time.Time
	err := framework.Poll(context.Background(), fmt.Sprintf("registration of %s naming %s", plugin, pod), 20*time.Millisecond, timeout,
		func(context.Context) (bool, string, error) {
			r, ok, err := registration.Read(bed.Env.RegistrationDir, plugin)
			switch {
			case err != nil:
				return false, err.Error(), nil
			case !ok:
				return false, "not registered", nil
			case !r.SamePod(pod):
				return false, "names " + r.String(), nil
			}
			seen = time.Now()
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// podRegistration is what the mount pod p must write.
func podRegistration(p *corev1.Pod) registration.Registration {
	return registration.Registration{PodNamespace: p.Namespace, PodName: p.Name, PodUID: string(p.UID), ContainerName: "mount"}
}

// waitRunning polls the DaemonSet's pod every 50 ms until it is Running (or
// another pod than not) and returns it and when the test saw it Running.
func waitRunning(t *testing.T, bed *framework.Bed, ns string, not types.UID, timeout time.Duration) (*corev1.Pod, time.Time) {
	t.Helper()
	var pod *corev1.Pod
	var at time.Time
	err := framework.Poll(context.Background(), "mount pod running in "+ns, 50*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			list, err := bed.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=mountpod"})
			if err != nil {
				return false, err.Error(), nil
			}
			state := fmt.Sprintf("%d pods", len(list.Items))
			for i := range list.Items {
				p := &list.Items[i]
				state += fmt.Sprintf("; %s %s", p.Name, p.Status.Phase)
				if p.UID != not && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					pod, at = p, time.Now()
					return true, "", nil
				}
			}
			return false, state, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return pod, at
}

// checkOutput runs `mountpod check` in the pod; ok reports exit 0.
func checkOutput(t *testing.T, bed *framework.Bed, pod *corev1.Pod) (out string, ok bool) {
	t.Helper()
	stdout, stderr, err := bed.Exec(context.Background(), 30*time.Second, pod.Namespace, pod.Name, "mount", "/usr/local/bin/mountpod", "check")
	return stdout + stderr, err == nil
}

// TestMountpod runs one mount pod serving two plugins through its life:
// registration, the tools through the resolver, repair, zombies, yielding to
// another pod and SIGTERM. The subtests run in order on the same pod.
func TestMountpod(t *testing.T) {
	bed := framework.Current(t)
	s := setUpMountpods(t, bed, 2)
	a, b := s.plugins[0], s.plugins[1]
	bed.Apply(t, s.manifest(bed))
	pod, running := waitRunning(t, bed, s.ns, "", 2*time.Minute)
	want := podRegistration(pod)

	// How soon is a figure (test/README.md): the verdict is that the pod
	// registers at all, with a hang guard far above the usual second.
	t.Run("registers once Running", func(t *testing.T) {
		for _, p := range s.plugins {
			seen := waitRegistered(t, bed, p, want, 2*time.Minute)
			t.Logf("%s registered %.2fs after the pod was seen Running", p, max(seen.Sub(running), 0).Seconds())
		}
	})

	t.Run("file name and content exact", func(t *testing.T) {
		for _, p := range s.plugins {
			path := bed.Env.RegistrationDir + "/" + strings.ReplaceAll(p, "/", "~") + ".json"
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The image's mountpod is the batch program (--exec-batch auto).
			exact := fmt.Sprintf(`{"podNamespace":%q,"podName":%q,"podUID":%q,"containerName":"mount","execSocket":".exec/%s.sock","execBatch":"/usr/local/bin/mountpod"}`+"\n", pod.Namespace, pod.Name, pod.UID, pod.UID)
			if string(data) != exact {
				t.Errorf("%s = %q, want %q", path, data, exact)
			}
		}
		bed.WaitPod(t, s.ns, pod.Name, true, 30*time.Second)
		if out, ok := checkOutput(t, bed, pod); !ok || !strings.HasPrefix(out, "ready: ") {
			t.Errorf("mountpod check = %t, %q; want ready", ok, out)
		}
	})

	t.Run("tools run in the pod through the resolver", func(t *testing.T) {
		id := bed.RunningContainerID(t, pod.UID, "mount", 30*time.Second)
		for _, mode := range execModes {
			t.Run(string(mode), func(t *testing.T) {
				r := mcexec.NewResolver(mcexec.Options{Dir: bed.Env.RegistrationDir, Endpoint: bed.Env.CRIEndpoint, ExecMode: mode})
				defer r.Close()
				e, err := r.For(a)
				if err != nil {
					t.Fatal(err)
				}
				via := viaOf(t, mode)
				d, err := e.Resolve(context.Background())
				if err != nil || d.ContainerID != id || d.Via != via {
					t.Fatalf("decision for %s = %v, %v; want the pod's container %s via %s", a, d, err, id, via)
				}
				x := &pathCheck{Exec: e}
				for _, tc := range []struct {
					argv []string
					want string
				}{
					{[]string{"rbd", "--version"}, "ceph version"},
					{[]string{"mount.glusterfs", "-V"}, "glusterfs"},
					{[]string{"mkfs.ext4", "-V"}, "mke2fs"},
					{[]string{"mkfs.xfs", "-V"}, "mkfs.xfs version"},
					{[]string{"fsck.ext4", "-V"}, "e2fsck"},
					{[]string{"xfs_repair", "-V"}, "xfs_repair version"},
				} {
					out, err := x.Command(tc.argv[0], tc.argv[1:]...).CombinedOutput()
					if err != nil || !strings.Contains(string(out), tc.want) {
						t.Errorf("%q in the pod = %v, %q; want output containing %q", tc.argv, err, out, tc.want)
					}
				}
				x.verify(t, id, via)
			})
		}
	})

	t.Run("file deleted is re-created", func(t *testing.T) {
		path, _ := registration.Path(bed.Env.RegistrationDir, b)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		removed := time.Now()
		seen := waitRegistered(t, bed, b, want, 10*time.Second)
		t.Logf("re-created %.2fs after removal", seen.Sub(removed).Seconds())
	})

	t.Run("no zombies from daemonized children", func(t *testing.T) {
		id := bed.RunningContainerID(t, pod.UID, "mount", 30*time.Second)
		rs := bed.CRI(t)
		// Each command leaves a detached child behind that outlives it: its
		// orphan is re-parented to PID 1 and must be reaped there.
		for i := range 100 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			resp, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{
				ContainerId: id,
				Cmd:         []string{"sh", "-c", "setsid sleep 0.3 </dev/null >/dev/null 2>&1 &"},
				Timeout:     10,
			})
			cancel()
			if err != nil || resp.ExitCode != 0 {
				t.Fatalf("exec %d: %v, %v", i, err, resp)
			}
		}
		// The last children exit 0.3 s later, whenever the machine gets
		// to it; tini reaps each at once. Counted until none is left: a
		// PID 1 that does not reap keeps them for good.
		var fields []string
		err := framework.Poll(context.Background(), "no zombie in the mount pod", 250*time.Millisecond, time.Minute,
			func(ctx context.Context) (bool, string, error) {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				resp, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{
					ContainerId: id,
					Cmd:         []string{"sh", "-c", `cat /proc/1/comm; grep -l '^State:[[:space:]]*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`},
					Timeout:     10,
				})
				if err != nil || resp.ExitCode != 0 {
					return false, "", fmt.Errorf("count zombies: %v, %v", err, resp)
				}
				fields = strings.Fields(string(resp.Stdout))
				if len(fields) != 2 || fields[0] != "tini" {
					return false, "", fmt.Errorf("PID 1 and zombie count in the pod = %q, want tini and a count", fields)
				}
				return fields[1] == "0", fields[1] + " zombies", nil
			})
		if err != nil {
			t.Error(err)
		}
	})

	other := registration.Registration{PodNamespace: s.ns, PodName: "mountpod-usurper", PodUID: "00000000-0000-4000-8000-0000000000e2", ContainerName: "mount"}
	t.Run("yields to another pod and check fails", func(t *testing.T) {
		if err := registration.Write(bed.Env.RegistrationDir, a, other); err != nil {
			t.Fatal(err)
		}
		// Not Ready: the readiness probe (mountpod check) fails.
		err := framework.Poll(context.Background(), "pod not ready", 250*time.Millisecond, 30*time.Second,
			func(ctx context.Context) (bool, string, error) {
				p, err := bed.Client.CoreV1().Pods(s.ns).Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady {
						return c.Status == corev1.ConditionFalse, string(c.Status), nil
					}
				}
				return false, "no Ready condition", nil
			})
		if err != nil {
			t.Error(err)
		}
		out, ok := checkOutput(t, bed, pod)
		if ok || !strings.Contains(out, a) || !strings.Contains(out, "mountpod-usurper") {
			t.Errorf("mountpod check = %t, %q; want a failure naming %s and the other pod", ok, out, a)
		}
		// It does not fight: the other pod's registration stays.
		time.Sleep(2 * time.Second)
		if r, ok, err := registration.Read(bed.Env.RegistrationDir, a); err != nil || !ok || r != other {
			t.Errorf("registration of %s = %v, %v, %v; want the other pod's, untouched", a, r, ok, err)
		}
		logs := bed.Kubectl(t, "logs", "-n", s.ns, pod.Name, "-c", "mount")
		if !strings.Contains(logs, "yielding") || !strings.Contains(logs, "mountpod-usurper") {
			t.Errorf("the pod's log does not warn about the other pod:\n%s", logs)
		}
	})

	t.Run("SIGTERM removes only its own files", func(t *testing.T) {
		if err := registration.Write(bed.Env.RegistrationDir, s.other(), other); err != nil {
			t.Fatal(err)
		}
		bed.Kubectl(t, "delete", "daemonset", "-n", s.ns, "mountpod", "--wait=false")
		bed.WaitPodGone(t, s.ns, pod.Name, "", time.Minute)
		if _, ok, err := registration.Read(bed.Env.RegistrationDir, b); ok || err != nil {
			t.Errorf("own registration of %s left after SIGTERM (err %v)", b, err)
		}
		for _, p := range []string{a, s.other()} {
			if r, ok, err := registration.Read(bed.Env.RegistrationDir, p); err != nil || !ok || r != other {
				t.Errorf("registration of %s = %v, %v, %v; want the other pod's, untouched", p, r, ok, err)
			}
		}
	})
}

// TestMountpodContainerKilled kills the mount container: the resolver falls
// back to the host until the kubelet restarts it, then uses the new one.
func TestMountpodContainerKilled(t *testing.T) {
	bed := framework.Current(t)
	s := setUpMountpods(t, bed, 1)
	plugin := s.plugins[0]
	bed.Apply(t, s.manifest(bed))
	pod, _ := waitRunning(t, bed, s.ns, "", 2*time.Minute)
	waitRegistered(t, bed, plugin, podRegistration(pod), 10*time.Second)

	r := mcexec.NewResolver(mcexec.Options{Dir: bed.Env.RegistrationDir, Endpoint: bed.Env.CRIEndpoint})
	defer r.Close()
	e, err := r.For(plugin)
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.Resolve(context.Background())
	if err != nil || before.OnHost() {
		t.Fatalf("decision before the kill = %v, %v; want the container", before, err)
	}
	// SIGKILL: no chance to unregister.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bed.CRI(t).StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: before.ContainerID, Timeout: 0}); err != nil {
		t.Fatalf("stop container: %v", err)
	}
	during, err := e.Resolve(context.Background())
	if err != nil || !during.OnHost() || during.Reason != mcexec.ReasonNotRunning {
		t.Errorf("decision after the kill = %v, %v; want the host, %q", during, err, mcexec.ReasonNotRunning)
	}
	err = framework.Poll(context.Background(), "the restarted container", 250*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			d, err := e.Resolve(ctx)
			if err != nil {
				return false, err.Error(), nil
			}
			return !d.OnHost() && d.ContainerID != before.ContainerID, d.String(), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMountpodReplacement checks that a DaemonSet's replacement pod (new
// UID) overwrites a leftover of its predecessor and takes over, and that the
// predecessor's shutdown never removes the successor's registration.
func TestMountpodReplacement(t *testing.T) {
	bed := framework.Current(t)
	s := setUpMountpods(t, bed, 1)
	s.surge = true
	plugin := s.plugins[0]
	file, _ := registration.FileName(plugin)
	bed.Apply(t, s.manifest(bed))
	first, _ := waitRunning(t, bed, s.ns, "", 2*time.Minute)
	waitRegistered(t, bed, plugin, podRegistration(first), 10*time.Second)

	t.Run("overwrites a leftover", func(t *testing.T) {
		// Take the pod off the node; it unregisters on SIGTERM.
		parked := s
		parked.nodeSelector = "mountcontainers.io/no-such-node: \"true\""
		bed.Apply(t, parked.manifest(bed))
		bed.WaitPodGone(t, s.ns, first.Name, "", time.Minute)
		if _, ok, _ := registration.Read(bed.Env.RegistrationDir, plugin); ok {
			t.Errorf("registration of %s left after its pod stopped", plugin)
		}
		// Now the predecessor's leftover, as a crashed node would leave it.
		if err := registration.Write(bed.Env.RegistrationDir, plugin, podRegistration(first)); err != nil {
			t.Fatal(err)
		}
		bed.Apply(t, s.manifest(bed))
		second, _ := waitRunning(t, bed, s.ns, first.UID, 2*time.Minute)
		waitRegistered(t, bed, plugin, podRegistration(second), 10*time.Second)
		first = second
	})

	t.Run("the old pod's shutdown never removes the new pod's registration", func(t *testing.T) {
		// A rolling update with surge: the new pod is made Ready (so
		// registered) before the old one is deleted, so the old pod shuts
		// down while the registration names its successor. Removals are
		// watched for directly: the new pod would re-create a removed file
		// within milliseconds, before any read could miss it.
		//
		// The old pod must be Ready first: the DaemonSet controller deletes
		// an old pod that is not yet available at once, surge or not, and
		// then the old pod would stop before its successor registers.
		bed.WaitPod(t, s.ns, first.Name, true, 30*time.Second)
		w := watchRegistration(t, bed.Env.RegistrationDir, file)
		oldLog := followLog(t, bed, s.ns, first.Name)
		bed.Kubectl(t, "patch", "daemonset", "-n", s.ns, "mountpod", "--type=merge", "-p",
			`{"spec":{"template":{"metadata":{"annotations":{"e2e.mountcontainers.io/revision":"2"}}}}}`)
		next, _ := waitRunning(t, bed, s.ns, first.UID, 2*time.Minute)
		want := podRegistration(next)
		waitRegistered(t, bed, plugin, want, 10*time.Second)
		bed.WaitPodGone(t, s.ns, first.Name, first.UID, time.Minute)
		time.Sleep(500 * time.Millisecond) // let the last events arrive
		events := w.stop(t)

		created := false
		for _, ev := range events {
			switch {
			case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
				t.Errorf("%s was removed or renamed away (%s) while the old pod stopped", file, ev.Op)
			case ev.Has(fsnotify.Create):
				created = true
			}
		}
		if !created {
			t.Errorf("the watch saw no event of the new pod's registration (%v): it proves nothing", events)
		}
		t.Logf("events on %s: %v", file, events)
		if r, ok, err := registration.Read(bed.Env.RegistrationDir, plugin); err != nil || !ok || !r.SamePod(want) {
			t.Errorf("registration after the old pod stopped = %v, %v, %v; want %v", r, ok, err, want)
		}
		// The old pod's own account: its shutdown found the successor's
		// registration and left it (had it stopped first, the test would
		// prove nothing).
		if logs := oldLog(); !strings.Contains(logs, "registration no longer names this pod, left in place") {
			t.Errorf("the old pod's log does not show its shutdown leaving the new registration in place:\n%s", logs)
		}
		bed.WaitPod(t, s.ns, next.Name, true, 30*time.Second)
	})
}

// followLog holds the log of pod's mount container open, as the runtime
// writes it on the node (<pod logs dir>/<ns>_<pod>_<uid>/mount/<n>.log),
// from before the pod shuts down; the returned function reads it all, once
// the container has ended. The kubelet removes the file with the pod, but
// an open file can still be read: no stream to cut, no race with the
// deletion (kubectl logs -f of a pod being deleted has both).
func followLog(t *testing.T, bed *framework.Bed, ns, pod string) func() string {
	t.Helper()
	p, err := bed.Client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pattern := filepath.Join(bed.Env.BedDir, "pod-logs", fmt.Sprintf("%s_%s_%s", ns, pod, p.UID), "mount", "*.log")
	var files []string
	err = framework.Poll(context.Background(), "the log file "+pattern, 100*time.Millisecond, time.Minute,
		func(context.Context) (bool, string, error) {
			files, err = filepath.Glob(pattern)
			return len(files) > 0, fmt.Sprint(files, err), err
		})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files) // the newest restart's last
	f, err := os.Open(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func() string {
		data, err := io.ReadAll(f)
		if err != nil {
			t.Errorf("read the log of %s/%s: %v", ns, pod, err)
		}
		return string(data)
	}
}

// regWatch records the inotify events on one file of a registration
// directory.
type regWatch struct {
	w      *fsnotify.Watcher
	done   chan struct{}
	events []fsnotify.Event
	err    error
}

// watchRegistration watches dir (the directory, not the file: an atomic
// rename drops a file watch) and keeps the events on file.
func watchRegistration(t *testing.T, dir, file string) *regWatch {
	t.Helper()
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Add(dir); err != nil {
		fw.Close()
		t.Fatal(err)
	}
	w := &regWatch{w: fw, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case ev, ok := <-fw.Events:
				if !ok {
					return
				}
				if filepath.Base(ev.Name) == file {
					w.events = append(w.events, ev)
				}
			case err, ok := <-fw.Errors:
				if !ok {
					return
				}
				if w.err == nil {
					w.err = err // fsnotify.ErrEventOverflow: events were lost
				}
			}
		}
	}()
	t.Cleanup(func() { fw.Close() })
	return w
}

// stop ends the watch and returns the events; an error of the watch (lost
// events) fails the test.
func (w *regWatch) stop(t *testing.T) []fsnotify.Event {
	t.Helper()
	w.w.Close()
	<-w.done
	if w.err != nil {
		t.Fatalf("watch: %v", w.err)
	}
	return w.events
}
