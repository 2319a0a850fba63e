package registrar

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

func TestCheck(t *testing.T) {
	bin := t.TempDir()
	writeExecutable(t, filepath.Join(bin, "rbd"))
	tests := []struct {
		name    string
		prepare func(t *testing.T, cfg *Config)
		want    []string // prefixes, one per expected problem; {dir} is the directory
	}{
		{"ready", func(t *testing.T, cfg *Config) {
			writeReg(t, cfg.Dir, rbd, thisPod)
			writeReg(t, cfg.Dir, gluster, thisPod)
		}, nil},
		{"nothing registered", func(t *testing.T, cfg *Config) {}, []string{
			"plugin kubernetes.io/glusterfs: not registered",
			"plugin kubernetes.io/rbd: not registered",
		}},
		{"one taken by another pod", func(t *testing.T, cfg *Config) {
			writeReg(t, cfg.Dir, rbd, newPod)
			writeReg(t, cfg.Dir, gluster, thisPod)
		}, []string{"plugin kubernetes.io/rbd: registration " + "{dir}/kubernetes.io~rbd.json" + " names pod kube-system/mount-fghij (uid 3f1c1a0e-0000-4000-8000-000000000002, container mount), not this pod kube-system/mount-abcde"}},
		{"garbage", func(t *testing.T, cfg *Config) {
			writeReg(t, cfg.Dir, rbd, thisPod)
			mustWrite(t, filepath.Join(cfg.Dir, "kubernetes.io~glusterfs.json"), "[]", 0o644)
		}, []string{"plugin kubernetes.io/glusterfs: registration " + "{dir}/kubernetes.io~glusterfs.json" + ": malformed JSON"}},
		{"missing tool", func(t *testing.T, cfg *Config) {
			cfg.RequiredTools = []string{"rbd", "mkfs.xfs"}
			writeReg(t, cfg.Dir, rbd, thisPod)
			writeReg(t, cfg.Dir, gluster, thisPod)
		}, []string{"missing required tools: mkfs.xfs"}},
		{"another plugin's tools", func(t *testing.T, cfg *Config) {
			// ceph-fuse is the cephfs plugin's alone: not required of a
			// pod that serves rbd and glusterfs.
			cfg.RequiredTools = []string{"rbd", "ceph-fuse", "mount.fuse.ceph", "mkfs.xfs"}
			writeReg(t, cfg.Dir, rbd, thisPod)
			writeReg(t, cfg.Dir, gluster, thisPod)
		}, []string{"missing required tools: mkfs.xfs ("}},
		{"a served plugin's tools", func(t *testing.T, cfg *Config) {
			cfg.Plugins = append(cfg.Plugins, "kubernetes.io/cephfs")
			cfg.RequiredTools = []string{"rbd", "ceph-fuse", "mount.fuse.ceph", "mount.glusterfs"}
			writeReg(t, cfg.Dir, rbd, thisPod)
			writeReg(t, cfg.Dir, gluster, thisPod)
			writeReg(t, cfg.Dir, "kubernetes.io/cephfs", thisPod)
		}, []string{"missing required tools: ceph-fuse, mount.fuse.ceph, mount.glusterfs ("}},
		{"bad configuration", func(t *testing.T, cfg *Config) { cfg.Pod.PodName = "" }, []string{"invalid configuration: pod: podName is missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, &syncBuffer{})
			cfg.SearchPath = bin
			tt.prepare(t, &cfg)
			got := Check(cfg)
			if len(got) != len(tt.want) {
				t.Fatalf("Check() = %q, want %d problems like %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				want := strings.ReplaceAll(tt.want[i], "{dir}", cfg.Dir)
				if !strings.HasPrefix(got[i], want) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got[i], want)
				}
			}
		})
	}
}

func writeReg(t *testing.T, dir, plugin string, r registration.Registration) {
	t.Helper()
	if err := registration.Write(dir, plugin, r); err != nil {
		t.Fatal(err)
	}
}

// TestCheckDeletedDirectory opens the registration directory, deletes it and
// checks through /proc/self/fd, which reaches the deleted directory as a
// stale hostPath mount in a container would.
func TestCheckDeletedDirectory(t *testing.T) {
	cfg := testConfig(t, &syncBuffer{})
	writeReg(t, cfg.Dir, rbd, thisPod)
	writeReg(t, cfg.Dir, gluster, thisPod)
	d, err := os.Open(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.RemoveAll(cfg.Dir); err != nil {
		t.Fatal(err)
	}
	cfg.Dir = "/proc/self/fd/" + strconv.Itoa(int(d.Fd()))
	if _, err := os.Stat(cfg.Dir); err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	problems := Check(cfg)
	if len(problems) == 0 || !strings.Contains(problems[0], "has been deleted on the node") {
		t.Errorf("Check() = %q, want the deleted directory reported first", problems)
	}
}
