package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// The GlusterFS controller provisions a volume as a directory of an
// administrator's GlusterFS volume, named in the StorageClass's
// parameters (server or servers, volume, mountOptions): CreateVolume
// mounts that volume through the mount pod below [Driver].WorkDir, makes
// the directory and records the capacity asked for (GlusterFS has no
// quota per directory: the capacity is a record, not a limit), and
// unmounts it. The volume's ID names the servers, the volume and the
// directory, so that DeleteVolume needs nothing else.
//
// The metadata directory holds one file per volume, its capacity: the
// volume's directory is its users' to write, the metadata is not on any
// path they see.
const metadataDir = ".mountcontainers-csi"

// dirNameRE is a directory name that is a volume's name as it is.
var dirNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// dirName returns the directory of the volume the CO names name: the name
// itself when it is short and plain, else "v-" and its hash.
func dirName(name string) string {
	if dirNameRE.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "v-" + hex.EncodeToString(sum[:16])
}

// glusterVolumeID is what a dynamically provisioned GlusterFS volume's ID
// names: SERVERS/VOLUME/DIR.
type glusterVolumeID struct {
	servers, volume, dir string
}

func (id glusterVolumeID) String() string { return id.servers + "/" + id.volume + "/" + id.dir }

// params are the options that mount the administrator's volume.
func (id glusterVolumeID) params() map[string]string {
	if strings.Contains(id.servers, ",") {
		return map[string]string{glusterfs.KeyServers: id.servers, glusterfs.KeyVolume: id.volume}
	}
	return map[string]string{glusterfs.KeyServer: id.servers, glusterfs.KeyVolume: id.volume}
}

// parseGlusterVolumeID parses an ID of [glusterVolumeID.String]; ok is
// false for anything else.
func parseGlusterVolumeID(s string) (glusterVolumeID, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || !dirNameRE.MatchString(parts[2]) {
		return glusterVolumeID{}, false
	}
	return glusterVolumeID{servers: parts[0], volume: parts[1], dir: parts[2]}, true
}

type controller struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (c controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

func (c controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d := c.d
	if err := required("CreateVolume", "name", req.GetName()); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "CreateVolume: volume capabilities missing")
	}
	for _, vc := range req.GetVolumeCapabilities() {
		if err := d.checkCapability(vc); err != nil {
			return nil, err
		}
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume: %s makes empty volumes only (no snapshots or clones)", d.Name)
	}
	capacity := req.GetCapacityRange().GetRequiredBytes()
	if limit := req.GetCapacityRange().GetLimitBytes(); limit < 0 || capacity < 0 || (limit > 0 && limit < capacity) {
		return nil, status.Errorf(codes.OutOfRange, "CreateVolume: capacity range %d to %d bytes", capacity, limit)
	}
	switch d.FS.Name() {
	case glusterfs.FSType:
	case cephfs.FSType:
		return d.createCephVolume(ctx, req, capacity)
	default:
		return nil, status.Errorf(codes.Unimplemented, "CreateVolume: %s provisions no %s volumes", d.Name, d.FS.Name())
	}
	params := req.GetParameters()
	for k := range params {
		if k == KeySubdir || strings.HasPrefix(k, "kubernetes.io/") || coKey(k) {
			return nil, status.Errorf(codes.InvalidArgument, "CreateVolume: StorageClass parameter %q is the driver's or the node's, not an option", k)
		}
	}
	id, err := glusterIDOf(params, dirName(req.GetName()))
	if err != nil {
		return nil, err
	}
	unlock, err := d.lockPaths(ctx, "CreateVolume", "volume "+id.String())
	if err != nil {
		return nil, err
	}
	err = d.withVolume(ctx, "CreateVolume", params, unlock, func(_ context.Context, root *os.Root) error {
		return createDirOf(root, id.dir, capacity)
	})
	if err != nil {
		return nil, err
	}
	volCtx := map[string]string{}
	for k, v := range params {
		volCtx[k] = v
	}
	volCtx[KeySubdir] = id.dir
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id.String(), CapacityBytes: capacity, VolumeContext: volCtx}}, nil
}

// glusterIDOf returns the ID of the volume dir on the administrator's
// volume that params name (checked again, with the allow-list, when it
// is mounted).
func glusterIDOf(params map[string]string, dir string) (glusterVolumeID, error) {
	servers := params[glusterfs.KeyServer]
	if s, ok := params[glusterfs.KeyServers]; ok {
		servers = s
	}
	id := glusterVolumeID{servers: servers, volume: params[glusterfs.KeyVolume], dir: dir}
	if id.servers == "" || id.volume == "" || strings.ContainsAny(id.servers+id.volume, "/ ") {
		return id, status.Errorf(codes.InvalidArgument, "CreateVolume: parameters %q (or %q) and %q name the administrator's GlusterFS volume", glusterfs.KeyServer, glusterfs.KeyServers, glusterfs.KeyVolume)
	}
	return id, nil
}

// makeShared makes the directory name of root, which other controllers
// may be making at the same moment through mounts of their own. A
// directory that is there already will do; mkdir can say it exists while
// this mount's lookup does not see it yet (seen through two GlusterFS
// clients at once), so the lookup is asked again a few times, over about a
// second, before the error is returned. Anything else but a directory
// there is an error.
func makeShared(root *os.Root, name string) error {
	const tries, pause = 10, 100 * time.Millisecond
	var err error
	for try := range tries {
		if try > 0 {
			time.Sleep(pause)
		}
		if err = root.Mkdir(name, 0o700); err == nil || !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, serr := lstatShared(root, name)
		switch {
		case serr == nil && fi.IsDir():
			return nil
		case serr == nil:
			return fmt.Errorf("%s is a %s, not a directory", name, fi.Mode().Type())
		case !errors.Is(serr, fs.ErrNotExist):
			return serr
		}
	}
	return err
}

// writeRecordShared writes record whole (a temporary file renamed). The
// metadata directory was just found, but a mount of GlusterFS whose view
// of it is older than another client's mkdir can still say it does not
// exist (seen on the bed, two controllers at once): on that error the
// directory is looked up again (makeShared) and the write tried again, a
// few times over about a second.
func writeRecordShared(root *os.Root, record string, data []byte) error {
	const tries, pause = 10, 100 * time.Millisecond
	var err error
	for try := range tries {
		if try > 0 {
			time.Sleep(pause)
			if err := makeShared(root, metadataDir); err != nil {
				return err
			}
		}
		if err = writeRecordFile(root, record, data); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return err
}

// writeRecordFile writes record through a temporary file renamed into
// place; a test makes it fail as a late view of the directory would.
var writeRecordFile = func(root *os.Root, record string, data []byte) error {
	if err := root.WriteFile(record+".tmp", data, 0o600); err != nil {
		return err
	}
	return root.Rename(record+".tmp", record)
}

// lstatShared is root.Lstat; a test makes it late, as a mount whose
// lookup does not yet see what another mount made.
var lstatShared = func(root *os.Root, name string) (fs.FileInfo, error) { return root.Lstat(name) }

// createDir makes the volume's directory and its capacity record; a
// volume made before with the same capacity is made already, with another
// one it is AlreadyExists.
// createDirOf is createDir; a test holds it as a server that does not
// answer lookups would.
var createDirOf = createDir

func createDir(root *os.Root, dir string, capacity int64) error {
	if err := makeShared(root, metadataDir); err != nil {
		return status.Errorf(codes.Internal, "create %s: %v", metadataDir, err)
	}
	record := metadataDir + "/" + dir
	data, err := readRecord(root, record)
	created := false // the record is this call's
	switch {
	case err == nil:
		if had, perr := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); perr != nil || had != capacity {
			return status.Errorf(codes.AlreadyExists, "volume %s exists with a capacity of %s bytes, not %d", dir, strings.TrimSpace(string(data)), capacity)
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := writeRecordShared(root, record, []byte(strconv.FormatInt(capacity, 10)+"\n")); err != nil {
			return status.Errorf(codes.Internal, "record volume %s: %v", dir, err)
		}
		created = true
	default:
		return status.Errorf(codes.Internal, "read the record of volume %s: %v", dir, err)
	}
	// World-writable, as an emptyDir: the driver changes no ownership
	// (no fsGroup), and the pods that use the volume run as any user.
	switch err := root.Mkdir(dir, 0o777); {
	case err == nil:
	case errors.Is(err, fs.ErrExist) && created:
		// Not made by an earlier call for this volume (that call would
		// have left its record): somebody else's directory, which the
		// volume must not take over, nor DeleteVolume remove.
		if rerr := root.Remove(record); rerr != nil {
			return status.Errorf(codes.Internal, "volume %s: a directory of that name exists, not made for it, and its new record cannot be removed: %v", dir, rerr)
		}
		return status.Errorf(codes.AlreadyExists, "volume %s: a directory of that name exists in the volume, not made for it: not adopted", dir)
	case errors.Is(err, fs.ErrExist):
	default:
		return status.Errorf(codes.Internal, "create volume directory %s: %v", dir, err)
	}
	// Whatever is there now must be a directory, not a link (Chmod
	// follows one, within the volume).
	if fi, err := root.Lstat(dir); err != nil || !fi.IsDir() {
		return status.Errorf(codes.Internal, "volume directory %s is not a directory (%v, %v): not adopted", dir, fileType(fi), err)
	}
	if err := root.Chmod(dir, 0o777); err != nil {
		return status.Errorf(codes.Internal, "create volume directory %s: %v", dir, err)
	}
	return nil
}

// readRecord reads a capacity record: a regular file, opened without
// following a link and without blocking (a FIFO there fails, never hangs).
func readRecord(root *os.Root, name string) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("record %s is not a regular file (%v, %v)", name, fileType(fi), err)
	}
	return io.ReadAll(io.LimitReader(f, 64))
}

// fileType names the type of fi for messages.
func fileType(fi fs.FileInfo) string {
	if fi == nil {
		return "none"
	}
	return fi.Mode().Type().String()
}

func (c controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d := c.d
	if err := required("DeleteVolume", "volume ID", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if d.FS.Name() == cephfs.FSType {
		return d.deleteCephVolume(ctx, req)
	}
	id, ok := parseGlusterVolumeID(req.GetVolumeId())
	if !ok {
		// Not one of ours, so gone already: the call succeeds.
		return &csi.DeleteVolumeResponse{}, nil
	}
	unlock, err := d.lockPaths(ctx, "DeleteVolume", "volume "+id.String())
	if err != nil {
		return nil, err
	}
	err = d.withVolume(ctx, "DeleteVolume", id.params(), unlock, func(ctx context.Context, root *os.Root) error {
		return deleteDir(ctx, root, id.dir)
	})
	if err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (c controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	d := c.d
	if err := required("ValidateVolumeCapabilities", "volume ID", req.GetVolumeId()); err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ValidateVolumeCapabilities: volume capabilities missing")
	}
	if err := d.volumeExists(ctx, req); err != nil {
		return nil, err
	}
	for _, vc := range req.GetVolumeCapabilities() {
		if err := d.checkCapability(vc); err != nil {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// volumeExists answers ValidateVolumeCapabilities's first question:
// NotFound unless the volume exists.
func (d *Driver) volumeExists(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) error {
	if d.FS.Name() == cephfs.FSType {
		return d.cephVolumeExists(ctx, req)
	}
	id, ok := parseGlusterVolumeID(req.GetVolumeId())
	if !ok {
		return status.Errorf(codes.NotFound, "no volume %s", req.GetVolumeId())
	}
	return d.withVolume(ctx, "ValidateVolumeCapabilities", id.params(), nil, func(_ context.Context, root *os.Root) error {
		if _, err := root.Lstat(metadataDir + "/" + id.dir); err != nil {
			return status.Errorf(codes.NotFound, "no volume %s", req.GetVolumeId())
		}
		return nil
	})
}

// withVolume mounts the administrator's volume that params name through
// the mount pod, at a new directory below WorkDir, runs f on it (an
// os.Root: no name f opens leaves it), and unmounts it.
//
// f's lookups are the volume's server's to answer, and a server that
// answers statfs may still not answer them: f runs aside, and the call
// ends with its context (the driver's timeout when it has no deadline),
// DeadlineExceeded or Canceled, while f keeps running. release (nil: none)
// is the caller's locks: it is called once f has ended and the volume is
// unmounted, so the volume's other calls are Aborted meanwhile, never
// queued behind a lookup that does not end. f gets the bounded context.
func (d *Driver) withVolume(ctx context.Context, call string, params map[string]string, release func(), f func(context.Context, *os.Root) error) (err error) {
	handedOff := false
	defer func() {
		if !handedOff && release != nil {
			release()
		}
	}()
	m, err := d.mountOf(ctx, params, nil, nil)
	if err != nil {
		return err
	}
	if err := d.live(ctx); err != nil {
		return err
	}
	if err := os.MkdirAll(d.WorkDir, 0o700); err != nil {
		return status.Errorf(codes.Internal, "create the controller's work directory: %v", err)
	}
	dir, err := os.MkdirTemp(d.WorkDir, workDirPrefix)
	if err != nil {
		return status.Errorf(codes.Internal, "create a mount point: %v", err)
	}
	cleanup := func(ctx context.Context) error {
		if _, err := d.Volumes.Unmount(ctx, dir); err != nil {
			return status.Errorf(codes.Internal, "%v", err) // a mount point stays until it is unmounted
		}
		if err := os.Remove(dir); err != nil {
			return status.Errorf(codes.Internal, "remove mount point: %v", err)
		}
		return nil
	}
	// Unrecorded: the recovery must not make a mount again that the
	// controller unmounts when the call ends (or CleanWorkDir when the
	// controller stopped first).
	if _, err := d.Volumes.MountWith(ctx, m, dir, volume.MountOptions{Unrecorded: true}); err != nil {
		return errors.Join(status.Errorf(codes.Internal, "mount %s: %v", m.Describe(), err), cleanup(context.WithoutCancel(ctx)))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Volumes.TimeoutOrDefault())
		defer cancel()
	}
	done := make(chan error, 1)
	handedOff = true
	go func() {
		if release != nil {
			defer release()
		}
		err := func() error {
			root, err := os.OpenRoot(dir)
			if err != nil {
				return status.Errorf(codes.Internal, "open %s: %v", dir, err)
			}
			defer root.Close()
			return f(ctx, root)
		}()
		done <- errors.Join(err, cleanup(context.WithoutCancel(ctx)))
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return status.Errorf(codeOf(ctx.Err()), "%s: the work on %s mounted at %s has not ended (%v): its server does not answer; the volume's other calls wait for it, and are Aborted when their own deadlines pass first",
			call, m.Describe(), dir, ctx.Err())
	}
}

// workDirPrefix starts the names of the controller's mount points below
// WorkDir: os.MkdirTemp adds digits.
const workDirPrefix = "v-"

var workDirNameRE = regexp.MustCompile("^" + workDirPrefix + "[0-9]+$")

// CleanWorkDir cleans what a controller that stopped during a call left
// below WorkDir: its mount points, still mounted or not, and any mount
// record of a mount there (earlier versions recorded them, and the
// recovery would make them again for ever). A mount is detached on the
// node, never through a symbolic link, and the directory removed only when
// it is then empty: nothing is removed through a mount, and a directory
// someone else put there stays.
func (d *Driver) CleanWorkDir() error {
	if d.WorkDir == "" {
		return nil
	}
	var errs []error
	if records, err := mountrecord.List(d.Volumes.Exec.RecordsDir()); err != nil {
		errs = append(errs, err)
	} else {
		for _, r := range records {
			if r.Err == nil && strings.HasPrefix(r.Record.Target, filepath.Clean(d.WorkDir)+"/") {
				errs = append(errs, d.Volumes.Exec.ForgetMount(r.Record.Target))
			}
		}
	}
	entries, err := os.ReadDir(d.WorkDir)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		if !e.IsDir() || !workDirNameRE.MatchString(e.Name()) {
			continue
		}
		errs = append(errs, cleanMountPoint(filepath.Join(d.WorkDir, e.Name())))
	}
	return errors.Join(errs...)
}

// cleanMountPoint detaches every mount stacked at dir and removes it if it
// is empty then.
func cleanMountPoint(dir string) error {
	for range 8 { // more mounts stacked there than the controller makes
		mounted, err := volume.IsMountPoint(dir)
		if err != nil {
			return err
		}
		if !mounted {
			if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the controller's mount point %s: %w", dir, err)
			}
			return nil
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount the controller's mount point %s: %w", dir, err)
		}
	}
	return fmt.Errorf("unmount the controller's mount point %s: still mounted after 8 unmounts", dir)
}

// deleteDir removes the volume directory dir and then its record: only a
// directory this driver made, with its record (any other directory an ID
// names is the administrator's). A removal that ctx stops leaves the
// record, so that the next call continues it.
func deleteDir(ctx context.Context, root *os.Root, dir string) error {
	if _, err := root.Lstat(metadataDir + "/" + dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := removeTree(ctx, root, dir); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return status.Errorf(status.FromContextError(cerr).Code(), "remove volume directory %s: stopped before its end (%v); the next DeleteVolume continues", dir, cerr)
		}
		return status.Errorf(codes.Internal, "remove volume directory %s: %v", dir, err)
	}
	if err := root.Remove(metadataDir + "/" + dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.Internal, "remove the record of volume %s: %v", dir, err)
	}
	return nil
}

// removeTree removes name, a name in the top directory of root, and all
// beneath it. Every name is resolved from the descriptor of its directory
// without following a symbolic link (a link is removed, not followed), a
// directory on another mount than root's is not entered (its removal
// fails), and ctx is checked before each entry: a tree of any size stops
// when the call ends.
func removeTree(ctx context.Context, root *os.Root, name string) error {
	top, err := root.Open(".")
	if err != nil {
		return err
	}
	defer top.Close()
	mnt, err := fdMountID(int(top.Fd()))
	if err != nil {
		return fmt.Errorf("statx %s: %w", top.Name(), err)
	}
	return removeAt(ctx, int(top.Fd()), name, mnt, &treePath{name: name})
}

// maxTreeDepth bounds how deep removeTree goes: each level holds a
// directory open and a batch of names, and a tenant may nest directories
// as deep as the file system lets them. A deeper tree is left for an
// administrator, with an error saying so.
const maxTreeDepth = 1024

// treePath names an entry of the tree removeAt walks, for messages only:
// built when one is needed, never per entry (a path per level would cost
// the square of the depth).
type treePath struct {
	parent *treePath
	name   string
	depth  int
}

func (p *treePath) child(name string) *treePath {
	return &treePath{parent: p, name: name, depth: p.depth + 1}
}

// String is the entry's path below the volume, quoted (names are the
// tenant's: any byte but "/" and NUL) and cut to its last 256 bytes.
func (p *treePath) String() string {
	var parts []string
	for q := p; q != nil; q = q.parent {
		parts = append(parts, q.name)
	}
	slices.Reverse(parts)
	s := strings.Join(parts, "/")
	if len(s) > 256 {
		s = "..." + s[len(s)-256:]
	}
	return strconv.Quote(s)
}

// removeAt removes name in the directory parent and all beneath it; path
// names it in messages.
func removeAt(ctx context.Context, parent int, name string, mnt uint64, path *treePath) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if path.depth >= maxTreeDepth {
		return fmt.Errorf("%s is more than %d directories deep: remove it by hand", path, maxTreeDepth)
	}
	switch err := unix.Unlinkat(parent, name, 0); {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case !errors.Is(err, unix.EISDIR):
		return &os.PathError{Op: "unlink", Path: path.String(), Err: err}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return &os.PathError{Op: "open", Path: path.String(), Err: err}
	}
	dir := os.NewFile(uintptr(fd), "")
	defer dir.Close()
	switch id, err := fdMountID(fd); {
	case err != nil:
		return &os.PathError{Op: "statx", Path: path.String(), Err: err}
	case id != mnt:
		return fmt.Errorf("%s is a mount point: nothing beneath it is removed", path)
	}
	// Entries made while the directory is read (its users may still
	// write) can be missed by one pass: another pass takes them.
	for pass := 0; ; pass++ {
		for {
			// A small batch: every level of the walk holds one.
			names, err := dir.Readdirnames(32)
			for _, n := range names {
				if err := removeAt(ctx, fd, n, mnt, path.child(n)); err != nil {
					return err
				}
			}
			if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
				break
			}
			if err != nil {
				return fmt.Errorf("read directory %s: %w", path, err)
			}
		}
		err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.ENOTEMPTY) && pass < 3:
			if _, err := dir.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("read directory %s again: %w", path, err)
			}
		default:
			return &os.PathError{Op: "rmdir", Path: path.String(), Err: err}
		}
	}
}

// fdMountID returns the ID of the mount of the open file fd, asking no
// file system daemon.
func fdMountID(fd int) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, errors.New("the kernel returned no mount ID")
	}
	return stx.Mnt_id, nil
}
