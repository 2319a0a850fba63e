package exec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
	testingexec "k8s.io/utils/exec/testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
)

// recorder scripts a FakeExec whose commands succeed (or fail with err) and
// records their command lines.
type recorder struct {
	fake  testingexec.FakeExec
	calls [][]string
}

func newRecorder(n int, err error) *recorder {
	r := &recorder{}
	for range n {
		r.fake.CommandScript = append(r.fake.CommandScript, func(cmd string, args ...string) utilexec.Cmd {
			r.calls = append(r.calls, append([]string{cmd}, args...))
			fc := &testingexec.FakeCmd{CombinedOutputScript: []testingexec.FakeAction{
				func() ([]byte, []byte, error) { return []byte("output"), nil, err },
			}}
			return testingexec.InitFakeCmd(fc, cmd, args...)
		})
	}
	return r
}

func TestMounter(t *testing.T) {
	tests := []struct {
		name      string
		source    string
		fstype    string
		opts      []string
		sensitive []string
		want      [][]string
	}{{
		name: "plain", source: "/dev/loop0", fstype: "ext4", opts: []string{"defaults"},
		want: [][]string{{"mount", "-t", "ext4", "-o", "defaults", "/dev/loop0", "/mnt/t"}},
	}, {
		name: "sensitive", source: "host:/vol", fstype: "glusterfs", opts: []string{"ro"}, sensitive: []string{"password=x"},
		want: [][]string{{"mount", "-t", "glusterfs", "-o", "ro,password=x", "host:/vol", "/mnt/t"}},
	}, {
		name: "bind", source: "/", opts: []string{"bind", "ro"},
		want: [][]string{
			{"mount", "-o", "bind", "/", "/mnt/t"},
			{"mount", "-o", "bind,remount,ro", "/", "/mnt/t"}, // plus the source's flags, checked below
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder(len(tc.want), nil)
			m := NewMounter(&rec.fake, mount.NewFakeMounter(nil))
			if err := m.MountSensitive(tc.source, "/mnt/t", tc.fstype, tc.opts, tc.sensitive); err != nil {
				t.Fatal(err)
			}
			if len(rec.calls) != len(tc.want) {
				t.Fatalf("calls %q, want %q", rec.calls, tc.want)
			}
			for i, want := range tc.want {
				got := rec.calls[i]
				if strings.HasPrefix(want[2], "bind,remount") {
					// The remount adds the source's restrictive flags.
					if !strings.HasPrefix(got[2], want[2]) {
						t.Errorf("call %d: %q, want options starting %q", i, got, want[2])
					}
					got = slices.Clone(got)
					got[2] = want[2]
				}
				if !slices.Equal(got, want) {
					t.Errorf("call %d: %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestMounterErrors(t *testing.T) {
	rec := newRecorder(2, utilexec.CodeExitError{Err: errors.New("exit status 32"), Code: 32})
	m := NewMounter(&rec.fake, mount.NewFakeMounter(nil))
	err := m.MountSensitive("/dev/x", "/mnt/t", "ext4", nil, []string{"secret=1"})
	var ee utilexec.ExitError
	if err == nil || !errors.As(err, &ee) || ee.ExitStatus() != 32 {
		t.Fatalf("Mount error %v", err)
	}
	if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "Output: output") {
		t.Errorf("Mount error leaks or lacks detail: %v", err)
	}
	err = m.Unmount("/mnt/t")
	if err == nil || !slices.Equal(rec.calls[1], []string{"umount", "/mnt/t"}) {
		t.Errorf("Unmount = %v, calls %q", err, rec.calls)
	}
	if m.CanSafelySkipMountPointCheck() {
		t.Error("CanSafelySkipMountPointCheck = true")
	}
}

func TestRestrictiveFlags(t *testing.T) {
	if got := restrictiveFlags(0); got != nil {
		t.Errorf("no flags: %q", got)
	}
	if got := restrictiveFlags(1 | 2 | 4); !slices.Equal(got, []string{"ro", "nodev", "nosuid"}) {
		t.Errorf("ro,nosuid,nodev: %q", got)
	}
}

// TestMounterRecordsFUSEMountsMadeInTheContainer checks the mount records:
// a FUSE mount that ran in the plugin's container is recorded (without its
// options when they hold a secret), a kernel file system or a mount on the
// host is not, and Unmount removes the record.
func TestMounterRecordsFUSEMountsMadeInTheContainer(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"mount", "umount"} {
		if err := os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	e := newEnv(t)
	e.rt.SetExec(crifake.RunLocally)
	records := filepath.Join(e.dir, mountrecord.Dir)
	list := func() map[string]mountrecord.Record {
		t.Helper()
		es, err := mountrecord.List(records)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]mountrecord.Record{}
		for _, en := range es {
			if en.Err != nil {
				t.Fatal(en.Err)
			}
			out[en.Record.Target] = en.Record
		}
		return out
	}
	var recordErrs []error
	newMounter := func() *Mounter {
		m := NewMounter(e.exec(t, Options{ExecMode: ModeCRI}), nil)
		m.RecordError = func(err error) { recordErrs = append(recordErrs, err) }
		return m
	}

	// Not registered: on the host, nothing recorded.
	if err := newMounter().Mount("srv:/vol", "/k/host", "glusterfs", nil); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("a mount on the host was recorded: %+v", got)
	}

	e.running(t, "c1")
	m := newMounter()
	if err := m.Mount("srv:/vol", "/k/a/", "glusterfs", []string{"log-level=WARNING"}); err != nil {
		t.Fatal(err)
	}
	if err := m.MountSensitive("srv:/vol", "/k/b", "fuse.sshfs", []string{"ro"}, []string{"password=hunter2"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Mount("/dev/loop0", "/k/c", "ext4", nil); err != nil {
		t.Fatal(err)
	}
	got := list()
	if r := got["/k/a"]; r.Plugin != testPlugin || r.Source != "srv:/vol" || r.FSType != "glusterfs" || !slices.Equal(r.Options, []string{"log-level=WARNING"}) || r.NotRecoverable != "" {
		t.Errorf("record of /k/a = %+v", r)
	}
	if r := got["/k/b"]; r.NotRecoverable == "" || r.Options != nil {
		t.Errorf("record of /k/b = %+v; want not recoverable, without options", r)
	}
	if _, ok := got["/k/c"]; ok || len(got) != 2 {
		t.Errorf("records = %+v; want /k/a and /k/b only", got)
	}
	data, _ := os.ReadFile(filepath.Join(records, mountrecord.FileName("/k/b")))
	if strings.Contains(string(data), "hunter2") {
		t.Fatalf("a secret was written: %s", data)
	}
	if err := m.Unmount("/k/a"); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 1 {
		t.Errorf("after Unmount: %+v; want only /k/b", got)
	}
	if len(recordErrs) != 0 {
		t.Errorf("record errors: %v", recordErrs)
	}
}

// TestRecordMount checks the one place mount records are written, for the
// Mounter and the Flexvolume driver alike: only a FUSE mount whose command
// this executor placed in the plugin's container is recorded, a pod is
// kept only when the target is in its volume directory, and a wrapper that
// embeds the executor records as the executor does.
func TestRecordMount(t *testing.T) {
	e := newEnv(t)
	e.rt.SetExec(crifake.RunLocally)
	x := e.exec(t, Options{ExecMode: ModeCRI})
	records := filepath.Join(e.dir, mountrecord.Dir)
	if x.RecordsDir() != records {
		t.Fatalf("RecordsDir = %s, want %s", x.RecordsDir(), records)
	}
	read := func(target string) (mountrecord.Record, bool) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(records, mountrecord.FileName(target)))
		if errors.Is(err, os.ErrNotExist) {
			return mountrecord.Record{}, false
		}
		r, err := mountrecord.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		return r, true
	}
	run := func(ex utilexec.Interface) utilexec.Cmd {
		t.Helper()
		cmd := ex.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	onHost := run(x)
	if d, ok := x.DecisionOf(onHost); !ok || !d.OnHost() {
		t.Fatalf("DecisionOf(a host command) = %v, %v", d, ok)
	}
	if dropped, err := x.RecordMount(onHost, MountRecord{Source: "s:/v", Target: "/k/host", FSType: "glusterfs"}); dropped != nil || err != nil {
		t.Fatalf("RecordMount on the host = %v, %v", dropped, err)
	}
	if _, ok := read("/k/host"); ok {
		t.Fatal("a mount on the host was recorded")
	}

	e.running(t, "c1")
	notStarted := x.Command("true")
	if _, ok := x.DecisionOf(notStarted); ok {
		t.Error("DecisionOf a command not started: ok")
	}
	cmd := run(x)
	if d, ok := x.DecisionOf(cmd); !ok || d.ContainerID != "c1" {
		t.Fatalf("DecisionOf = %v, %v; want container c1", d, ok)
	}
	other := e.exec(t, Options{ExecMode: ModeCRI}) // another resolver's
	if _, ok := other.DecisionOf(cmd); ok {
		t.Error("another resolver's executor placed the command")
	}
	if _, ok := x.DecisionOf(testingexec.InitFakeCmd(&testingexec.FakeCmd{}, "true")); ok {
		t.Error("DecisionOf a command of another executor: ok")
	}

	pod := &MountPod{Namespace: "default", Name: "web", UID: "0f1e"}
	kept := "/k/pods/0f1e/volumes/kubernetes.io~glusterfs/v"
	if dropped, err := x.RecordMount(cmd, MountRecord{Source: "s:/v", Target: kept + "/", FSType: "glusterfs", Options: []string{"ro"}, Pod: pod}); dropped != nil || err != nil {
		t.Fatalf("RecordMount = %v, %v", dropped, err)
	}
	want := mountrecord.Record{Version: mountrecord.Version, Plugin: testPlugin, Source: "s:/v", Target: kept, FSType: "glusterfs", Options: []string{"ro"}, Pod: pod}
	if r, ok := read(kept); !ok || !reflect.DeepEqual(r, want) {
		t.Errorf("record %+v (%v), want %+v", r, ok, want)
	}
	dropped, err := x.RecordMount(cmd, MountRecord{Source: "s:/v", Target: "/k/v", FSType: "fuse.sshfs", Options: []string{"ro"}, Sensitive: true, Pod: pod})
	if dropped == nil || err != nil {
		t.Fatalf("RecordMount of a target in no pod's directory = %v, %v; want the pod dropped", dropped, err)
	}
	if r, ok := read("/k/v"); !ok || r.Pod != nil || r.Options != nil || r.NotRecoverable == "" {
		t.Errorf("record %+v (%v); want one naming no pod, without options, not recoverable", r, ok)
	}
	if _, err := x.RecordMount(cmd, MountRecord{Source: "/dev/loop0", Target: "/k/ext4", FSType: "ext4"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := read("/k/ext4"); ok {
		t.Error("a kernel mount was recorded")
	}
	if err := x.ForgetMount(kept); err != nil {
		t.Fatal(err)
	}
	if _, ok := read(kept); ok {
		t.Error("ForgetMount left the record")
	}

	// A wrapper that embeds the executor is one too.
	w := struct{ *Exec }{x}
	m := NewMounter(w, mount.NewFakeMounter(nil))
	if m.records == nil {
		t.Fatal("NewMounter does not keep records through a wrapper of an Exec")
	}
	if d, ok := w.DecisionOf(run(w)); !ok || d.ContainerID != "c1" {
		t.Errorf("DecisionOf through a wrapper = %v, %v", d, ok)
	}
}
