// Package mountinfo reads the mount table of a process
// (/proc/PID/mountinfo, proc(5)) strictly, as the kernel writes it: its
// fields are separated by single spaces, and the kernel escapes a space,
// tab, newline and backslash in a field as an octal \ooo, but no other
// white space. Whoever names a mount (a FUSE file system's fsname, a
// subPath, a directory) may put a vertical tab, form feed or carriage
// return in it; a parser that splits on any white space (strings.Fields)
// then reads the fields that follow from that name, such as a superblock
// option user_id=0 or a mount option rw. Here they stay in the field they
// are part of, and a line whose fields are not the kernel's is an error.
//
// The node's and the mount pods' processes (the recovery, the survey of
// live mounts) and the rollout, which reads a mount pod's table, use it.
package mountinfo

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"k8s.io/mount-utils"
)

// ParseFile reads the mount table at path (see [Parse]).
func ParseFile(path string) ([]mount.MountInfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	infos, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return infos, nil
}

// Parse parses a mount table. MountPoint and Root are decoded with
// [Unescape]: they are paths as they are on disk. FsType, Source and the
// options are left as the kernel writes them: escaped, they hold no
// space, tab or newline, which keeps them one field wherever they are
// written down again (Unescape them to show them).
func Parse(data []byte) ([]mount.MountInfo, error) {
	s := string(data) // the one copy: every field is a part of it
	lines := strings.Count(s, "\n") + 1
	infos := make([]mount.MountInfo, 0, lines)
	p := parser{strs: make([]string, 0, 8*lines)}
	for n := 1; s != ""; n++ {
		line, rest, _ := strings.Cut(s, "\n")
		s = rest
		if line == "" {
			continue
		}
		mi, err := p.line(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w: %q", n, err, line)
		}
		infos = append(infos, mi)
	}
	return infos, nil
}

// parser holds what [Parse] reuses from line to line, so that a table of
// hundreds of mounts, which the recovery reads again after every change,
// costs a few allocations rather than a few for each line.
type parser struct {
	fields []string // the fields of the line being parsed
	// strs backs the entries' lists (options, optional fields): each
	// takes its part, its capacity cut to its length, so that appending
	// to one never writes into the next.
	strs []string
}

// line parses one line:
//
//	ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
func (p *parser) line(line string) (mount.MountInfo, error) {
	f := p.fields[:0]
	for { // strings.Split(line, " ")
		i := strings.IndexByte(line, ' ')
		if i < 0 {
			f = append(f, line)
			break
		}
		f, line = append(f, line[:i]), line[i+1:]
	}
	p.fields = f
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) != sep+4 {
		return mount.MountInfo{}, fmt.Errorf("not the kernel's fields (want 6 or more, \"-\", then 3, single spaces between)")
	}
	// Only the source may be empty (a mount(2) with source ""); an empty
	// field anywhere else is two spaces the kernel does not write.
	for i, s := range f {
		if s == "" && i != sep+2 {
			return mount.MountInfo{}, fmt.Errorf("field %d is empty", i+1)
		}
	}
	id, err1 := strconv.Atoi(f[0])
	parent, err2 := strconv.Atoi(f[1])
	majStr, minStr, ok := strings.Cut(f[2], ":")
	major, err3 := strconv.Atoi(majStr)
	minor, err4 := strconv.Atoi(minStr)
	if err1 != nil || err2 != nil || !ok || err3 != nil || err4 != nil || id < 0 || parent < 0 || major < 0 || minor < 0 {
		return mount.MountInfo{}, fmt.Errorf("bad mount ID, parent ID or device number")
	}
	var optional []string
	if sep > 6 {
		optional = p.take(len(p.strs), append(p.strs, f[6:sep]...))
	}
	return mount.MountInfo{
		ID:             id,
		ParentID:       parent,
		Major:          major,
		Minor:          minor,
		Root:           Unescape(f[3]),
		MountPoint:     Unescape(f[4]),
		MountOptions:   p.take(len(p.strs), appendOptions(p.strs, f[5])),
		OptionalFields: optional,
		FsType:         f[sep+1],
		Source:         f[sep+2],
		SuperOptions:   p.take(len(p.strs), appendOptions(p.strs, f[sep+3])),
	}, nil
}

// take keeps strs, p.strs with a list appended from index from on (in a
// new array if it had to grow), as p.strs, and returns the list with its
// capacity cut to its length.
func (p *parser) take(from int, strs []string) []string {
	p.strs = strs
	return strs[from:len(strs):len(strs)]
}

// appendOptions appends to dst the options of a list, split at the commas
// outside double quotes (an SELinux context="a,b" is one option), as
// mount-utils does; empty ones are dropped.
func appendOptions(dst []string, s string) []string {
	inQuotes := false
	start := -1 // of the option being read
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ',' && !inQuotes:
			if start >= 0 {
				dst, start = append(dst, s[start:i]), -1
			}
			continue
		case c == '"':
			inQuotes = !inQuotes
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		dst = append(dst, s[start:])
	}
	return dst
}

// Unescape undoes the octal escapes (a backslash and three octal digits,
// such as \040 for a space) the kernel writes in the fields of
// /proc/PID/mountinfo. A backslash not followed by three octal digits of a
// byte's value is kept as it is: the kernel writes a backslash itself as
// \134.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) && s[i+1] <= '3' {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
