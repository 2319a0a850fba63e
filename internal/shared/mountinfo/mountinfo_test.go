package mountinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
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

// referenceParse is Parse as it was written first, a line and its fields
// at a time (strings.Split, strings.FieldsFunc): what FuzzParse holds the
// allocation-sparing Parse to.
func referenceParse(data []byte) ([]mountInfo, error) {
	var infos []mountInfo
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		sep := slices.Index(f[min(6, len(f)):], "-")
		if sep >= 0 {
			sep += 6
		}
		if sep < 0 || len(f) != sep+4 {
			return nil, fmt.Errorf("line %d: fields", n+1)
		}
		for i, s := range f {
			if s == "" && i != sep+2 {
				return nil, fmt.Errorf("line %d: field %d is empty", n+1, i+1)
			}
		}
		var nums [4]int
		majmin := strings.SplitN(f[2], ":", 2)
		for i, s := range append([]string{f[0], f[1]}, majmin...) {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 || len(majmin) != 2 {
				return nil, fmt.Errorf("line %d: numbers", n+1)
			}
			nums[i] = v
		}
		split := func(s string) []string {
			q := false
			return strings.FieldsFunc(s, func(r rune) bool {
				if r == '"' {
					q = !q
				}
				return r == ',' && !q
			})
		}
		var optional []string
		if sep > 6 {
			optional = f[6:sep]
		}
		infos = append(infos, mountInfo{nums[0], nums[1], nums[2], nums[3], Unescape(f[3]), Unescape(f[4]),
			split(f[5]), optional, f[sep+1], f[sep+2], split(f[sep+3])})
	}
	return infos, nil
}

// mountInfo is mount.MountInfo's fields, compared with reflect.DeepEqual.
type mountInfo struct {
	ID, ParentID, Major, Minor   int
	Root, MountPoint             string
	MountOptions, OptionalFields []string
	FsType, Source               string
	SuperOptions                 []string
}

// FuzzParse: Parse accepts what the reference parser accepts, with the
// same entries, and refuses the rest naming the same line; appending to
// one entry's lists changes no other entry.
func FuzzParse(f *testing.F) {
	f.Add([]byte("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue,context=\"a,b\"\n" +
		"40 1 0:71 / /m rw - tmpfs  rw\n\n41 1 0:72 /d\v/data\vrw /data ro,,relatime - fuse.glusterfs srv:/v rw,user_id=0,group_id=0"))
	f.Add([]byte("40 1 0:71 / /m , - fuse.glusterfs srv:/v \",\"\n"))
	f.Add([]byte("40 1 071 / /m rw - fuse.glusterfs srv:/v rw\n"))
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := referenceParse(data)
		infos, err := Parse(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("Parse: %v; the reference: %v", err, werr)
		}
		if err != nil {
			line, _, _ := strings.Cut(werr.Error(), ":")
			if !strings.Contains(err.Error(), "mountinfo "+line+":") {
				t.Fatalf("Parse: %v; the reference refused %s", err, line)
			}
			return
		}
		var got []mountInfo // nil when empty, as the reference's
		for _, mi := range infos {
			got = append(got, mountInfo{mi.ID, mi.ParentID, mi.Major, mi.Minor, mi.Root, mi.MountPoint,
				mi.MountOptions, mi.OptionalFields, mi.FsType, mi.Source, mi.SuperOptions})
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse:\n%#v\nthe reference:\n%#v", got, want)
		}
		for i := range infos {
			infos[i].MountOptions = append(infos[i].MountOptions, "appended")
			infos[i].OptionalFields = append(infos[i].OptionalFields, "appended")
			infos[i].SuperOptions = append(infos[i].SuperOptions, "appended")
		}
		for i, mi := range infos {
			w := want[i]
			if !slices.Equal(mi.MountOptions, append(slices.Clip(w.MountOptions), "appended")) ||
				!slices.Equal(mi.OptionalFields, append(slices.Clip(w.OptionalFields), "appended")) ||
				!slices.Equal(mi.SuperOptions, append(slices.Clip(w.SuperOptions), "appended")) {
				t.Fatalf("entry %d after appending to every entry's lists: %+v; want %+v with one more in each", i, mi, w)
			}
		}
	})
}

// BenchmarkParse parses a table of 245 mounts, as a mount pod's is while
// a hundred pods each have a memory-backed emptyDir: what the recovery
// reads again after each change of its table.
func BenchmarkParse(b *testing.B) {
	var tb strings.Builder
	for i := range 245 {
		fmt.Fprintf(&tb, "%d 25 0:%d / /var/lib/kubelet/pods/0d3c1f6e-5b8a-4f7e-9a51-%012d/volumes/kubernetes.io~empty-dir/data rw,relatime shared:%d master:1 - tmpfs tmpfs rw,size=1048576k,inode64\n", 100+i, 60+i, i, 200+i)
	}
	data := []byte(tb.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
