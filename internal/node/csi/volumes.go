package csi

import (
	"context"
	"encoding/base64"
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
)

// KeySubdir is the volume context's key of the directory, beneath the
// file system's mount, that a volume is (a dynamically provisioned
// GlusterFS volume's directory on the administrator's volume). NodePublish
// binds that directory, resolved beneath the staging mount without
// following a symbolic link.
const KeySubdir = "subdir"

// coPrefixes start the keys the kubelet and the external-provisioner add
// to a volume context (csi.storage.k8s.io/pod.name,
// storage.kubernetes.io/csiProvisionerIdentity, ...): they are not options.
var coPrefixes = []string{"csi.storage.k8s.io/", "storage.kubernetes.io/"}

func coKey(k string) bool {
	return slices.ContainsFunc(coPrefixes, func(p string) bool { return strings.HasPrefix(k, p) })
}

// mountOf returns the staging mount a NodeStage request asks for: the
// file system's options are the volume context's (less KeySubdir and the
// keys of [coPrefixes]), each secret as the kubelet hands a
// Flexvolume driver a secretRef's entry (kubernetes.io/secret/NAME, base64),
// and the capability's mount flags added to mountOptions. The file system
// checks them all as it checks a Flexvolume's options: a bad one is
// InvalidArgument naming it.
func (d *Driver) mountOf(ctx context.Context, volCtx, secrets map[string]string, vc *csi.VolumeCapability) (fs.Mount, error) {
	vals := map[string]string{}
	for k, v := range volCtx {
		switch {
		case k == KeySubdir || coKey(k):
		case strings.HasPrefix(k, fs.KubeletPrefix):
			return fs.Mount{}, status.Errorf(codes.InvalidArgument, "volume context key %q: the kubernetes.io/ keys are the node's, not a volume's", k)
		default:
			vals[k] = v
		}
	}
	for k, v := range secrets {
		vals[fs.KubeletPrefix+"secret/"+k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	if flags := vc.GetMount().GetMountFlags(); len(flags) > 0 {
		all := flags
		if o := vals[fs.KeyMountOptions]; o != "" {
			all = append(strings.Split(o, ","), flags...)
		}
		vals[fs.KeyMountOptions] = strings.Join(all, ",")
	}
	m, err := d.FS.Mount(ctx, vals, d.env())
	if err != nil {
		var oe *fs.OptionError
		if errors.As(err, &oe) {
			return fs.Mount{}, status.Errorf(codes.InvalidArgument, "volume of %s: %v", d.Name, err)
		}
		return fs.Mount{}, status.Errorf(codes.Internal, "volume of %s: %v", d.Name, err)
	}
	return m, nil
}

// subdirOf returns the volume context's KeySubdir as a path from the top
// of the staging mount ("/" when none).
func subdirOf(volCtx map[string]string) (string, error) {
	s, ok := volCtx[KeySubdir]
	if !ok {
		return "/", nil
	}
	if s == "" || !filepath.IsLocal(s) || filepath.Clean(s) != s || strings.ContainsRune(s, 0) {
		return "", status.Errorf(codes.InvalidArgument, "volume context %s %q: want a clean relative path inside the volume", KeySubdir, s)
	}
	return "/" + s, nil
}

// checkCapability accepts a mount volume of a file system this driver
// mounts, with any access mode but none.
func (d *Driver) checkCapability(vc *csi.VolumeCapability) error {
	if vc == nil {
		return status.Error(codes.InvalidArgument, "volume capability missing")
	}
	if vc.GetBlock() != nil {
		return status.Errorf(codes.InvalidArgument, "%s serves file systems only, not block volumes", d.Name)
	}
	m := vc.GetMount()
	if m == nil {
		return status.Error(codes.InvalidArgument, "volume capability: access type missing (want mount)")
	}
	if t := m.GetFsType(); t != "" && t != d.FS.Name() {
		return status.Errorf(codes.InvalidArgument, "volume capability: fsType %q; %s mounts %s", t, d.Name, d.FS.Name())
	}
	if vc.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
		return status.Error(codes.InvalidArgument, "volume capability: access mode missing")
	}
	return nil
}

// readOnly tells whether a capability allows reading only.
func readOnly(vc *csi.VolumeCapability) bool {
	switch vc.GetAccessMode().GetMode() {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		return true
	}
	return false
}
