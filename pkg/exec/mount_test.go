package exec

import (
	"errors"
	"os"
	"path/filepath"
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
