package csi

import (
	"context"
	"errors"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd"
)

type node struct {
	csi.UnimplementedNodeServer
	d *Driver
}

// NodeStageVolume mounts the volume once per node at the staging path,
// through the plugin's mount pod (so that its FUSE daemon runs in a scope
// of its own and the mount is recorded for the recovery).
func (n node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	d := n.d
	staging := req.GetStagingTargetPath()
	if err := required("NodeStageVolume", "volume ID", req.GetVolumeId(), "staging target path", staging); err != nil {
		return nil, err
	}
	if err := d.checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if _, err := subdirOf(req.GetVolumeContext()); err != nil {
		return nil, err
	}
	m, err := d.mountOf(ctx, req.GetVolumeContext(), req.GetSecrets(), req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	unlock, err := d.lockPaths(ctx, "NodeStageVolume", staging)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := d.live(ctx); err != nil {
		return nil, err
	}
	// Adopt: every mount of the driver is the mount pod's (live above),
	// and a staging mount made after its call timed out needs its record.
	msg, err := d.Volumes.MountWith(ctx, m, staging, volume.MountOptions{Adopt: true})
	if err != nil {
		code := codeOf(err)
		if errors.Is(err, volume.ErrOtherMount) {
			code = codes.AlreadyExists
		}
		return nil, status.Errorf(code, "volume %s: %v", req.GetVolumeId(), err)
	}
	if d.Log != nil {
		d.Log.InfoContext(ctx, "staged", "volume", req.GetVolumeId(), "dir", staging, "message", msg)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume unmounts the staging path (a dead mount too) and
// removes its record and secret file.
func (n node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	staging := req.GetStagingTargetPath()
	if err := required("NodeUnstageVolume", "volume ID", req.GetVolumeId(), "staging target path", staging); err != nil {
		return nil, err
	}
	unlock, err := n.d.lockPaths(ctx, "NodeUnstageVolume", staging)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := n.d.Volumes.Unmount(ctx, staging); err != nil {
		return nil, status.Errorf(codeOf(err), "volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume binds the staged volume (its KeySubdir, resolved
// beneath the staging mount by descriptors, following no symbolic link)
// at the target path, read-only when asked.
func (n node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	d := n.d
	target, staging := req.GetTargetPath(), req.GetStagingTargetPath()
	if err := required("NodePublishVolume", "volume ID", req.GetVolumeId(), "target path", target, "staging target path", staging); err != nil {
		return nil, err
	}
	if err := d.checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	sub, err := subdirOf(req.GetVolumeContext())
	if err != nil {
		return nil, err
	}
	for _, p := range []string{target, staging} {
		if err := volume.CheckDir(p); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume: %v", err)
		}
	}
	if target == staging {
		return nil, status.Errorf(codes.InvalidArgument, "NodePublishVolume: the target is the staging path %s", staging)
	}
	// The staging lock too: an Unstage must not unmount the staging mount
	// between the check below and the bind. The bind may outlive the call
	// (below), and then takes the unlock with it.
	unlock, err := d.lockPaths(ctx, "NodePublishVolume", staging, target)
	if err != nil {
		return nil, err
	}
	handedOff := false
	defer func() {
		if !handedOff {
			unlock()
		}
	}()
	switch st, err := d.Volumes.StateContext(ctx, staging); {
	case err != nil:
		return nil, status.Errorf(codeOf(err), "volume %s: %v", req.GetVolumeId(), err)
	case st != volume.Mounted:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", req.GetVolumeId(), staging)
	}
	// The target's state before creating it: MkdirAll stats it, which the
	// daemon of a bind there would answer, or hang.
	st, err := d.Volumes.StateContext(ctx, target)
	if err == nil && st == volume.Missing {
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s: create target %s: %v", req.GetVolumeId(), target, err)
		}
		st, err = d.Volumes.StateContext(ctx, target)
	}
	switch {
	case err != nil:
		return nil, status.Errorf(codeOf(err), "volume %s: %v", req.GetVolumeId(), err)
	case st == volume.Mounted:
		return &csi.NodePublishVolumeResponse{}, nil
	case st == volume.Corrupted:
		return nil, status.Errorf(codes.Internal, "volume %s: %s is a dead mount (transport endpoint is not connected): unpublish it first", req.GetVolumeId(), target)
	}
	ro := req.GetReadonly() || readOnly(req.GetVolumeCapability())
	// The lookup of sub beneath the staging mount is the volume's server's
	// to answer, and a server that answers statfs may still not answer
	// it: the bind runs aside, and the call ends with its context or the
	// driver's bound, whichever is first. The bind keeps the locks until it
	// ends (the volume's other calls are Aborted meanwhile); if it binds
	// after all, a retry finds the target published.
	ctx, cancel := context.WithTimeout(ctx, d.Volumes.TimeoutOrDefault())
	defer cancel()
	done := make(chan error, 1)
	handedOff = true
	go func() {
		defer unlock()
		done <- bindVolume(staging, sub, target, ro)
	}()
	select {
	case err := <-done:
		if err != nil {
			code := codes.Internal
			if errors.Is(err, mountfd.ErrNotInVolume) {
				code = codes.FailedPrecondition
			}
			return nil, status.Errorf(code, "volume %s: publish %s of %s at %s: %v", req.GetVolumeId(), sub, staging, target, err)
		}
		return &csi.NodePublishVolumeResponse{}, nil
	case <-ctx.Done():
		return nil, status.Errorf(codeOf(ctx.Err()), "volume %s: publish %s of %s at %s: the lookup beneath the staging mount has not ended (%v): its server does not answer; the volume's other calls wait for it, and are Aborted when their own deadlines pass first",
			req.GetVolumeId(), sub, staging, target, ctx.Err())
	}
}

// NodeUnpublishVolume unmounts the target (a dead bind too) and removes
// it.
func (n node) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if err := required("NodeUnpublishVolume", "volume ID", req.GetVolumeId(), "target path", target); err != nil {
		return nil, err
	}
	if err := volume.CheckDir(target); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "NodeUnpublishVolume: %v", err)
	}
	unlock, err := n.d.lockPaths(ctx, "NodeUnpublishVolume", target)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := unbind(ctx, n.d.Volumes, target); err != nil {
		return nil, status.Errorf(codeOf(err), "volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the file system's usage at the path. While
// the FUSE daemon is dead (the mount pod's recovery brings it back) it
// fails with Unavailable and says so: the Go bindings of CSI 1.13 carry no
// VolumeCondition (an alpha field) to report it with. A daemon that hangs
// is Unavailable too, once the request's deadline or the driver's timeout
// passes; until its statfs returns, the calls on the path fail at once.
func (n node) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	p := req.GetVolumePath()
	if err := required("NodeGetVolumeStats", "volume ID", req.GetVolumeId(), "volume path", p); err != nil {
		return nil, err
	}
	if err := volume.CheckDir(p); err != nil {
		// No volume is published at such a path (csi-sanity: NotFound).
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetVolumeId(), err)
	}
	// A mount's root only (found without asking its daemon): statfs of
	// any other path could reach a daemon through a path a tenant made.
	switch mnt, err := volume.IsMountPoint(p); {
	case errors.Is(err, os.ErrNotExist):
		return nil, status.Errorf(codes.NotFound, "volume %s: no %s", req.GetVolumeId(), p)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	case !mnt:
		return nil, status.Errorf(codes.NotFound, "volume %s: nothing is mounted at %s", req.GetVolumeId(), p)
	}
	st, err := n.d.Volumes.ProbeStatfs(ctx, p)
	switch {
	case errors.Is(err, volume.ErrNotAnswering):
		return nil, status.Errorf(codes.Unavailable, "volume %s at %s: %v", req.GetVolumeId(), p, err)
	case ctx.Err() != nil:
		return nil, status.Errorf(codeOf(err), "volume %s at %s: %v", req.GetVolumeId(), p, err)
	case errors.Is(err, unix.ENOENT):
		return nil, status.Errorf(codes.NotFound, "volume %s: no %s", req.GetVolumeId(), p)
	case errors.Is(err, unix.ENOTCONN):
		return nil, status.Errorf(codes.Unavailable, "volume %s at %s: the file system's daemon is dead (transport endpoint is not connected); the mount pod of %s makes the mount again",
			req.GetVolumeId(), p, n.d.Exec.Plugin())
	case err != nil:
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.GetVolumeId(), err)
	}
	bs := int64(st.Bsize)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

func (n node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (n node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.d.NodeID}, nil
}

// codeOf is the CSI code of an error of package volume: Unavailable for a
// daemon that does not answer (the CO retries), the context's codes, else
// Internal.
func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, volume.ErrNotAnswering):
		return codes.Unavailable
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Internal
}

// required fails with InvalidArgument naming the first of the (name,
// value) pairs whose value is empty.
func required(call string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return status.Errorf(codes.InvalidArgument, "%s: %s missing", call, pairs[i])
		}
	}
	return nil
}
