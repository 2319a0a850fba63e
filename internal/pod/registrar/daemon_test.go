package registrar

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no plugin", func(c *Config) { c.Plugins = nil }, "no plugin"},
		{"only empty plugins", func(c *Config) { c.Plugins = []string{"", " "} }, "no plugin"},
		{"bad plugin name", func(c *Config) { c.Plugins = []string{"../etc/passwd"} }, "invalid plugin name"},
		{"missing pod UID", func(c *Config) { c.Pod.PodUID = "" }, "podUID is missing"},
		{"bad namespace", func(c *Config) { c.Pod.PodNamespace = "Kube_System" }, "podNamespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, &syncBuffer{})
			tt.mutate(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRunRefusesToRegisterWithoutTools(t *testing.T) {
	bin := t.TempDir()
	writeExecutable(t, filepath.Join(bin, "rbd"))
	cfg := testConfig(t, &syncBuffer{})
	cfg.SearchPath = bin
	cfg.RequiredTools = []string{"rbd", "mkfs.xfs", "", "mount.glusterfs"}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(context.Background())
	var mt *MissingToolsError
	if !errors.As(err, &mt) {
		t.Fatalf("Run() = %v, want a *MissingToolsError", err)
	}
	if want := []string{"mkfs.xfs", "mount.glusterfs"}; !slices.Equal(mt.Missing, want) {
		t.Errorf("missing = %q, want %q", mt.Missing, want)
	}
	if !strings.Contains(err.Error(), "mkfs.xfs, mount.glusterfs") {
		t.Errorf("error %q does not list the missing tools", err)
	}
	if entries, err := registration.List(cfg.Dir); err != nil || len(entries) != 0 {
		t.Errorf("registrations after a failed tool check: %v, %v; want none", entries, err)
	}
}

func TestRunRegistersEveryPluginOverLeftovers(t *testing.T) {
	logs := &syncBuffer{}
	cfg := testConfig(t, logs)
	bin := t.TempDir()
	writeExecutable(t, filepath.Join(bin, "rbd"))
	cfg.SearchPath, cfg.RequiredTools = bin, []string{"rbd"}
	// Leftovers: an older pod's registration and garbage.
	if err := registration.Write(cfg.Dir, rbd, newPod); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(regPath(t, cfg.Dir, gluster), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg)
	for _, p := range []string{rbd, gluster} {
		got, ok := readReg(t, cfg.Dir, p)
		if !ok || got != thisPod {
			t.Errorf("registration of %s = %v, %v; want %v", p, got, ok, thisPod)
		}
		path := regPath(t, cfg.Dir, p)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"podNamespace":"kube-system","podName":"mount-abcde","podUID":"3f1c1a0e-0000-4000-8000-000000000001","containerName":"mount"}` + "\n"
		if string(data) != want {
			t.Errorf("%s = %q, want %q", path, data, want)
		}
		if !strings.Contains(logs.String(), "msg=registered") || !strings.Contains(logs.String(), "path="+path) {
			t.Errorf("log does not name %s:\n%s", path, logs)
		}
	}
	if y := r.d.Yielded(); len(y) != 0 {
		t.Errorf("yielded %v at start; a starting pod takes over leftovers", y)
	}
}

func TestRecreatesDeletedRegistration(t *testing.T) {
	cfg := testConfig(t, &syncBuffer{})
	start(t, cfg)
	if err := os.Remove(regPath(t, cfg.Dir, rbd)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rbd registration is re-created", func() bool { return isRegistered(cfg.Dir, rbd, thisPod) })
}

func TestRecreatesDeletedDirectory(t *testing.T) {
	tests := []struct {
		name   string
		remove func(dir string) error
	}{
		{"moved away", func(dir string) error { return os.Rename(dir, dir+".old") }},
		// The daemon may re-create a file between RemoveAll's unlink and
		// rmdir: try again, as an administrator would.
		{"removed", func(dir string) error {
			var err error
			for range 100 {
				if err = os.RemoveAll(dir); err == nil {
					break
				}
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, &syncBuffer{})
			start(t, cfg)
			if err := tt.remove(cfg.Dir); err != nil {
				t.Fatal(err)
			}
			eventually(t, "both registrations are re-created", func() bool {
				return isRegistered(cfg.Dir, rbd, thisPod) && isRegistered(cfg.Dir, gluster, thisPod)
			})
		})
	}
}

func TestRestoresGarbage(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, path string)
	}{
		{"malformed JSON", func(t *testing.T, path string) { mustWrite(t, path, "{\"podNamespace\":", 0o644) }},
		{"empty file", func(t *testing.T, path string) { mustWrite(t, path, "", 0o644) }},
		{"invalid registration", func(t *testing.T, path string) { mustWrite(t, path, `{"podNamespace":"kube-system"}`, 0o644) }},
		{"world-writable", func(t *testing.T, path string) {
			mustWrite(t, path, `{"podNamespace":"x","podName":"y","podUID":"z","containerName":"c"}`, 0o666)
			if err := os.Chmod(path, 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{"symbolic link", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere.json")
			mustWrite(t, target, `{"podNamespace":"x","podName":"y","podUID":"z","containerName":"c"}`, 0o644)
			tmp := filepath.Join(filepath.Dir(path), ".link")
			if err := os.Symlink(target, tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &syncBuffer{}
			cfg := testConfig(t, logs)
			r := start(t, cfg)
			tt.spoil(t, regPath(t, cfg.Dir, gluster))
			eventually(t, "the registration is restored", func() bool { return isRegistered(cfg.Dir, gluster, thisPod) })
			if fi, err := os.Lstat(regPath(t, cfg.Dir, gluster)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
				t.Errorf("restored file: %v, %v; want a regular file of mode 0644", fi, err)
			}
			if y := r.d.Yielded(); len(y) != 0 {
				t.Errorf("yielded %v to garbage", y)
			}
			if !strings.Contains(logs.String(), "restoring") {
				t.Errorf("no restore logged:\n%s", logs)
			}
		})
	}
}

func mustWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestYieldsToAnotherPod(t *testing.T) {
	logs := &syncBuffer{}
	cfg := testConfig(t, logs)
	r := start(t, cfg)
	if err := registration.Write(cfg.Dir, rbd, newPod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon yields rbd", func() bool { _, ok := r.d.Yielded()[rbd]; return ok })
	if got := r.d.Yielded()[rbd]; got != newPod {
		t.Errorf("yielded to %v, want %v", got, newPod)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "otherPod=kube-system/mount-fghij") || !strings.Contains(l, "otherPodUID="+newPod.PodUID) {
		t.Errorf("the warning does not name the other pod:\n%s", l)
	}
	// The check reports this pod not ready for rbd, naming the other pod.
	problems := Check(cfg)
	if len(problems) != 1 || !strings.Contains(problems[0], rbd) || !strings.Contains(problems[0], "kube-system/mount-fghij") {
		t.Errorf("Check() = %q, want one problem naming %s and the other pod", problems, rbd)
	}

	// It no longer asserts rbd while the other pod's registration is there:
	// the other pod rewriting it is left alone, while gluster is still
	// defended.
	if err := registration.Write(cfg.Dir, rbd, newPod); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(regPath(t, cfg.Dir, gluster)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gluster is re-created", func() bool { return isRegistered(cfg.Dir, gluster, thisPod) })
	time.Sleep(100 * time.Millisecond)
	if got, _ := readReg(t, cfg.Dir, rbd); got != newPod {
		t.Fatalf("rbd registration = %v, want it left to %v", got, newPod)
	}
}

// TestYieldingIsNotForever: once the pod it yielded to unregisters (its
// registration file is deleted, as its daemon does when it stops), the
// daemon registers the plugin again and says so.
func TestYieldingIsNotForever(t *testing.T) {
	logs := &syncBuffer{}
	cfg := testConfig(t, logs)
	cfg.ResyncPeriod = time.Hour // only the watch can notice the removal
	r := start(t, cfg)
	if err := registration.Write(cfg.Dir, rbd, newPod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon yields rbd", func() bool { _, ok := r.d.Yielded()[rbd]; return ok })

	// The other pod stops and removes its registration.
	if removed, err := registration.RemoveIfOwned(cfg.Dir, rbd, newPod.PodUID); err != nil || !removed {
		t.Fatalf("RemoveIfOwned = %v, %v", removed, err)
	}
	eventually(t, "rbd is registered again", func() bool { return isRegistered(cfg.Dir, rbd, thisPod) })
	if y := r.d.Yielded(); len(y) != 0 {
		t.Errorf("still yielded after registering again: %v", y)
	}
	if problems := Check(cfg); len(problems) != 0 {
		t.Errorf("Check() = %q after registering again, want ready", problems)
	}
	if l := logs.String(); !strings.Contains(l, "registering again") || !strings.Contains(l, "otherPodUID="+newPod.PodUID) {
		t.Errorf("the log does not say the plugin is registered again after the other pod left:\n%s", l)
	}

	// And it is defended again, as any registration of this pod.
	if err := os.Remove(regPath(t, cfg.Dir, rbd)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rbd is re-created", func() bool { return isRegistered(cfg.Dir, rbd, thisPod) })
}

// TestYieldedPluginPassesOn: a plugin that passes from the pod this pod
// yielded to on to a third pod stays yielded, to the third pod.
func TestYieldedPluginPassesOn(t *testing.T) {
	cfg := testConfig(t, &syncBuffer{})
	r := start(t, cfg)
	if err := registration.Write(cfg.Dir, rbd, newPod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon yields rbd", func() bool { _, ok := r.d.Yielded()[rbd]; return ok })
	third := newPod
	third.PodName, third.PodUID = "mount-klmno", "3f1c1a0e-0000-4000-8000-000000000003"
	if err := registration.Write(cfg.Dir, rbd, third); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rbd is yielded to the third pod", func() bool { return r.d.Yielded()[rbd] == third })
	time.Sleep(100 * time.Millisecond)
	if got, _ := readReg(t, cfg.Dir, rbd); got != third {
		t.Fatalf("rbd registration = %v, want it left to %v", got, third)
	}
}

func TestStopRemovesOnlyOwnRegistrations(t *testing.T) {
	cfg := testConfig(t, &syncBuffer{})
	cfg.Plugins = append(cfg.Plugins, "example.com/fuse")
	r := start(t, cfg)
	// Another plugin's registration, not configured here.
	other := "kubernetes.io/cephfs"
	if err := registration.Write(cfg.Dir, other, newPod); err != nil {
		t.Fatal(err)
	}
	// A replacement took gluster over and the daemon has seen it.
	if err := registration.Write(cfg.Dir, gluster, newPod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon yields gluster", func() bool { _, ok := r.d.Yielded()[gluster]; return ok })
	// And takes the fuse plugin over just before the stop, unseen.
	if err := registration.Write(cfg.Dir, "example.com/fuse", newPod); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run() after cancel = %v, want nil", err)
	}
	if _, ok := readReg(t, cfg.Dir, rbd); ok {
		t.Error("own rbd registration left behind")
	}
	for _, p := range []string{gluster, "example.com/fuse", other} {
		if got, ok := readReg(t, cfg.Dir, p); !ok || got != newPod {
			t.Errorf("registration of %s = %v, %v; want the other pod's left in place", p, got, ok)
		}
	}
}

func TestRetriesFailedWrites(t *testing.T) {
	logs := &syncBuffer{}
	cfg := testConfig(t, logs)
	start(t, cfg)
	// Writers lock a dotfile, which the watch ignores: replacing it with a
	// directory makes every write fail, and repairing it makes no event, so
	// only the retry can re-create the registration.
	lock := filepath.Join(cfg.Dir, ".mountcontainers.lock")
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(lock, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(regPath(t, cfg.Dir, rbd)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a write fails", func() bool { return strings.Contains(logs.String(), "cannot write registration") })
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the rbd registration is re-created by a retry", func() bool { return isRegistered(cfg.Dir, rbd, thisPod) })
}

// TestStormDoesNotSpin writes garbage over a registration as fast as it can
// and counts the daemon's reads and writes: the watch's rate limit must keep
// them to about one per MaxDelay, whatever the storm's rate. It counts work,
// not time, so a slow machine cannot make it fail. The count starts once
// the storm has run for a while: a writer that starts slowly (a busy
// machine) is not a storm yet, and the daemon follows it at the pace of
// Debounce, as it should.
func TestStormDoesNotSpin(t *testing.T) {
	cfg := testConfig(t, &syncBuffer{})
	cfg.Debounce, cfg.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	r := start(t, cfg)
	counts := func() (reads, writes int) {
		r.d.mu.Lock()
		defer r.d.mu.Unlock()
		return r.d.reads, r.d.writes
	}

	const warmUp, stormFor = 300 * time.Millisecond, time.Second
	path := regPath(t, cfg.Dir, gluster)
	unrelated := regPath(t, cfg.Dir, "kubernetes.io/cephfs")
	var reads0, writes0 int
	var begin time.Time
	storm := 0
	for start := time.Now(); time.Since(start) < warmUp+stormFor; {
		if begin.IsZero() && time.Since(start) >= warmUp {
			begin = time.Now()
			reads0, writes0 = counts()
			storm = 0
		}
		mustWrite(t, path, "garbage", 0o644)
		mustWrite(t, unrelated, "garbage", 0o644)
		storm += 2
	}
	elapsed := time.Since(begin)
	eventually(t, "gluster is restored after the storm", func() bool { return isRegistered(cfg.Dir, gluster, thisPod) })

	reads, writes := counts()
	reads, writes = reads-reads0, writes-writes0
	// One batch per MaxDelay, each reading and possibly restoring one file,
	// and each restore seen once more; a margin for the edges (the batch
	// under way when the count starts, the one after the storm).
	batches := int(elapsed/cfg.MaxDelay) + 3
	t.Logf("storm of %d writes in %v: %d reads, %d writes by the daemon", storm, elapsed, reads, writes)
	if storm < 10*batches {
		t.Skipf("the storm was too slow (%d writes) to tell", storm)
	}
	if writes > batches {
		t.Errorf("the daemon wrote %d times during a storm of %v, want at most %d", writes, elapsed, batches)
	}
	if reads > 2*batches {
		t.Errorf("the daemon read %d times during a storm of %v, want at most %d", reads, elapsed, 2*batches)
	}
}

// TestRunFailsWhenARegistrationCannotBeWritten: a pod that cannot register
// every plugin at start returns an error (and crash-loops) at once, with
// nothing registered.
func TestRunFailsWhenARegistrationCannotBeWritten(t *testing.T) {
	cfg := testConfig(t, &syncBuffer{})
	// Writers lock this dotfile: a directory in its place fails every write.
	if err := os.MkdirAll(filepath.Join(cfg.Dir, ".mountcontainers.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run = nil, want the write error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of failing to register")
	}
	if entries, err := registration.List(cfg.Dir); err != nil || len(entries) != 0 {
		t.Errorf("registrations after a failed start: %v, %v; want none", entries, err)
	}
}
