package flexvolume_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	cephPlugin = "kubernetes.io/cephfs"
	cephKey    = fstest.CephKey
)

var cephKeyOpt = fstest.CephKeyOption

func cephOpts(extra string) string { return fstest.CephOptions(extra) }

func cephServers(*testing.T) fs.ServerPolicy {
	return fstest.Must(fs.ParseAllowedServers(fstest.CephAllowed))
}

func decode(t *testing.T, opts string) map[string]string {
	t.Helper()
	var vals map[string]string
	if err := json.Unmarshal([]byte(opts), &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

// cephDriver is a CephFS driver whose mount pod is registered and served
// by a fake CRI runtime that acts like the mount pod: it records each
// command and, for mount, what the key file held and its mode at that
// moment.
type cephDriver struct {
	*flexvolume.Driver
	rt      *crifake.FakeRuntime
	regDir  string
	secrets string
	mu      sync.Mutex
	seen    []string // key file content and mode, per mount
	failing bool
	failOut string // what a failing mount prints; default a permission error
}

func newCephDriver(t *testing.T) *cephDriver {
	t.Helper()
	newFakeTools(t) // nothing may run on the host
	c := &cephDriver{rt: crifake.NewFakeRuntime(), regDir: filepath.Join(t.TempDir(), "plugin-containers"), secrets: filepath.Join(t.TempDir(), "secrets")}
	if err := os.Mkdir(c.secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	endpoint := c.rt.Serve(t)
	reg := registration.Registration{PodNamespace: "kube-system", PodName: "cephfs-mountpod-x", PodUID: "6f1c1d2e-0000-4000-8000-000000000002", ContainerName: "mount"}
	if err := registration.Write(c.regDir, cephPlugin, reg); err != nil {
		t.Fatal(err)
	}
	c.rt.SetContainers(crifake.Container("ctr1", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	c.rt.SetExec(func(_ context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		dir := req.Cmd[len(req.Cmd)-1]
		switch req.Cmd[0] {
		case "mount":
			for _, o := range strings.Split(req.Cmd[4], ",") {
				if p, ok := strings.CutPrefix(o, "ceph.keyfile="); ok {
					data, err := os.ReadFile(p)
					fi, serr := os.Stat(p)
					if err != nil || serr != nil {
						c.seen = append(c.seen, "unreadable")
					} else {
						c.seen = append(c.seen, string(data)+" "+fi.Mode().Perm().String())
					}
				}
			}
			if c.failing {
				return &runtimeapi.ExecSyncResponse{ExitCode: 1, Stderr: []byte(cmp.Or(c.failOut, "ceph-fuse: permission denied"))}, nil
			}
			os.WriteFile(filepath.Join(dir, ".mounted"), nil, 0o644)
		case "umount":
			os.Remove(filepath.Join(dir, ".mounted"))
		}
		return &runtimeapi.ExecSyncResponse{}, nil
	})
	r := mcexec.NewResolver(mcexec.Options{Dir: c.regDir, Endpoint: endpoint, ExecMode: mcexec.ModeCRI})
	t.Cleanup(func() { r.Close() })
	e, _ := r.For(cephPlugin)
	c.Driver = &flexvolume.Driver{FS: cephfs.FS{}, Plugin: cephPlugin, Exec: e, Mounts: markerChecker{}, Timeout: 10 * time.Second, Servers: cephServers(t), SecretsDir: c.secrets,
		// t.TempDir is on a disk here; TestCephFSSecretsDirRefused runs the real check.
		SecretsInMemory: func(string) error { return nil },
		Umount2:         func(dir string, _ int) error { return os.Remove(filepath.Join(dir, ".mounted")) }}
	return c
}

// TestCephFSSecretFile: the key reaches the mount pod in a root-only file
// named by ceph.keyfile, never in an argv or a record, and the file goes
// away when the volume is unmounted or the mount fails.
func TestCephFSSecretFile(t *testing.T) {
	c := newCephDriver(t)
	dir := filepath.Join(t.TempDir(), "pods", "0f1e", "volumes", "kubernetes.io~cephfs", "v") // the kubelet's layout
	keyFile := volume.SecretFile(c.secrets, dir)

	s, _, _ := call(t, c.Driver, "mount", dir, cephOpts(""))
	if s.Status != flexvolume.StatusSuccess || !strings.Contains(s.Message, "CephFS cephfs:/volumes/web as client.web") || !strings.Contains(s.Message, "cephfs-mountpod-x") {
		t.Fatalf("mount: %+v", s)
	}
	if want := []string{cephKey + " -rw-------"}; !slices.Equal(c.seen, want) {
		t.Fatalf("key file at mount time: %q, want %q", c.seen, want)
	}
	reqs := c.rt.ExecRequests()
	wantCmd := []string{"mount", "-t", "fuse.ceph", "-o", "ceph.conf=/dev/null,ceph.id=web,ceph.mon_host=10.0.0.7:6789;mon-b.example:6789,ceph.client_fs=cephfs,ceph.client_mountpoint=/volumes/web,ceph.keyfile=" + keyFile, "none", dir}
	if len(reqs) != 1 || !slices.Equal(reqs[0].Cmd, wantCmd) {
		t.Fatalf("ExecSync %q, want %q", reqs, wantCmd)
	}
	es, err := mountrecord.List(filepath.Join(c.regDir, mountrecord.Dir))
	if err != nil || len(es) != 1 {
		t.Fatalf("records %+v, %v", es, err)
	}
	want := mountrecord.Record{Version: mountrecord.Version, Plugin: cephPlugin, Source: "none", Target: dir, FSType: "fuse.ceph", Options: strings.Split(wantCmd[4], ","),
		Pod: &mountrecord.Pod{Namespace: "default", Name: "web", UID: "0f1e"}}
	if !reflect.DeepEqual(es[0].Record, want) {
		t.Fatalf("record %+v, want %+v", es[0].Record, want)
	}
	raw, _ := os.ReadFile(filepath.Join(c.regDir, mountrecord.Dir, mountrecord.FileName(dir)))
	if strings.Contains(string(raw), cephKey[:20]) {
		t.Fatalf("the record holds the key: %s", raw)
	}

	if s, _, _ := call(t, c.Driver, "unmount", dir); s.Status != flexvolume.StatusSuccess {
		t.Fatalf("unmount: %+v", s)
	}
	if _, err := os.Lstat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key file after unmount: %v", err)
	}

	// A mount that fails leaves no key file.
	c.failing = true
	if s, _, _ := call(t, c.Driver, "mount", dir, cephOpts("")); s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, "permission denied") {
		t.Fatalf("failing mount: %+v", s)
	}
	if len(c.seen) != 2 || c.seen[1] != c.seen[0] {
		t.Fatalf("key file at the failing mount: %q", c.seen)
	}
	if _, err := os.Lstat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key file after a failed mount: %v", err)
	}
	if ents, _ := os.ReadDir(c.secrets); len(ents) != 0 {
		t.Fatalf("left in the secrets directory: %v", ents)
	}
}

// TestCephFSSecretsDirRefused: a secrets directory that could put the key
// on a disk, or that others control, refuses the mount before anything runs.
func TestCephFSSecretsDirRefused(t *testing.T) {
	c := newCephDriver(t)
	dir := filepath.Join(t.TempDir(), "v")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(c.secrets, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	for secrets, says := range map[string]string{
		filepath.Join(c.secrets, "missing"): "does not exist",
		link:                                "not a directory",
		open:                                "writable by group or others",
	} {
		c.SecretsDir = secrets
		s, _, _ := call(t, c.Driver, "mount", dir, cephOpts(""))
		if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, says) {
			t.Errorf("secrets dir %s: %+v, want a failure saying %q", secrets, s, says)
		}
	}
	// Not on a tmpfs: the real check.
	c.SecretsInMemory = nil
	c.SecretsDir = c.secrets
	s, _, _ := call(t, c.Driver, "mount", dir, cephOpts(""))
	if volume.InMemory(c.secrets) == nil {
		t.Logf("%s is on a tmpfs here: the mount may go ahead", c.secrets)
		if s.Status != flexvolume.StatusSuccess {
			t.Fatalf("mount with the secrets on a tmpfs: %+v", s)
		}
	} else if s.Status != flexvolume.StatusFailure || !strings.Contains(s.Message, "not on a tmpfs") {
		t.Fatalf("secrets dir on a disk: %+v, want a failure saying not on a tmpfs", s)
	}
	if got := len(c.rt.ExecRequests()); got > 0 && volume.InMemory(c.secrets) != nil {
		t.Fatalf("%d commands ran for refused mounts", got)
	}
}
