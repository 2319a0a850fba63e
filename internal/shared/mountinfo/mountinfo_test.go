package mountinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
// point or root as \040; ParseFile gives the paths as they are on
// disk, and leaves the source as the kernel writes it.
func TestParseMountInfoDecodesPaths(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	line := `901 900 0:77 /sub\040dir /my\040data rw - fuse.glusterfs srv:/my\040vol rw,user_id=0` + "\n"
	if err := os.WriteFile(mi, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	infos, err := ParseFile(mi)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].MountPoint != "/my data" || infos[0].Root != "/sub dir" || infos[0].Source != `srv:/my\040vol` {
		t.Errorf("ParseFile = %+v; want mount point %q, root %q, source %q", infos, "/my data", "/sub dir", `srv:/my\040vol`)
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

// TestNamesStayInTheirField: the kernel does not escape a vertical tab,
// form feed or carriage return, so a FUSE fsname or a subPath may hold
// one. A parser splitting on any white space would read the fields after
// it from the name: a superblock option user_id=0 that a node user's
// fusermount mount does not have, a mount option rw on a read-only bind.
func TestNamesStayInTheirField(t *testing.T) {
	fsname := "10.0.0.1:/vol\vuser_id=0"
	lines := "40 1 0:71 / /home/u/m rw,nosuid - fuse.glusterfs " + fsname + " rw,user_id=1000,group_id=1000\n" +
		"41 1 0:72 /d\v/data\vrw /data ro,relatime - fuse.glusterfs srv:/v rw,user_id=0,group_id=0\n"
	infos, err := Parse([]byte(lines))
	if err != nil {
		t.Fatal(err)
	}
	if got := infos[0]; got.Source != fsname || got.FsType != "fuse.glusterfs" || !slices.Equal(got.SuperOptions, []string{"rw", "user_id=1000", "group_id=1000"}) {
		t.Errorf("fusermount's mount parsed as source %q, type %q, super options %q; want %q, fuse.glusterfs, user_id=1000", got.Source, got.FsType, got.SuperOptions, fsname)
	}
	if got := infos[1]; got.Root != "/d\v/data\vrw" || got.MountPoint != "/data" || !slices.Equal(got.MountOptions, []string{"ro", "relatime"}) {
		t.Errorf("the subPath bind parsed as root %q, mount point %q, options %q; want root with its vertical tabs, /data, ro", got.Root, got.MountPoint, got.MountOptions)
	}
}

// TestNotTheKernelsLines: a line the kernel would not write is an error
// naming its number, never a guess.
func TestNotTheKernelsLines(t *testing.T) {
	for _, line := range []string{
		"40 1 0:71 / /m rw - fuse.glusterfs srv:/v",                    // 2 after "-"
		"40 1 0:71 / /m rw - fuse.glusterfs srv:/v rw,user_id=0 extra", // 4 after "-"
		"40 1 0:71 / /m rw shared:1 fuse.glusterfs srv:/v rw",          // no "-"
		"40 1 0:71 / /m  rw - fuse.glusterfs srv:/v rw",                // two spaces
		"40 1 0:71 /\t/m rw - fuse.glusterfs srv:/v rw",                // a tab for a space
		"x 1 0:71 / /m rw - fuse.glusterfs srv:/v rw",
		"40 1 071 / /m rw - fuse.glusterfs srv:/v rw",
		"40 1 0:-1 / /m rw - fuse.glusterfs srv:/v rw",
	} {
		_, err := Parse([]byte("20 1 0:20 / / rw - ext4 /dev/vda rw\n" + line + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("Parse(%q) = %v; want an error naming line 2", line, err)
		}
	}
	infos, err := Parse([]byte("40 1 0:71 / /m rw - tmpfs  rw\n"))
	if err != nil || len(infos) != 1 || infos[0].Source != "" || infos[0].FsType != "tmpfs" {
		t.Errorf("a mount with an empty source: %+v, %v", infos, err)
	}
	infos, err = Parse([]byte("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue,context=\"a,b\"\n"))
	if err != nil || len(infos) != 1 || !slices.Equal(infos[0].OptionalFields, []string{"master:1", "shared:2"}) || len(infos[0].SuperOptions) != 3 {
		t.Errorf("proc(5)'s example: %+v, %v", infos, err)
	}
}

// TestThisMachinesTables: every mount table of this machine's processes
// parses, with as many mounts as lines.
func TestThisMachinesTables(t *testing.T) {
	paths, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	read := 0
	for _, p := range append([]string{"/proc/self/mountinfo"}, paths...) {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // gone, or not ours to read
		}
		infos, err := Parse(data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if n := strings.Count(string(data), "\n"); len(infos) != n {
			t.Errorf("%s: %d mounts of %d lines", p, len(infos), n)
		}
		read++
	}
	if read == 0 {
		t.Fatal("no mount table could be read")
	}
}
