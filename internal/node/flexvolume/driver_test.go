package flexvolume_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const plugin = "kubernetes.io/glusterfs"

// markerChecker answers mount-point queries from marker files that the fake
// mount and umount scripts write into the target directory: .mounted is a
// mount, .dead a dead FUSE mount (ENOTCONN).
type markerChecker struct{}

func (markerChecker) IsLikelyNotMountPoint(dir string) (bool, error) {
	if _, err := os.Stat(dir); err != nil {
		return true, err
	}
	if _, err := os.Stat(filepath.Join(dir, ".dead")); err == nil {
		return true, &os.PathError{Op: "stat", Path: dir, Err: syscall.ENOTCONN}
	}
	_, err := os.Stat(filepath.Join(dir, ".mounted"))
	return err != nil, nil
}

// fakeTools puts shell scripts named mount and umount first on PATH. They
// log their arguments to $dir/calls and act on the markers; a file
// $dir/mode-<tool> changes what they do: "fail" exits 32 with a message,
// "hang" sleeps, "noop" succeeds without doing anything, "fail-plain" fails
// unless -l is given.
type fakeTools struct{ dir string }

func newFakeTools(t *testing.T) *fakeTools {
	t.Helper()
	dir := t.TempDir()
	script := `#!/bin/sh
tool=$(basename "$0")
printf '%s' "$tool" >>"` + dir + `/calls"
for a in "$@"; do printf ' %s' "$a" >>"` + dir + `/calls"; done
echo >>"` + dir + `/calls"
mode=$(cat "` + dir + `/mode-$tool" 2>/dev/null)
for last in "$@"; do :; done
case $mode in
fail) echo "$tool: mount error(32): it went wrong" >&2; exit 32 ;;
hang) exec sleep 30 ;;
noop) exit 0 ;;
fail-plain) [ "$1" = -l ] || { echo "$tool: target is busy" >&2; exit 32; } ;;
esac
case $tool in
mount) touch "$last/.mounted" ;;
umount) rm -f "$last/.mounted" "$last/.dead" ;;
esac
`
	for _, tool := range []string{"mount", "umount"} {
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	return &fakeTools{dir: dir}
}

func (f *fakeTools) mode(t *testing.T, tool, mode string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "mode-"+tool), []byte(mode), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeTools) calls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// hostDriver is a driver whose plugin is not registered: its commands run
// on the host, here the fake tools.
func hostDriver(t *testing.T) *flexvolume.Driver {
	t.Helper()
	r := mcexec.NewResolver(mcexec.Options{Dir: filepath.Join(t.TempDir(), "plugin-containers")})
	t.Cleanup(func() { r.Close() })
	e, err := r.For(plugin)
	if err != nil {
		t.Fatal(err)
	}
	return &flexvolume.Driver{Plugin: plugin, Exec: e, Mounts: markerChecker{}, Umount2: toolUmount2, Timeout: 5 * time.Second, Servers: testServers(t)}
}

// toolUmount2 is the driver's umount2(2) in these tests: the fake umount
// tool on PATH, so that its calls are logged with the mounts' ("umount -l
// DIR" for MNT_DETACH). It refuses a call without UMOUNT_NOFOLLOW.
func toolUmount2(dir string, flags int) error {
	if flags&unix.UMOUNT_NOFOLLOW == 0 {
		return fmt.Errorf("umount2 %s without UMOUNT_NOFOLLOW (flags %#x)", dir, flags)
	}
	args := []string{dir}
	if flags&unix.MNT_DETACH != 0 {
		args = []string{"-l", dir}
	}
	if out, err := exec.Command("umount", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// testServers allows the names these tests use as they are, so that no
// test depends on the machine's resolver.
func testServers(t *testing.T) fs.ServerPolicy {
	t.Helper()
	p, err := fs.ParseAllowedServers([]string{"gluster-1.example.com", "a", "a.example", "b.example", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func call(t *testing.T, d *flexvolume.Driver, args ...string) (flexvolume.Status, string, int) {
	t.Helper()
	var out bytes.Buffer
	code := d.Run(context.Background(), args, &out)
	var s flexvolume.Status
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("reply %q is not JSON: %v", out.String(), err)
	}
	if want := map[bool]int{true: 1, false: 0}[s.Status == flexvolume.StatusNotSupported]; code != want {
		t.Errorf("exit code %d with status %q, want %d", code, s.Status, want)
	}
	return s, out.String(), code
}

const goodOpts = `{"server":"gluster-1.example.com","volume":"gv0","mountOptions":"log-level=WARNING","kubernetes.io/fsType":"","kubernetes.io/readwrite":"rw","kubernetes.io/pod.name":"web","kubernetes.io/pod.namespace":"default","kubernetes.io/pod.uid":"0f1e","kubernetes.io/pvOrVolumeName":"data","kubernetes.io/serviceAccount.name":"default"}`

func TestInit(t *testing.T) {
	_, out, code := call(t, hostDriver(t), "init")
	want := `{"status":"Success","capabilities":{"attach":false,"selinuxRelabel":false,"fsGroup":false,"supportsMetrics":false,"requiresFSResize":false}}` + "\n"
	if out != want || code != 0 {
		t.Fatalf("init = %q (exit %d), want %q", out, code, want)
	}
}

func TestNotSupported(t *testing.T) {
	d := hostDriver(t)
	for _, c := range []string{"attach", "detach", "waitforattach", "isattached", "mountdevice", "unmountdevice", "getvolumename", "expandvolume", "expandfs", "bogus"} {
		s, out, code := call(t, d, c, "x")
		if s.Status != flexvolume.StatusNotSupported || code != 1 || out != `{"status":"Not supported"}`+"\n" {
			t.Errorf("%s = %q (exit %d), want Not supported", c, out, code)
		}
	}
	if s, _, _ := call(t, d); s.Status != flexvolume.StatusFailure {
		t.Errorf("no call: %+v, want Failure", s)
	}
}

func TestMountUnmountOnHost(t *testing.T) {
	tools := newFakeTools(t)
	d := hostDriver(t)
	dir := filepath.Join(t.TempDir(), "pods", "uid", "volumes", "mountcontainers.io~glusterfs", "data")

	s, _, _ := call(t, d, "mount", dir, goodOpts)
	if s.Status != flexvolume.StatusSuccess {
		t.Fatalf("mount: %+v", s)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("target directory not created: %v", err)
	}
	want := []string{"mount -t glusterfs -o log-level=WARNING gluster-1.example.com:/gv0 " + dir}
	if got := tools.calls(t); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if !strings.Contains(s.Message, "on the node") {
		t.Errorf("message %q does not say where it ran", s.Message)
	}
	// A mount on the host has no mount pod to make it again: no record.
	if es, err := mountrecord.List(d.Exec.RecordsDir()); err != nil || len(es) != 0 {
		t.Errorf("a mount on the host was recorded: %+v, %v", es, err)
	}

	// Mounting what is mounted runs nothing.
	if s, _, _ := call(t, d, "mount", dir, goodOpts); s.Status != flexvolume.StatusSuccess || len(tools.calls(t)) != 1 {
		t.Fatalf("second mount: %+v, calls %q", s, tools.calls(t))
	}

	if s, _, _ := call(t, d, "unmount", dir); s.Status != flexvolume.StatusSuccess {
		t.Fatalf("unmount: %+v", s)
	}
	if got := tools.calls(t); len(got) != 2 || got[1] != "umount "+dir {
		t.Fatalf("calls %q, want umount last", got)
	}
	// Unmounting what is not mounted, or not there, runs nothing.
	for _, p := range []string{dir, filepath.Join(dir, "missing")} {
		if s, _, _ := call(t, d, "unmount", p); s.Status != flexvolume.StatusSuccess {
			t.Fatalf("unmount of %s: %+v", p, s)
		}
	}
	if n := len(tools.calls(t)); n != 2 {
		t.Fatalf("%d calls, want no more", n)
	}
}

// TestDefaultMountCheckRunsNothing: the driver's own mount-point check
// (Mounts nil) answers by statx and runs no program. mount-utils' New runs
// umount(8) on a temporary directory to learn how it reports a path that
// is not mounted; every mount and unmount call paid that fork and exec.
// The check runs before the call's executor is asked, so it is the same
// whichever path (the exec socket, CRI ExecSync or the host) the mount
// then takes; this driver's plugin is not registered: the host.
func TestDefaultMountCheckRunsNothing(t *testing.T) {
	tools := newFakeTools(t)
	d := hostDriver(t)
	d.Mounts = nil
	dir := filepath.Join(t.TempDir(), "pods", "uid", "volumes", "mountcontainers.io~glusterfs", "data")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// Not a mount point: nothing to unmount, and nothing run.
	if s, _, _ := call(t, d, "unmount", dir); s.Status != flexvolume.StatusSuccess {
		t.Fatalf("unmount of a plain directory: %+v", s)
	}
	if got := tools.calls(t); len(got) != 0 {
		t.Errorf("the unmount of a directory that is no mount point ran %q, want nothing", got)
	}
	// A mount point is one: /proc is a mount of its own on every node
	// these tests run on.
	if s, _, _ := call(t, d, "mount", "/proc", goodOpts); s.Status != flexvolume.StatusSuccess || !strings.Contains(s.Message, "already mounted") {
		t.Errorf("mount at /proc: %+v, want it found mounted", s)
	}
	if got := tools.calls(t); len(got) != 0 {
		t.Errorf("the mount-point checks ran %q, want nothing", got)
	}
}

func TestBadOptions(t *testing.T) {
	tools := newFakeTools(t)
	d := hostDriver(t)
	for _, tc := range []struct {
		name, opts, field string
	}{
		{"not JSON", `{"server":`, "not a JSON object"},
		{"not an object", `["a"]`, "not a JSON object"},
		{"trailing", `{"server":"a","volume":"v"} {}`, "trailing"},
		{"trailing brace", `{"server":"a","volume":"v"}}`, "trailing"},
		{"no server", `{"volume":"v"}`, `"server"`},
		{"empty server", `{"server":"","volume":"v"}`, `"server"`},
		{"server injection", `{"server":"a;reboot","volume":"v"}`, `"server"`},
		{"server option", `{"server":"-oremount","volume":"v"}`, `"server"`},
		{"server with colon", `{"server":"a:/etc","volume":"v"}`, `"server"`},
		{"ipv6", `{"server":"::1","volume":"v"}`, `"server"`},
		{"both", `{"server":"a","servers":"b","volume":"v"}`, `"servers"`},
		{"bad servers", `{"servers":"a,,b","volume":"v"}`, `"servers"`},
		{"no volume", `{"server":"a"}`, `"volume"`},
		{"volume path", `{"server":"a","volume":"../../etc"}`, `"volume"`},
		{"volume space", `{"server":"a","volume":"v x"}`, `"volume"`},
		{"volume not string", `{"server":"a","volume":7}`, `"volume"`},
		{"log-file", `{"server":"a","volume":"v","mountOptions":"log-file=/etc/shadow"}`, `"mountOptions"`},
		{"xlator", `{"server":"a","volume":"v","mountOptions":"xlator-option=x.y=z"}`, `"mountOptions"`},
		{"unknown option", `{"server":"a","volume":"v","mountOptions":"bogus"}`, `"mountOptions"`},
		{"flag with value", `{"server":"a","volume":"v","mountOptions":"ro=1"}`, `"mountOptions"`},
		{"bad number", `{"server":"a","volume":"v","mountOptions":"entry-timeout=-1"}`, `"mountOptions"`},
		{"bad enum", `{"server":"a","volume":"v","mountOptions":"log-level=LOUD"}`, `"mountOptions"`},
		{"bad backup", `{"server":"a","volume":"v","mountOptions":"backup-volfile-servers=b:$(id)"}`, `"mountOptions"`},
		{"backup twice", `{"servers":"a,b","volume":"v","mountOptions":"backup-volfile-servers=c"}`, `"mountOptions"`},
		{"fsType", `{"server":"a","volume":"v","kubernetes.io/fsType":"ext4"}`, `"kubernetes.io/fsType"`},
		{"readwrite", `{"server":"a","volume":"v","kubernetes.io/readwrite":"maybe"}`, `"kubernetes.io/readwrite"`},
		{"unknown key", `{"server":"a","volume":"v","volumee":"w"}`, `"volumee"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			s, _, _ := call(t, d, "mount", dir, tc.opts)
			if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, tc.field) {
				t.Fatalf("reply %+v, want a Failure naming %s", s, tc.field)
			}
		})
	}
	if c := tools.calls(t); len(c) != 0 {
		t.Fatalf("bad options ran %q", c)
	}
	for _, args := range [][]string{
		{"mount", "relative/dir", goodOpts}, {"mount", "/a/../b", goodOpts}, {"mount", "/a"},
		{"unmount", "rel"}, {"unmount"}, {"unmount", "/a", "/b"},
	} {
		if s, _, _ := call(t, d, args...); s.Status != flexvolume.StatusFailure {
			t.Errorf("%q: %+v, want Failure", args, s)
		}
	}
}

func TestMountFailures(t *testing.T) {
	t.Run("mount fails", func(t *testing.T) {
		tools := newFakeTools(t)
		tools.mode(t, "mount", "fail")
		s, _, _ := call(t, hostDriver(t), "mount", filepath.Join(t.TempDir(), "v"), goodOpts)
		if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, "it went wrong") || !strings.Contains(s.Message, "gluster-1.example.com:/gv0") {
			t.Fatalf("%+v, want a Failure with mount's output", s)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		tools := newFakeTools(t)
		tools.mode(t, "mount", "hang")
		d := hostDriver(t)
		d.Timeout = 300 * time.Millisecond
		start := time.Now()
		s, _, _ := call(t, d, "mount", filepath.Join(t.TempDir(), "v"), goodOpts)
		if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, "timed out") {
			t.Fatalf("%+v, want a timeout Failure", s)
		}
		if el := time.Since(start); el > 20*time.Second {
			t.Fatalf("took %s: the timeout did not stop the mount", el)
		}
	})
	t.Run("not visible on the node", func(t *testing.T) {
		tools := newFakeTools(t)
		tools.mode(t, "mount", "noop")
		dir := filepath.Join(t.TempDir(), "v")
		s, _, _ := call(t, hostDriver(t), "mount", dir, goodOpts)
		if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, "Bidirectional") {
			t.Fatalf("%+v, want a Failure about propagation", s)
		}
		if c := tools.calls(t); len(c) != 2 || c[1] != "umount "+dir {
			t.Fatalf("calls %q: want the mount undone", c)
		}
	})
	t.Run("dead mount is not mounted over", func(t *testing.T) {
		tools := newFakeTools(t)
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ".dead"), nil, 0o644)
		s, _, _ := call(t, hostDriver(t), "mount", dir, goodOpts)
		if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, "broken mount") || len(tools.calls(t)) != 0 {
			t.Fatalf("%+v, calls %q", s, tools.calls(t))
		}
	})
}

func TestUnmountDeadMount(t *testing.T) {
	tools := newFakeTools(t)
	tools.mode(t, "umount", "fail-plain")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".dead"), nil, 0o644)
	s, _, _ := call(t, hostDriver(t), "unmount", dir)
	if s.Status != flexvolume.StatusSuccess || !strings.Contains(s.Message, "dead mount") {
		t.Fatalf("%+v, want Success after a lazy unmount", s)
	}
	if c := tools.calls(t); !slices.Equal(c, []string{"umount " + dir, "umount -l " + dir}) {
		t.Fatalf("calls %q", c)
	}
}

func TestUnmountFails(t *testing.T) {
	tools := newFakeTools(t)
	tools.mode(t, "umount", "fail")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".mounted"), nil, 0o644)
	s, _, _ := call(t, hostDriver(t), "unmount", dir)
	if s.Status != flexvolume.StatusFailure {
		t.Fatalf("%+v, want Failure", s)
	}
}

// TestMountInMountPod runs the mount through a registered, running mount
// container (a fake CRI runtime): the command is one ExecSync with a bound,
// and nothing runs on the host; the unmount is umount2(2) on the node (no
// symbolic link followed), no ExecSync.
func TestMountInMountPod(t *testing.T) {
	tools := newFakeTools(t)
	rt := crifake.NewFakeRuntime()
	endpoint := rt.Serve(t)
	regDir := filepath.Join(t.TempDir(), "plugin-containers")
	reg := registration.Registration{PodNamespace: "kube-system", PodName: "glusterfs-mountpod-abcde", PodUID: "6f1c1d2e-0000-4000-8000-000000000001", ContainerName: "mount"}
	if err := registration.Write(regDir, plugin, reg); err != nil {
		t.Fatal(err)
	}
	rt.SetContainers(crifake.Container("ctr1", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	var mu sync.Mutex
	rt.SetExec(func(_ context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		// Act like the mount pod: the mount shows on the node.
		dir := req.Cmd[len(req.Cmd)-1]
		switch req.Cmd[0] {
		case "mount":
			os.WriteFile(filepath.Join(dir, ".mounted"), nil, 0o644)
		case "umount":
			os.Remove(filepath.Join(dir, ".mounted"))
		}
		return &runtimeapi.ExecSyncResponse{}, nil
	})
	logPath := filepath.Join(t.TempDir(), "driver.log")
	log, logFile, err := flexvolume.OpenLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	r := mcexec.NewResolver(mcexec.Options{Dir: regDir, Endpoint: endpoint, ExecMode: mcexec.ModeCRI, Logger: log})
	t.Cleanup(func() { r.Close() })
	e, _ := r.For(plugin)
	var umounts []string
	d := &flexvolume.Driver{Plugin: plugin, Exec: e, Mounts: markerChecker{}, Timeout: 42 * time.Second, Log: log, Servers: testServers(t),
		Umount2: func(dir string, flags int) error {
			umounts = append(umounts, fmt.Sprintf("%s %#x", dir, flags))
			return os.Remove(filepath.Join(dir, ".mounted"))
		}}

	// The kubelet's layout: the pod the options name (UID 0f1e) is the
	// one whose volume directory the target is.
	dir := filepath.Join(t.TempDir(), "pods", "0f1e", "volumes", "kubernetes.io~glusterfs", "v")
	s, _, _ := call(t, d, "mount", dir, goodOpts)
	if s.Status != flexvolume.StatusSuccess || !strings.Contains(s.Message, "glusterfs-mountpod-abcde") || !strings.Contains(s.Message, "via cri-exec-sync") {
		t.Fatalf("mount: %+v, want a message naming the mount pod and the path", s)
	}
	// The mount is recorded, so the mount pod can make it again.
	records := filepath.Join(regDir, mountrecord.Dir)
	es, err := mountrecord.List(records)
	if err != nil || len(es) != 1 || es[0].Err != nil {
		t.Fatalf("mount records: %+v, %v; want one", es, err)
	}
	want := mountrecord.Record{Version: mountrecord.Version, Plugin: plugin, Source: "gluster-1.example.com:/gv0", Target: dir, FSType: "glusterfs", Options: []string{"log-level=WARNING"},
		Pod: &mountrecord.Pod{Namespace: "default", Name: "web", UID: "0f1e"}}
	if r := es[0].Record; !reflect.DeepEqual(r, want) {
		t.Fatalf("mount record %+v, want %+v", r, want)
	}
	// The unmount is umount2(2) on the node, no exec (see
	// volume.Mounter.Unmount).
	if s, _, _ := call(t, d, "unmount", dir); s.Status != flexvolume.StatusSuccess || !strings.Contains(s.Message, "on the node (umount2)") {
		t.Fatalf("unmount: %+v, want a Success saying it was umount2 on the node", s)
	}
	if want := []string{fmt.Sprintf("%s %#x", dir, unix.UMOUNT_NOFOLLOW)}; !slices.Equal(umounts, want) {
		t.Fatalf("umount2 calls %q, want %q", umounts, want)
	}
	if es, err := mountrecord.List(records); err != nil || len(es) != 0 {
		t.Fatalf("mount records after unmount: %+v, %v; want none", es, err)
	}
	reqs := rt.ExecRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d ExecSync calls, want 1 (the mount)", len(reqs))
	}
	wantCmd := []string{"mount", "-t", "glusterfs", "-o", "log-level=WARNING", "gluster-1.example.com:/gv0", dir}
	if reqs[0].ContainerId != "ctr1" || !slices.Equal(reqs[0].Cmd, wantCmd) {
		t.Fatalf("ExecSync %s %q, want ctr1 %q", reqs[0].ContainerId, reqs[0].Cmd, wantCmd)
	}
	if reqs[0].Timeout <= 0 || reqs[0].Timeout > 42 {
		t.Fatalf("ExecSync timeout %d s, want the driver's bound (42 s)", reqs[0].Timeout)
	}
	if c := tools.calls(t); len(c) != 0 {
		t.Fatalf("ran on the host: %q", c)
	}

	// The log file: each call, and the decision behind each command.
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var calls, vias []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec struct {
			Msg      string
			Call     string
			Status   string
			Dir      string
			Decision struct{ Where, Via string }
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch rec.Msg {
		case "flexvolume call":
			calls = append(calls, rec.Call+" "+rec.Status+" "+rec.Dir)
		case "exec decision":
			vias = append(vias, rec.Decision.Where+" via "+rec.Decision.Via)
		}
	}
	if want := []string{"mount Success " + dir, "unmount Success " + dir}; !slices.Equal(calls, want) {
		t.Errorf("calls logged %q, want %q", calls, want)
	}
	if len(vias) != 1 || vias[0] != "container ctr1 via cri-exec-sync" {
		t.Errorf("decisions logged %q, want one (the mount's) in container ctr1 via cri-exec-sync", vias)
	}
}

// TestRecordKeepsOnlyTheTargetsPod: a mount whose options name a pod other
// than the one whose volume directory the target is (or whose target is in
// no pod's directory) is recorded without that pod, and the log says so.
func TestRecordKeepsOnlyTheTargetsPod(t *testing.T) {
	rt := crifake.NewFakeRuntime()
	endpoint := rt.Serve(t)
	regDir := filepath.Join(t.TempDir(), "plugin-containers")
	reg := registration.Registration{PodNamespace: "kube-system", PodName: "glusterfs-mountpod-abcde", PodUID: "6f1c1d2e-0000-4000-8000-000000000001", ContainerName: "mount"}
	if err := registration.Write(regDir, plugin, reg); err != nil {
		t.Fatal(err)
	}
	rt.SetContainers(crifake.Container("ctr1", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	rt.SetExec(func(_ context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		if req.Cmd[0] == "mount" {
			os.WriteFile(filepath.Join(req.Cmd[len(req.Cmd)-1], ".mounted"), nil, 0o644)
		}
		return &runtimeapi.ExecSyncResponse{}, nil
	})
	logPath := filepath.Join(t.TempDir(), "driver.log")
	logger, logFile, err := flexvolume.OpenLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	r := mcexec.NewResolver(mcexec.Options{Dir: regDir, Endpoint: endpoint, ExecMode: mcexec.ModeCRI, Logger: logger})
	t.Cleanup(func() { r.Close() })
	e, _ := r.For(plugin)
	d := &flexvolume.Driver{Plugin: plugin, Exec: e, Mounts: markerChecker{}, Log: logger, Servers: testServers(t)}

	root := t.TempDir()
	for _, dir := range []string{
		filepath.Join(root, "pods", "9a9a", "volumes", "kubernetes.io~glusterfs", "v"), // another pod's
		filepath.Join(root, "v"), // no pod's
	} {
		if s, _, _ := call(t, d, "mount", dir, goodOpts); s.Status != flexvolume.StatusSuccess {
			t.Fatalf("mount at %s: %+v", dir, s)
		}
		data, ok, err := registration.ReadTrusted(filepath.Join(regDir, mountrecord.Dir, mountrecord.FileName(dir)), mountrecord.MaxSize)
		if err != nil || !ok {
			t.Fatalf("record of %s: %v, %v", dir, ok, err)
		}
		rec, err := mountrecord.Decode(data)
		if err != nil || rec.Target != dir || rec.Pod != nil {
			t.Errorf("record %+v, %v; want one of %s naming no pod", rec, err, dir)
		}
		log, _ := os.ReadFile(logPath)
		if want := `"record":"` + mountrecord.FileName(dir) + `"`; !strings.Contains(string(log), want) {
			t.Errorf("log %q does not name the record (%s)", log, want)
		}
	}
}

// TestSharedRoot: the shared mounts of a driver are beneath the kubelet's
// directory of the pod volume directory the kubelet passes, and only a
// directory named as the kubelet names one has them.
func TestSharedRoot(t *testing.T) {
	for dir, want := range map[string]string{
		"/var/lib/kubelet/pods/u-1/volumes/mountcontainers.io~glusterfs/data": "/var/lib/kubelet/plugins/mountcontainers.io~glusterfs/shared",
		"/k/pods/u/volumes/a~b/v":                "/k/plugins/a~b/shared",
		"/var/lib/kubelet/pods/u/volumes/ab/v":   "", // no vendor~driver
		"/var/lib/kubelet/pods/u/volume/a~b/v":   "",
		"/var/lib/kubelet/pods/u/volumes/a~b":    "",
		"/var/lib/kubelet/pods/u/volumes/a~b/v/": "",
		"/var/lib/kubelet/pods/u/volumes/a~b/..": "",
		"/var/lib/kubelet/pods/../volumes/a~b/v": "",
		"/pods/u/volumes/a~b/v":                  "",
		"/var/lib/kubelet/data":                  "",
	} {
		got, ok := flexvolume.SharedRoot(dir)
		if got != want || ok != (want != "") {
			t.Errorf("SharedRoot(%q) = %q, %t; want %q", dir, got, ok, want)
		}
	}
}
