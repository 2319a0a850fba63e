package exec

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
	testingexec "k8s.io/utils/exec/testing"
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
