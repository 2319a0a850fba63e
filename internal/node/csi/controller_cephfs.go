package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
)

// The CephFS controller provisions a volume as a subvolume of the file
// system the StorageClass names (parameters monitors, fs, subvolumeGroup,
// and those a node mounts with: user, mountOptions), its quota the
// capacity asked for: the ceph tool of the mount pod runs `ceph fs
// subvolumegroup create`, `ceph fs subvolume create` and `getpath`, as the
// user of the provisioner's secret (entries key and user), the key in a
// root-only file on the secrets directory's tmpfs, never in an argv. The
// volume's context is the parameters less subvolumeGroup, plus the
// subvolume's path, which NodeStage mounts with the node-stage secret's
// key; its ID names the monitors, file system, group and subvolume, so
// that DeleteVolume (`ceph fs subvolume rm`) needs nothing else.

// maxVolumeID is the CSI specification's bound of a volume ID (a string
// field: 128 bytes).
const maxVolumeID = 128

// subvolumeName returns the subvolume of the volume the CO names name:
// the name itself when it is short and plain, else "v-" and its hash.
func subvolumeName(name string) string {
	if cephfs.SubvolumeNameOK(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "v-" + hex.EncodeToString(sum[:16])
}

// cephAdmin checks the parameters and the provisioner's secret of a call
// on a CephFS volume.
func (d *Driver) cephAdmin(ctx context.Context, call string, params, secrets map[string]string) (cephfs.Admin, error) {
	a, err := cephfs.ParseAdmin(ctx, params, secrets, d.env())
	if err != nil {
		var oe *fs.OptionError
		if errors.As(err, &oe) {
			return a, status.Errorf(codes.InvalidArgument, "%s: %v", call, err)
		}
		return a, status.Errorf(codes.Internal, "%s: %v", call, err)
	}
	return a, nil
}

// ceph runs the ceph tool in the mount pod with a's key; the key's file is
// named after the subvolume, whose calls the caller serialises. Each run
// is a record "ran": the command's words up to its first option (e.g.
// "ceph fs subvolume create"), the subvolume and where it ran; never its
// arguments, whose --keyfile names the key's file.
func (d *Driver) ceph(ctx context.Context, a cephfs.Admin, name string, cmd []string) ([]byte, error) {
	id := filepath.Join(d.WorkDir, "ceph-"+a.FS+"-"+a.Group+"-"+name)
	out, where, err := d.Volumes.RunWithSecret(ctx, id, a.Key, "ceph", func(keyfile string) []string {
		return a.Args(keyfile, cmd...)
	})
	if where != "" {
		d.Log.InfoContext(ctx, "ran", "command", commandWords("ceph", cmd), "subvolume", name, "message", where, "ok", err == nil)
	}
	return out, err
}

// commandWords names a command by its tool and its words up to the first
// option or positional value of the caller's: "ceph fs subvolume create".
func commandWords(tool string, args []string) string {
	words := []string{tool}
	for _, a := range args {
		if strings.HasPrefix(a, "-") || len(words) == 4 {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// notFound says whether err is the ceph tool's exit for what is not there.
func notFound(err error) bool {
	var exit utilexec.ExitError
	return errors.As(err, &exit) && exit.ExitStatus() == cephfs.ExitNotFound
}

func (d *Driver) createCephVolume(ctx context.Context, req *csi.CreateVolumeRequest, capacity int64) (*csi.CreateVolumeResponse, error) {
	params := req.GetParameters()
	for k := range params {
		if k == KeySubdir || k == cephfs.KeyPath || strings.HasPrefix(k, "kubernetes.io/") || coKey(k) {
			return nil, status.Errorf(codes.InvalidArgument, "CreateVolume: StorageClass parameter %q is the driver's or the node's, not an option", k)
		}
	}
	a, err := d.cephAdmin(ctx, "CreateVolume", params, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	volCtx := map[string]string{}
	for k, v := range params {
		if k != cephfs.KeySubvolumeGroup {
			volCtx[k] = v
		}
	}
	// Checked as NodeStage will check it (the provisioner's key standing
	// in for the node's), before anything is made.
	if _, err := d.mountOf(ctx, volCtx, map[string]string{cephfs.SecretKey: string(a.Key)}, nil); err != nil {
		return nil, err
	}
	name := subvolumeName(req.GetName())
	id := a.VolumeID(name)
	if len(id) > maxVolumeID {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume: the volume's ID %q would be %d bytes, over the %d of the CSI specification: name fewer monitors", id, len(id), maxVolumeID)
	}
	unlock, err := d.lockPaths(ctx, "CreateVolume", "volume "+id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := d.live(ctx); err != nil {
		return nil, err
	}
	// A subvolume made before (by an earlier call for this volume: the
	// group is the driver's) is the volume when its quota is the capacity
	// asked for, else the name is taken: AlreadyExists.
	switch out, err := d.ceph(ctx, a, name, a.Info(name)); {
	case err == nil:
		quota, err := cephfs.ParseQuota(out)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "CreateVolume: subvolume %s/%s of CephFS %s: %v", a.Group, name, a.FS, err)
		}
		if quota != capacity {
			return nil, status.Errorf(codes.AlreadyExists, "CreateVolume: subvolume %s/%s of CephFS %s exists with a quota of %d bytes, not %d", a.Group, name, a.FS, quota, capacity)
		}
	case notFound(err):
		if _, err := d.ceph(ctx, a, name, a.GroupCreate()); err != nil {
			return nil, status.Errorf(codes.Internal, "CreateVolume: create subvolume group %s of CephFS %s: %v", a.Group, a.FS, err)
		}
		if _, err := d.ceph(ctx, a, name, a.Create(name, capacity)); err != nil {
			return nil, status.Errorf(codes.Internal, "CreateVolume: create subvolume %s/%s of CephFS %s: %v", a.Group, name, a.FS, err)
		}
	default:
		return nil, status.Errorf(codes.Internal, "CreateVolume: subvolume %s/%s of CephFS %s: %v", a.Group, name, a.FS, err)
	}
	out, err := d.ceph(ctx, a, name, a.GetPath(name))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "CreateVolume: the path of subvolume %s/%s of CephFS %s: %v", a.Group, name, a.FS, err)
	}
	p, err := cephfs.ParsePath(out)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "CreateVolume: subvolume %s/%s of CephFS %s: %v", a.Group, name, a.FS, err)
	}
	volCtx[cephfs.KeyPath] = p
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: capacity, VolumeContext: volCtx}}, nil
}

func (d *Driver) deleteCephVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	params, name, ok := cephfs.ParseVolumeID(req.GetVolumeId())
	if !ok {
		// Not one of ours, so gone already: the call succeeds.
		return &csi.DeleteVolumeResponse{}, nil
	}
	a, err := d.cephAdmin(ctx, "DeleteVolume", params, req.GetSecrets())
	if err != nil {
		return nil, err
	}
	unlock, err := d.lockPaths(ctx, "DeleteVolume", "volume "+req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := d.live(ctx); err != nil {
		return nil, err
	}
	if _, err := d.ceph(ctx, a, name, a.Remove(name)); err != nil && !notFound(err) {
		return nil, status.Errorf(codes.Internal, "DeleteVolume: remove subvolume %s/%s of CephFS %s: %v", a.Group, name, a.FS, err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// cephVolumeExists answers ValidateVolumeCapabilities's question for a
// CephFS volume: NotFound unless its subvolume exists.
func (d *Driver) cephVolumeExists(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) error {
	params, name, ok := cephfs.ParseVolumeID(req.GetVolumeId())
	if !ok {
		return status.Errorf(codes.NotFound, "no volume %s", req.GetVolumeId())
	}
	a, err := d.cephAdmin(ctx, "ValidateVolumeCapabilities", params, req.GetSecrets())
	if err != nil {
		return err
	}
	unlock, err := d.lockPaths(ctx, "ValidateVolumeCapabilities", "volume "+req.GetVolumeId())
	if err != nil {
		return err
	}
	defer unlock()
	if err := d.live(ctx); err != nil {
		return err
	}
	if _, err := d.ceph(ctx, a, name, a.Info(name)); err != nil {
		if notFound(err) {
			return status.Errorf(codes.NotFound, "no volume %s", req.GetVolumeId())
		}
		return status.Errorf(codes.Internal, "ValidateVolumeCapabilities: subvolume %s/%s of CephFS %s: %v", a.Group, name, a.FS, err)
	}
	return nil
}
