package livemount

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/scope"
)

func ExampleUnescape() {
	fmt.Println(Unescape(`/var/lib/kubelet/pods/a/volumes/x~glusterfs/my\040data`))
	fmt.Println(Unescape(`tab\011newline\012backslash\134end`))
	// Output:
	// /var/lib/kubelet/pods/a/volumes/x~glusterfs/my data
	// tab	newline
	// backslash\end
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"":             "",
		"/plain":       "/plain",
		`/a\040b`:      "/a b",
		`\040`:         " ",
		`/a\134040b`:   `/a\040b`, // a backslash, then the text "040b"
		`/a\04`:        `/a\04`,   // too short
		`/a\400`:       `/a\400`,  // not a byte
		`/a\08x`:       `/a\08x`,  // not octal
		`/trailing\\`:  `/trailing\\`,
		`\011\012\134`: "\t\n\\",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParseMountInfoDecodesPaths: the kernel escapes a space in a mount
// point or root as \040; ParseMountInfo gives the paths as they are on
// disk, and leaves the source as the kernel writes it.
func TestParseMountInfoDecodesPaths(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	line := `901 900 0:77 /sub\040dir /my\040data rw - fuse.glusterfs srv:/my\040vol rw,user_id=0` + "\n"
	if err := os.WriteFile(mi, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	infos, err := ParseMountInfo(mi)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].MountPoint != "/my data" || infos[0].Root != "/sub dir" || infos[0].Source != `srv:/my\040vol` {
		t.Errorf("ParseMountInfo = %+v; want mount point %q, root %q, source %q", infos, "/my data", "/sub dir", `srv:/my\040vol`)
	}
}

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

// kernelEscape escapes s as the kernel's show_mountinfo does its paths
// (mangle: space, tab, newline and backslash as octal).
func kernelEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// FuzzUnescape: whatever the kernel escapes comes back as it was, and no
// input makes Unescape panic or grow.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"", "/a b", `/a\b`, "/tab\there", `\040`, `\1`, `\777`, `\\040`, "/new\nline"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := Unescape(kernelEscape(s)); got != s {
			t.Fatalf("Unescape(%q) = %q, want %q", kernelEscape(s), got, s)
		}
		if got := Unescape(s); len(got) > len(s) {
			t.Fatalf("Unescape(%q) = %q, longer than its input", s, got)
		}
	})
}
