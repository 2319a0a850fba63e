package livemount

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/scope"
)

// TestSurveyMountPointWithSpace: a volume directory with a space in its
// name is reported at its real path, healthy, in its scope.
func TestSurveyMountPointWithSpace(t *testing.T) {
	kubelet := t.TempDir()
	a := filepath.Join(kubelet, "pods/a/volumes/x~glusterfs/my data")
	if err := os.MkdirAll(a, 0o755); err != nil {
		t.Fatal(err)
	}
	escaped := strings.ReplaceAll(a, " ", `\040`)
	mi := filepath.Join(t.TempDir(), "mountinfo")
	lines := "20 1 0:20 / / rw - ext4 /dev/vda rw\n" +
		fmt.Sprintf("30 20 0:30 / %s rw - fuse.glusterfs srv:/my\\040vol rw,user_id=0\n", escaped)
	if err := os.WriteFile(mi, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := t.TempDir()
	writeProc(t, proc, 100, rootProc([]int{30}, "/usr/sbin/glusterfs", "--volfile-server=srv", a))
	fs := &fakeScopes{scopes: map[string][]scope.Scope{"x.io/glusterfs": {
		{Name: scope.Name(a), Cgroup: "/mc/x.io~glusterfs/" + scope.Name(a), PIDs: []int{100}},
	}}}
	r, err := Survey(context.Background(), Options{KubeletDir: kubelet, Plugins: []string{"x.io/glusterfs"}, Scopes: fs, MountInfo: mi, ProcRoot: proc})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Mounts) != 1 {
		t.Fatalf("mounts %+v; want the one at %q", r.Mounts, a)
	}
	m := r.Mounts[0]
	if m.Target != a || m.Source != "srv:/my vol" || !m.Healthy || m.Scope != scope.Name(a) || !m.Scoped || len(r.Orphans) != 0 {
		t.Errorf("mount %+v, orphans %+v; want %q, source %q, healthy, scoped in %s", m, r.Orphans, a, "srv:/my vol", scope.Name(a))
	}
}
