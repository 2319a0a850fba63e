package csi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	csiapi "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/mount-utils"

	"github.com/mountcontainers/mountcontainers/internal/node/csi"
	"github.com/mountcontainers/mountcontainers/internal/node/csi/csitest"
	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/fstest"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
	"github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	plugin = "kubernetes.io/glusterfs"
	server = "public.example"
)

var reg = registration.Registration{PodNamespace: "kube-system", PodName: "glusterfs-mountpod-x", PodUID: "6f1c1d2e-0000-4000-8000-000000000003", ContainerName: "mount"}

// env is a GlusterFS driver whose mount pod is a fake runtime that makes
// real mounts in the test's private mount namespace: "mount -t glusterfs
// SERVER:/VOLUME DIR" binds VOLUME's own tmpfs (made on first use) at DIR,
// umount unmounts. Everything else is the driver's, the resolver's and the
// kernel's.
type env struct {
	base   string
	regDir string
	rt     *critest.FakeRuntime
	d      *csi.Driver
	sock   string

	log syncBuffer // the driver's log (JSON)

	mu      sync.Mutex
	execs   []string // argv[0] of each command run in the "mount pod"
	umounts []string // the directories of the driver's umount2 calls
	// mountFails and umountFails, when set, fail a mount (after it is
	// made, as one whose call timed out) or an umount of dir with their
	// error.
	mountFails, umountFails func(dir string) error
	// other, when set, runs the commands other than mount and umount.
	other func(argv []string) *runtimeapi.ExecSyncResponse
}

// glusterTable is the node's mount table as it would be if the fake's
// mounts were GlusterFS's: a tmpfs named SERVER:/VOLUME is shown as
// fuse.glusterfs, the type mount.glusterfs's mounts have, and root's
// (user_id=0), as a FUSE mount root made.
func glusterTable() ([]mount.MountInfo, error) {
	mis, err := mountinfo.ParseFile("/proc/self/mountinfo")
	for i, mi := range mis {
		if mi.FsType == "tmpfs" && strings.Contains(mi.Source, ":/") {
			mis[i].FsType = "fuse.glusterfs"
			mis[i].SuperOptions = append(mis[i].SuperOptions, "user_id=0", "group_id=0")
		}
	}
	return mis, err
}

// syncBuffer is a bytes.Buffer for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newEnv starts the driver; each of opts changes it before it serves.
func newEnv(t *testing.T, opts ...func(*env)) *env {
	t.Helper()
	base := mountfdtest.Base(t)
	e := &env{base: base, regDir: filepath.Join(base, "plugin-containers"), rt: critest.NewFakeRuntime()}
	e.rt.SetExec(e.exec)
	endpoint := e.rt.Serve(t)
	e.register(t)
	r := mcexec.NewResolver(mcexec.Options{Dir: e.regDir, Endpoint: endpoint, ExecMode: mcexec.ModeCRI})
	t.Cleanup(func() { r.Close() })
	x, err := r.For(plugin)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := fs.ParseAllowedServers([]string{server})
	if err != nil {
		t.Fatal(err)
	}
	e.d = &csi.Driver{
		Name: "glusterfs.mountcontainers.io", Version: "test", FS: glusterfs.FS{}, Exec: x, NodeID: "node-1",
		Servers: servers, Resolver: fstest.Names, Controller: true, WorkDir: filepath.Join(base, "work"),
		Volumes: &volume.Mounter{Plugin: plugin, Exec: x, Timeout: 10 * time.Second, SecretsDir: filepath.Join(base, "secrets"), MountTable: glusterTable, Umount2: e.umount2},
		Log:     slog.New(slog.NewJSONHandler(&e.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(e)
	}
	e.sock = filepath.Join(base, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Serve(ctx, e.sock) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	// Serve listens in its goroutine: the first call must find the socket
	// listening (it exists from bind(2) on, and refuses connections until
	// listen(2)).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if c, err := net.Dial("unix", e.sock); err == nil {
			c.Close()
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the driver's socket %s: %v", e.sock, err)
		}
	}
	return e
}

func (e *env) register(t *testing.T) {
	t.Helper()
	if err := registration.Write(e.regDir, plugin, reg); err != nil {
		t.Fatal(err)
	}
	e.rt.SetContainers(critest.Container("ctr1", reg.PodNamespace, reg.PodName, reg.PodUID, reg.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
}

// umount2 is the driver's umount2(2) (an unmount is the node's, no exec):
// umountFails's error for dir, if any, else the real unmount in the test's
// mount namespace.
func (e *env) umount2(dir string, flags int) error {
	e.mu.Lock()
	e.umounts = append(e.umounts, dir)
	fails := e.umountFails
	e.mu.Unlock()
	if fails != nil {
		if err := fails(dir); err != nil {
			return err
		}
	}
	return unix.Unmount(dir, flags)
}

func (e *env) exec(_ context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	argv := req.Cmd
	e.execs = append(e.execs, argv[0])
	fail := func(err error) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{ExitCode: 32, Stderr: []byte(err.Error())}, nil
	}
	dir := argv[len(argv)-1]
	switch argv[0] {
	case "mount":
		source := argv[len(argv)-2]
		_, vol, ok := strings.Cut(source, ":/")
		if !ok {
			return fail(os.ErrInvalid)
		}
		backing := filepath.Join(e.base, "servers", vol)
		if _, err := os.Stat(backing); os.IsNotExist(err) {
			if err := os.MkdirAll(backing, 0o755); err != nil {
				return fail(err)
			}
			// Named as GlusterFS's mounts are, so that the binds of it
			// show the volume's source (see glusterTable).
			if err := unix.Mount(source, backing, "tmpfs", 0, "size=4m"); err != nil {
				return fail(err)
			}
		}
		if err := unix.Mount(backing, dir, "", unix.MS_BIND, ""); err != nil {
			return fail(err)
		}
		if e.mountFails != nil {
			if err := e.mountFails(dir); err != nil {
				return fail(err)
			}
		}
	case "umount":
		if e.umountFails != nil {
			if err := e.umountFails(dir); err != nil {
				return fail(err)
			}
		}
		flags := 0
		if argv[1] == "-l" {
			flags = unix.MNT_DETACH
		}
		if err := unix.Unmount(dir, flags); err != nil {
			return fail(err)
		}
	default:
		if e.other != nil {
			return e.other(argv), nil
		}
	}
	return &runtimeapi.ExecSyncResponse{}, nil
}

func (e *env) conn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient("unix://"+e.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSanity runs csi-sanity (kubernetes-csi/csi-test) against the driver,
// every test it has for the driver's capabilities: the Identity, Node and
// Controller services with real mounts, made through the exec resolver's
// CRI path.
func TestSanity(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	cfg := sanity.NewTestConfig()
	cfg.Address = e.sock
	cfg.TargetPath = filepath.Join(e.base, "target")
	cfg.StagingPath = filepath.Join(e.base, "staging")
	cfg.TestVolumeParameters = map[string]string{"server": server, "volume": "sanity"}
	cfg.IdempotentCount = 2
	res := csitest.Sanity(t, cfg)
	if res.Passed == 0 || res.NodeLifecycle == 0 {
		t.Errorf("csi-sanity passed %d specs, %d of them the node's lifecycle; want both above 0", res.Passed, res.NodeLifecycle)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.execs) == 0 {
		t.Fatal("no command ran in the mount pod: the sanity run mounted nothing through it")
	}
}

// TestPublishRefusesSymlinkSubdir: a volume's directory that its users (or
// anyone who writes the administrator's volume) replaced with a symbolic
// link is not followed: NodePublish fails and mounts nothing.
func TestPublishRefusesSymlinkSubdir(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	c := e.conn(t)
	ctl, nodes := csiapi.NewControllerClient(c), csiapi.NewNodeClient(c)
	ctx := context.Background()
	vc := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
		AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	vol, err := ctl.CreateVolume(ctx, &csiapi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csiapi.VolumeCapability{vc},
		Parameters: map[string]string{"server": server, "volume": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	id, volCtx := vol.GetVolume().GetVolumeId(), vol.GetVolume().GetVolumeContext()
	// What the external-provisioner and the kubelet add: not options.
	volCtx["storage.kubernetes.io/csiProvisionerIdentity"] = "1764130000000-8081-glusterfs.mountcontainers.io"
	volCtx["csi.storage.k8s.io/pod.name"] = "web-0"
	staging := filepath.Join(e.base, "staging")
	if _, err := nodes.NodeStageVolume(ctx, &csiapi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: vc, VolumeContext: volCtx}); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(e.base, "node")
	if err := os.MkdirAll(node, 0o700); err != nil {
		t.Fatal(err)
	}
	// The volume's directory, as its users see it, becomes a link to a
	// node directory.
	sub := filepath.Join(staging, volCtx[csi.KeySubdir])
	if err := os.Rename(sub, sub+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(node, sub); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(e.base, "target")
	_, err = nodes.NodePublishVolume(ctx, &csiapi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: vc, VolumeContext: volCtx})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("NodePublish through a symbolic link: %v; want FailedPrecondition, refused", err)
	}
	var tst, pst unix.Stat_t
	if err := unix.Stat(target, &tst); err == nil {
		if err := unix.Stat(e.base, &pst); err != nil || tst.Dev != pst.Dev {
			t.Fatalf("something is mounted at the target after the refusal (device %d, base %d)", tst.Dev, pst.Dev)
		}
	}
	// With the directory back, the same call publishes it.
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sub+".moved", sub); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes.NodePublishVolume(ctx, &csiapi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: vc, VolumeContext: volCtx, Readonly: true}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Access(target, unix.W_OK); err != unix.EROFS {
		t.Errorf("the read-only publish is writable: access(W_OK) = %v, want EROFS", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil || sfs.Flags&(unix.ST_NOSUID|unix.ST_NODEV|unix.ST_RDONLY) != unix.ST_NOSUID|unix.ST_NODEV|unix.ST_RDONLY {
		t.Errorf("the published target's flags are %#x (%v); want nosuid, nodev and ro", sfs.Flags, err)
	}
	// A volume ID naming a directory of the administrator's volume that
	// the driver did not make: DeleteVolume leaves it.
	admin := filepath.Join(e.base, "servers", "v", "admin-data")
	if err := os.Mkdir(admin, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csiapi.DeleteVolumeRequest{VolumeId: server + "/v/admin-data"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(admin); err != nil {
		t.Errorf("DeleteVolume of a directory the driver did not make removed it: %v", err)
	}
	for _, call := range []func() error{
		func() error {
			_, err := nodes.NodeUnpublishVolume(ctx, &csiapi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
			return err
		},
		func() error {
			_, err := nodes.NodeUnstageVolume(ctx, &csiapi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
			return err
		},
		func() error {
			_, err := ctl.DeleteVolume(ctx, &csiapi.DeleteVolumeRequest{VolumeId: id})
			return err
		},
	} {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("the target is left after NodeUnpublish: %v", err)
	}
	// The staging mount went with umount2(2) on the node, no exec.
	e.mu.Lock()
	defer e.mu.Unlock()
	if !slices.Contains(e.umounts, staging) || slices.Contains(e.execs, "umount") {
		t.Errorf("umount2 on the node of %v, commands in the mount pod %q; want %s unmounted on the node and no umount in the pod", e.umounts, e.execs, staging)
	}
}

// TestNoMountPodNoMount: without a registered mount pod, Probe says not
// ready and NodeStage fails with Unavailable (the kubelet retries), and
// nothing runs on the node.
func TestNoMountPodNoMount(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	if _, err := registration.RemoveIfOwned(e.regDir, plugin, reg.PodUID); err != nil {
		t.Fatal(err)
	}
	c := e.conn(t)
	ctx := context.Background()
	p, err := csiapi.NewIdentityClient(c).Probe(ctx, &csiapi.ProbeRequest{})
	if err != nil || p.GetReady().GetValue() {
		t.Fatalf("Probe without a mount pod = %v, %v; want not ready", p, err)
	}
	vc := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
		AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	_, err = csiapi.NewNodeClient(c).NodeStageVolume(ctx, &csiapi.NodeStageVolumeRequest{VolumeId: "x", StagingTargetPath: filepath.Join(e.base, "staging"),
		VolumeCapability: vc, VolumeContext: map[string]string{"server": server, "volume": "v"}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), plugin) {
		t.Fatalf("NodeStage without a mount pod: %v; want Unavailable naming %s", err, plugin)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.execs) != 0 {
		t.Fatalf("commands ran: %v", e.execs)
	}
	// Registered again: ready.
	e.register(t)
	if p, err := csiapi.NewIdentityClient(c).Probe(ctx, &csiapi.ProbeRequest{}); err != nil || !p.GetReady().GetValue() {
		t.Fatalf("Probe with the mount pod = %v, %v; want ready", p, err)
	}
}

// TestBadRequestsChangeNothing: a request the driver cannot serve fails
// with the CSI code for it and a message naming what is wrong, runs nothing
// in the mount pod, and quotes no secret in its error or the driver's log.
func TestBadRequestsChangeNothing(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	c := e.conn(t)
	ctl, nodes := csiapi.NewControllerClient(c), csiapi.NewNodeClient(c)
	ctx := context.Background()
	const secret = "s3cr3t-do-not-print"
	mountCap := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
		AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	blockCap := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Block{Block: &csiapi.VolumeCapability_BlockVolume{}},
		AccessMode: mountCap.AccessMode,
	}
	staging, target := filepath.Join(e.base, "staging"), filepath.Join(e.base, "target")
	stage := func(volCtx, secrets map[string]string, vc *csiapi.VolumeCapability) func() error {
		return func() error {
			_, err := nodes.NodeStageVolume(ctx, &csiapi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: staging, VolumeCapability: vc, VolumeContext: volCtx, Secrets: secrets})
			return err
		}
	}
	good := map[string]string{"server": server, "volume": "v"}
	for _, tc := range []struct {
		what string
		call func() error
		code codes.Code
		says string
	}{
		{"a server outside the allow-list", stage(map[string]string{"server": "127.0.0.1", "volume": "v"}, nil, mountCap), codes.InvalidArgument, `"server"`},
		{"a kubelet key in the volume context", stage(map[string]string{"server": server, "volume": "v", "kubernetes.io/secret/key": secret}, nil, mountCap), codes.InvalidArgument, "kubernetes.io/secret/key"},
		{"a mount option off the list", stage(good, nil, &csiapi.VolumeCapability{
			AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{MountFlags: []string{"exec-this"}}},
			AccessMode: mountCap.AccessMode}), codes.InvalidArgument, "mountOptions"},
		{"a block volume", stage(good, nil, blockCap), codes.InvalidArgument, "block"},
		{"a subdir outside the volume", stage(map[string]string{"server": server, "volume": "v", csi.KeySubdir: "../x"}, nil, mountCap), codes.InvalidArgument, csi.KeySubdir},
		{"no staging path", func() error {
			_, err := nodes.NodeStageVolume(ctx, &csiapi.NodeStageVolumeRequest{VolumeId: "v", VolumeCapability: mountCap, VolumeContext: good})
			return err
		}, codes.InvalidArgument, "staging target path"},
		{"a publish before the stage", func() error {
			_, err := nodes.NodePublishVolume(ctx, &csiapi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap, VolumeContext: good})
			return err
		}, codes.FailedPrecondition, "not staged"},
		{"a StorageClass that names the volume's directory", func() error {
			_, err := ctl.CreateVolume(ctx, &csiapi.CreateVolumeRequest{Name: "pvc-x", VolumeCapabilities: []*csiapi.VolumeCapability{mountCap},
				Parameters: map[string]string{"server": server, "volume": "v", csi.KeySubdir: "shared"}})
			return err
		}, codes.InvalidArgument, csi.KeySubdir},
		{"a volume without the administrator's volume", func() error {
			_, err := ctl.CreateVolume(ctx, &csiapi.CreateVolumeRequest{Name: "pvc-x", VolumeCapabilities: []*csiapi.VolumeCapability{mountCap}, Parameters: map[string]string{"server": server}})
			return err
		}, codes.InvalidArgument, `"volume"`},
		{"a capacity limit below what is required", func() error {
			_, err := ctl.CreateVolume(ctx, &csiapi.CreateVolumeRequest{Name: "pvc-x", VolumeCapabilities: []*csiapi.VolumeCapability{mountCap}, Parameters: good,
				CapacityRange: &csiapi.CapacityRange{RequiredBytes: 2 << 30, LimitBytes: 1 << 30}})
			return err
		}, codes.OutOfRange, "capacity range"},
	} {
		err := tc.call()
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: %v; want %s saying %s, without the secret", tc.what, err, tc.code, tc.says)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.execs) != 0 {
		t.Errorf("commands ran in the mount pod for refused requests: %v", e.execs)
	}
	if log := e.log.String(); !strings.Contains(log, "InvalidArgument") || strings.Contains(log, secret) {
		t.Errorf("the driver's log lacks the refusals or holds the secret:\n%s", log)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("a refused publish left %s: %v", target, err)
	}
}

// TestSocketNotTakenOver: a second instance of the driver does not take
// over the socket of one that serves (it fails, saying so, and the first
// keeps serving); a socket left by an instance that is gone is replaced.
func TestSocketNotTakenOver(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.d.Serve(ctx, e.sock); err == nil || !strings.Contains(err.Error(), "served by another process") {
		t.Fatalf("a second Serve on %s: %v; want it refused", e.sock, err)
	}
	if _, err := csiapi.NewIdentityClient(e.conn(t)).GetPluginInfo(ctx, &csiapi.GetPluginInfoRequest{}); err != nil {
		t.Fatalf("the first instance after the second's attempt: %v", err)
	}
	// A socket whose server is too busy to take a connection (its backlog
	// full) is not taken over either.
	busy := filepath.Join(e.base, "busy.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: busy}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 { // one waits in the backlog of 0; a second may too
		if c, err := net.DialTimeout("unix", busy, time.Second); err == nil {
			defer c.Close()
		}
	}
	if err := e.d.Serve(ctx, busy); err == nil || !strings.Contains(err.Error(), "may be served by another process") {
		t.Fatalf("Serve on %s, whose server's backlog is full: %v; want it refused", busy, err)
	}
	if _, err := os.Lstat(busy); err != nil {
		t.Fatalf("the busy server's socket is gone: %v", err)
	}
	// A socket whose server is gone.
	stale := filepath.Join(e.base, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.d.Serve(sctx, stale) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("unix", stale)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Serve did not replace the stale socket %s: %v", stale, err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Serve on the replaced socket: %v", err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the socket is left after Serve ended: %v", err)
	}
}

// hangGuard bounds each call of a test whose file system hangs: the calls
// must return long before it, and a test that waits for it has failed.
const hangGuard = time.Minute

// TestHungDaemonDoesNotHangCalls: a file system whose daemon hangs (statfs
// never returns) makes NodeGetVolumeStats fail with Unavailable once the
// driver's timeout passes, and the calls after it fail at once, without a
// second statfs, until the first one returns; a publish from it fails
// likewise.
func TestHungDaemonDoesNotHangCalls(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	release := make(chan struct{})
	var probes atomic.Int32
	var hung string
	e := newEnv(t, func(e *env) {
		hung = filepath.Join(e.base, "hung")
		e.d.Volumes.Timeout = time.Second
		e.d.Volumes.StatfsFunc = func(p string, st *unix.Statfs_t) error {
			if p == hung {
				probes.Add(1)
				<-release
			}
			return unix.Statfs(p, st)
		}
	})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	mountfdtest.MountTmpfs(t, hung)
	nodes := csiapi.NewNodeClient(e.conn(t))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stats := func() (*csiapi.NodeGetVolumeStatsResponse, error) {
		return nodes.NodeGetVolumeStats(ctx, &csiapi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: hung})
	}

	start := time.Now()
	_, err := stats()
	t.Logf("the first NodeGetVolumeStats returned after %v: %v", time.Since(start), err)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), hung) {
		t.Fatalf("NodeGetVolumeStats of a hung file system: %v; want Unavailable naming %s", err, hung)
	}
	start = time.Now()
	_, err = stats()
	t.Logf("the second NodeGetVolumeStats returned after %v: %v", time.Since(start), err)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), hung) {
		t.Fatalf("NodeGetVolumeStats while a statfs hangs: %v; want Unavailable naming %s", err, hung)
	}
	vc := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
		AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	_, err = nodes.NodePublishVolume(ctx, &csiapi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: hung, TargetPath: filepath.Join(e.base, "target"), VolumeCapability: vc})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), hung) {
		t.Fatalf("NodePublish from a hung staging mount: %v; want Unavailable naming %s", err, hung)
	}
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d statfs calls of %s are waiting; want 1", n, hung)
	}

	// Once the daemon answers, so does the driver.
	unblock()
	for {
		resp, err := stats()
		if err == nil {
			if len(resp.GetUsage()) == 0 {
				t.Fatalf("NodeGetVolumeStats reports no usage: %v", resp)
			}
			break
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("NodeGetVolumeStats after the daemon answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStageRetryRecordsLateMount: a staging mount made although its call
// failed (mount(8) finished after the timeout) is recorded by the
// kubelet's retry of NodeStage, so that the recovery knows it; a mount of
// another source at the staging path is AlreadyExists.
func TestStageRetryRecordsLateMount(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	staging := filepath.Join(e.base, "staging")
	e.mu.Lock()
	e.mountFails = func(dir string) error {
		if dir == staging {
			return errors.New("mount timed out")
		}
		return nil
	}
	e.mu.Unlock()
	nodes := csiapi.NewNodeClient(e.conn(t))
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	vc := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
		AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	stage := func(dir string) error {
		_, err := nodes.NodeStageVolume(ctx, &csiapi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: dir, VolumeCapability: vc,
			VolumeContext: map[string]string{"server": server, "volume": "v"}})
		return err
	}
	records := func() map[string]mountrecord.Record {
		t.Helper()
		es, err := mountrecord.List(e.d.Exec.RecordsDir())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]mountrecord.Record{}
		for _, e := range es {
			if e.Err != nil {
				t.Fatal(e.Err)
			}
			m[e.Record.Target] = e.Record
		}
		return m
	}
	if err := stage(staging); err == nil {
		t.Fatal("NodeStage succeeded although its mount failed")
	}
	if mnt, err := volume.IsMountPoint(staging); err != nil || !mnt {
		t.Fatalf("the late mount is not at %s: %v, %v", staging, mnt, err)
	}
	if r, ok := records()[staging]; ok {
		t.Fatalf("the failed NodeStage recorded %v", r)
	}
	e.mu.Lock()
	e.mountFails = nil
	e.mu.Unlock()
	if err := stage(staging); err != nil {
		t.Fatalf("NodeStage again: %v", err)
	}
	r, ok := records()[staging]
	if !ok || r.Source != server+":/v" || r.FSType != glusterfs.FSType || r.Plugin != plugin {
		t.Fatalf("the retried NodeStage found the mount and recorded %v (%v); want a record of %s:/v", r, ok, server)
	}
	if _, err := nodes.NodeUnstageVolume(ctx, &csiapi.NodeUnstageVolumeRequest{VolumeId: "v", StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if r, ok := records()[staging]; ok {
		t.Fatalf("NodeUnstage left the record %v", r)
	}

	// Something else mounted at a staging path is not adopted.
	other := filepath.Join(e.base, "other")
	if err := os.MkdirAll(other, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(server+":/w", other, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := stage(other); status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), other) {
		t.Fatalf("NodeStage at a mount of another volume: %v; want AlreadyExists naming %s", err, other)
	}
	if r, ok := records()[other]; ok {
		t.Fatalf("a mount of another volume was recorded: %v", r)
	}
}

// workRecords returns the mount records of targets below the controller's
// WorkDir.
func (e *env) workRecords(t *testing.T) []mountrecord.Record {
	t.Helper()
	es, err := mountrecord.List(e.d.Exec.RecordsDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []mountrecord.Record
	for _, r := range es {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if strings.HasPrefix(r.Record.Target, e.d.WorkDir+"/") {
			out = append(out, r.Record)
		}
	}
	return out
}

// TestControllerMountsUnrecorded: the controller's short-lived mounts are
// not recorded, so that one it could not unmount (or that a crash left) is
// not made again by the recovery.
func TestControllerMountsUnrecorded(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	e.mu.Lock()
	e.umountFails = func(dir string) error {
		if strings.HasPrefix(dir, e.d.WorkDir+"/") {
			return errors.New("target is busy")
		}
		return nil
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	vc := &csiapi.VolumeCapability{
		AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
		AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	_, err := csiapi.NewControllerClient(e.conn(t)).CreateVolume(ctx, &csiapi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csiapi.VolumeCapability{vc},
		Parameters: map[string]string{"server": server, "volume": "v"}})
	if status.Code(err) != codes.Internal {
		t.Fatalf("CreateVolume whose unmount fails: %v; want Internal", err)
	}
	left, err := filepath.Glob(filepath.Join(e.d.WorkDir, "v-*"))
	if err != nil || len(left) != 1 {
		t.Fatalf("the mount points left below %s: %v, %v; want the one that could not be unmounted", e.d.WorkDir, left, err)
	}
	if rs := e.workRecords(t); len(rs) != 0 {
		t.Fatalf("the controller's mount is recorded: %v", rs)
	}
	// A controller that starts cleans it up.
	if err := e.d.CleanWorkDir(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(left[0]); !os.IsNotExist(err) {
		t.Fatalf("%s is left after CleanWorkDir: %v", left[0], err)
	}
}

// TestControllerCleansWorkDirAtStart: a controller that starts detaches
// the mounts an earlier run left below WorkDir, removes their records and
// their directories when empty, and removes nothing through a mount nor
// any directory it did not make.
func TestControllerCleansWorkDirAtStart(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	var work, mounted, backing string
	e := newEnv(t, func(e *env) {
		work = e.d.WorkDir
		backing = filepath.Join(e.base, "backing")
		mountfdtest.MountTmpfs(t, backing)
		if err := os.WriteFile(filepath.Join(backing, "data"), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		mounted = filepath.Join(work, "v-123")
		for _, d := range []string{mounted, filepath.Join(work, "v-456"), filepath.Join(work, "v-789"), filepath.Join(work, "keep")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(work, "v-789", "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// Stacked twice, as a retried mount can leave it.
		for range 2 {
			if err := unix.Mount(backing, mounted, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
		}
		for _, target := range []string{mounted, filepath.Join(work, "v-gone")} {
			if err := mountrecord.Write(e.d.Exec.RecordsDir(), mountrecord.Record{Plugin: plugin, Source: server + ":/v", Target: target, FSType: glusterfs.FSType}); err != nil {
				t.Fatal(err)
			}
		}
	})
	for _, gone := range []string{mounted, filepath.Join(work, "v-456")} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is left after the controller started: %v", gone, err)
		}
	}
	for _, kept := range []string{filepath.Join(work, "v-789", "f"), filepath.Join(work, "keep"), filepath.Join(backing, "data")} {
		if _, err := os.Lstat(kept); err != nil {
			t.Errorf("%s is removed: %v", kept, err)
		}
	}
	if rs := e.workRecords(t); len(rs) != 0 {
		t.Errorf("records of the controller's mounts are left: %v", rs)
	}
}

// TestSocketOwnerAndMode: the socket is root's alone (0600), or root's and
// SocketGroup's (0660) for a sidecar that runs as that group, not as root.
func TestSocketOwnerAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the socket is given to root and a group")
	}
	for _, group := range []int{0, 4242} {
		t.Run(fmt.Sprint("group ", group), func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "csi.sock")
			d := &csi.Driver{Name: "test.mountcontainers.io", SocketGroup: group}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- d.Serve(ctx, sock) }()
			wantMode, wantGID := uint32(0o600), uint32(0)
			if group > 0 {
				wantMode, wantGID = 0o660, uint32(group)
			}
			// The socket takes calls from its listen on, a moment before
			// Serve gives it its owner and mode (root's alone meanwhile,
			// by the umask): wait for them, then for a call.
			var st unix.Stat_t
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
				err := unix.Lstat(sock, &st)
				if err == nil && st.Mode&0o777 == wantMode && st.Uid == 0 && st.Gid == wantGID {
					if c, err := net.Dial("unix", sock); err == nil {
						c.Close()
						break
					}
				}
				if time.Now().After(deadline) { // a hang guard
					t.Fatalf("socket %s: mode %04o, owner %d:%d (%v) after a minute; want %04o, 0:%d, serving", sock, st.Mode&0o777, st.Uid, st.Gid, err, wantMode, wantGID)
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

// TestCreateVolumeLookupDoesNotHoldTheCall: CreateVolume's directory work
// on the administrator's volume (held here, as a server that answers
// statfs but not lookups would hold it) does not hold the call past its
// context; the volume's next call is Aborted while the work still runs;
// once it ends, the volume is unmounted, the lock given back, and a retry
// finds the directory made. No clock decides: the contexts are ended by
// the test.
func TestCreateVolumeLookupDoesNotHoldTheCall(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	e := newEnv(t)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	csi.HoldCreateDir(t, func() {
		once.Do(func() {
			close(started)
			<-release
		})
	})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	ctl := csiapi.NewControllerClient(e.conn(t))
	req := &csiapi.CreateVolumeRequest{Name: "pvc-1", Parameters: map[string]string{"server": server, "volume": "v"},
		VolumeCapabilities: []*csiapi.VolumeCapability{{
			AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
			AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		}}}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := ctl.CreateVolume(ctx, req)
		first <- err
	}()
	select {
	case <-started:
	case err := <-first:
		t.Fatalf("CreateVolume ended before its directory work: %v", err)
	case <-time.After(hangGuard):
		t.Fatal("CreateVolume did not reach its directory work within a minute")
	}
	cancel()
	select {
	case err := <-first:
		if c := status.Code(err); c != codes.Canceled && c != codes.DeadlineExceeded {
			t.Fatalf("CreateVolume whose directory work hangs, its context ended: %v; want Canceled or DeadlineExceeded", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("CreateVolume whose directory work hangs, its context ended: no answer within a minute")
	}
	// The driver's own answer (the client saw only its cancellation) says
	// why.
	for deadline := time.Now().Add(hangGuard); !strings.Contains(e.log.String(), "does not answer"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the driver logged no answer to the held CreateVolume saying its server does not answer:\n%s", e.log.String())
		}
	}
	// The volume's next call waits for the lock only as long as its
	// context.
	ctx2, cancel2 := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, err := ctl.DeleteVolume(ctx2, &csiapi.DeleteVolumeRequest{VolumeId: server + "/v/pvc-1"})
		second <- err
	}()
	cancel2()
	select {
	case err := <-second:
		if c := status.Code(err); c != codes.Aborted && c != codes.Canceled {
			t.Fatalf("DeleteVolume while CreateVolume's work hangs: %v; want Aborted (or Canceled)", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("DeleteVolume of the volume while CreateVolume's work hangs: no answer within a minute")
	}
	if left, _ := filepath.Glob(filepath.Join(e.d.WorkDir, "v-*")); len(left) != 1 {
		t.Fatalf("mount points below %s while the work hangs: %v; want the one in use", e.d.WorkDir, left)
	}
	// The work ends: the volume is unmounted, and a retry finds the
	// directory made.
	released = true
	close(release)
	var vol *csiapi.CreateVolumeResponse
	var err error
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(10 * time.Millisecond) {
		vol, err = ctl.CreateVolume(context.Background(), req)
		if status.Code(err) != codes.Aborted || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || vol.GetVolume().GetVolumeContext()["subdir"] != "pvc-1" {
		t.Fatalf("CreateVolume's retry after the work ended: %v, %v; want the volume pvc-1", vol, err)
	}
	if left, _ := filepath.Glob(filepath.Join(e.d.WorkDir, "v-*")); len(left) != 0 {
		t.Errorf("mount points left below %s: %v", e.d.WorkDir, left)
	}
}
