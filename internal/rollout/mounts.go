package rollout

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// ParseMountInfo parses the format of /proc/PID/mountinfo.
func ParseMountInfo(data []byte) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			return nil, fmt.Errorf("mountinfo line %d: malformed: %q", n, line)
		}
		out = append(out, Mount{Target: unescapeOctal(f[4]), FSType: f[sep+1], Source: unescapeOctal(f[sep+2])})
	}
	return out, sc.Err()
}

// unescapeOctal undoes the kernel's \NNN escapes of space, tab, newline and
// backslash.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
