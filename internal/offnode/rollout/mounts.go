package rollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountinfo"
)

// Mount is one entry of a mount table.
type Mount struct {
	Target string `json:"target"`
	FSType string `json:"fstype"`
	Source string `json:"source"`
}

// String renders m as mount(8) does.
func (m Mount) String() string { return fmt.Sprintf("%s on %s type %s", m.Source, m.Target, m.FSType) }

// MountLister reads the mount table as a mount pod's container sees it.
// Its kubelet directory is the node's (a Bidirectional hostPath at the same
// path), so the mounts of the plugin's volumes it shows are the node's.
type MountLister interface {
	Mounts(ctx context.Context, pod *corev1.Pod, container string) ([]Mount, error)
}

// DefaultMountsCommand is what [PodExec] runs for the mount table when
// MountsCommand is empty.
var DefaultMountsCommand = []string{"cat", "/proc/self/mountinfo"}

// ParseMountInfo parses the format of /proc/PID/mountinfo, strictly (see
// package mountinfo: a name with a vertical tab in it stays one field).
// Target and Source are decoded.
func ParseMountInfo(data []byte) ([]Mount, error) {
	infos, err := mountinfo.Parse(data)
	if err != nil {
		return nil, err
	}
	out := make([]Mount, 0, len(infos))
	for _, mi := range infos {
		out = append(out, Mount{Target: mi.MountPoint, FSType: mi.FsType, Source: mountinfo.Unescape(mi.Source)})
	}
	return out, nil
}
