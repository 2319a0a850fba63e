package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// Driver serves the CSI Identity, Node and (when Controller is set)
// Controller services of one file system.
type Driver struct {
	// Name is the driver's name, DNS style, such as
	// glusterfs.mountcontainers.io.
	Name string
	// Version is the driver's version as GetPluginInfo reports it.
	Version string
	// FS is the file system the driver mounts.
	FS fs.Filesystem
	// Exec is the executor of the mount pod's plugin (such as
	// kubernetes.io/glusterfs): every mount(8) runs through it (an
	// unmount is umount2(2), [volume.Mounter.Unmount]).
	Exec *mcexec.Exec
	// Volumes makes and removes the staging mounts through Exec.
	Volumes *volume.Mounter
	// NodeID is the node's name, as NodeGetInfo reports it.
	NodeID string
	// Servers decides which servers a volume may name.
	Servers fs.ServerPolicy
	// Resolver looks up server names on the node; default
	// net.DefaultResolver.
	Resolver fs.Resolver
	// Controller, when set, serves the Controller service: CreateVolume
	// and DeleteVolume mount the administrator's volume named by the
	// StorageClass below WorkDir, through the same mount pod.
	Controller bool
	// WorkDir holds the controller's short-lived mounts; it must be a
	// directory the mount pod sees at the same path (under the kubelet's
	// directory, mounted Bidirectional in the mount pod).
	WorkDir string
	// Log receives one record per call; nil discards them.
	Log *slog.Logger
	// SocketGroup, when above 0, is the group that may connect to the
	// socket as well as root (root:SocketGroup, mode 0660): a sidecar such
	// as the external-provisioner then runs as a user of that group, not
	// as root. Otherwise only root may connect (mode 0600).
	SocketGroup int

	locks keyedMutex
}

// Serve serves the driver's services on the unix socket at path until ctx
// ends; a socket left by an earlier run is replaced.
// A controller first cleans what an earlier run left below WorkDir (see
// [Driver.CleanWorkDir]).
func (d *Driver) Serve(ctx context.Context, path string) error {
	var prepare func()
	if d.Controller {
		prepare = func() {
			if err := d.CleanWorkDir(); err != nil && d.Log != nil {
				d.Log.WarnContext(ctx, "the controller's work directory is not clean", "dir", d.WorkDir, "err", err)
			}
		}
	}
	return serveUnix(ctx, path, d.NewServer(), prepare, d.SocketGroup)
}

// serveUnix serves srv on a new unix socket at path until ctx ends, and
// removes the socket then, if it is still this one. A socket left there by
// an earlier run is replaced; one that answers (another instance serving)
// and anything else that is not a socket are refused. prepare, when set,
// runs once no other instance serves there and before any call is taken.
func serveUnix(ctx context.Context, path string, srv *grpc.Server, prepare func(), group int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("create the directory of %s: %w", path, err)
	}
	if err := removeSocket(path); err != nil {
		return err
	}
	if prepare != nil {
		prepare()
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	// Removed below only if it is still this socket: an instance that took
	// the path over keeps its own.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	mine, err := os.Lstat(path)
	if err == nil {
		err = restrictSocket(path, mine, group)
	}
	if err != nil {
		l.Close()
		return err
	}
	defer func() {
		if now, err := os.Lstat(path); err == nil && os.SameFile(mine, now) {
			os.Remove(path)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// restrictSocket gives the socket at path, which Lstat reported as mine,
// to root and group (mode 0660), or to root alone (0600) when group is not
// above 0: connecting needs write permission on the socket. The path is
// checked to be that socket still, and changed without following a link.
func restrictSocket(path string, mine os.FileInfo, group int) error {
	if mine.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s is not the socket just made (%s)", path, mine.Mode().Type())
	}
	mode, gid := os.FileMode(0o600), -1
	if group > 0 {
		mode, gid = 0o660, group
	}
	if err := unix.Fchownat(unix.AT_FDCWD, path, 0, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("give %s to root and group %d: %w", path, group, err)
	}
	if now, err := os.Lstat(path); err != nil || !os.SameFile(mine, now) {
		return fmt.Errorf("%s changed while it was given its owner", path)
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("set the mode of %s: %w", path, err)
	}
	return nil
}

// NewServer returns a gRPC server with the driver's services registered.
func (d *Driver) NewServer() *grpc.Server {
	srv := grpc.NewServer(grpc.UnaryInterceptor(d.logCall))
	csi.RegisterIdentityServer(srv, identity{d: d})
	csi.RegisterNodeServer(srv, node{d: d})
	if d.Controller {
		csi.RegisterControllerServer(srv, controller{d: d})
	}
	return srv
}

// removeSocket removes a socket left at path by an instance that is gone
// (nobody listens: the connection is refused); a socket that still answers,
// one that does not say (a full backlog: a busy instance), and anything
// that is not a socket, is an error and stays.
func removeSocket(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode().Type() != os.ModeSocket:
		return fmt.Errorf("%s exists and is not a socket (%v): not removed", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, socketProbeTimeout)
	switch {
	case err == nil:
		c.Close()
		return fmt.Errorf("%s is served by another process (another instance of the driver?): not taken over", path)
	case !errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s may be served by another process (another instance of the driver?), not taken over: %w", path, err)
	}
	return os.Remove(path)
}

// socketProbeTimeout bounds removeSocket's connection to a socket found
// at the driver's path.
const socketProbeTimeout = 5 * time.Second

// logCall logs each call: its method, code and time, never its request
// (secrets travel in requests).
func (d *Driver) logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := d.safe(ctx, req, handler)
	if d.Log != nil {
		attrs := []any{"method", info.FullMethod, "code", status.Code(err).String(), "tookMs", float64(time.Since(start).Microseconds()) / 1000}
		if v, ok := req.(interface{ GetVolumeId() string }); ok && v.GetVolumeId() != "" {
			attrs = append(attrs, "volume", v.GetVolumeId())
		}
		if err != nil {
			attrs = append(attrs, "err", status.Convert(err).Message())
		}
		d.Log.InfoContext(ctx, "csi call", attrs...)
	}
	return resp, err
}

// safe turns a panic of a handler into an Internal error.
func (d *Driver) safe(ctx context.Context, req any, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, status.Errorf(codes.Internal, "internal error: %v", r)
		}
	}()
	return handler(ctx, req)
}

// live fails with Unavailable unless the plugin's mount pod is registered
// and live: a CSI volume is mounted only through it, never on the node.
func (d *Driver) live(ctx context.Context) error {
	dec, err := d.Exec.Resolve(ctx)
	if err != nil {
		return status.Errorf(codes.Unavailable, "the mount pod of %s cannot be reached: %v", d.Exec.Plugin(), err)
	}
	if dec.OnHost() {
		return status.Errorf(codes.Unavailable, "no mount pod of %s on node %s (%s): %s mounts only through it",
			d.Exec.Plugin(), d.NodeID, dec.Reason, d.Name)
	}
	return nil
}

func (d *Driver) env() fs.Env { return fs.Env{Servers: d.Servers, Resolver: d.Resolver} }

// keyedMutex serialises the calls on one volume or path.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	held chan struct{} // holds a value while locked
	refs int
}

// lock locks key and returns its unlock; it fails with ctx's error when
// ctx ends first (a call whose lookup hangs holds its lock until the
// lookup ends).
func (k *keyedMutex) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{held: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// lockPaths locks paths in turn for the call op and returns the unlock
// of all; when the call's context ends first, it fails with Aborted (the
// CSI spec's "an operation is pending for the volume") naming the path.
func (d *Driver) lockPaths(ctx context.Context, op string, paths ...string) (func(), error) {
	var unlocks []func()
	unlock := func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
	for _, p := range paths {
		u, err := d.locks.lock(ctx, p)
		if err != nil {
			unlock()
			return nil, status.Errorf(codes.Aborted, "%s: another call on %s is still under way: %v", op, p, err)
		}
		unlocks = append(unlocks, u)
	}
	return unlock, nil
}
