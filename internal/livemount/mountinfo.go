package livemount

import (
	"strings"

	"k8s.io/mount-utils"
)

// ParseMountInfo reads the mount table at path (the format of
// /proc/PID/mountinfo) as [mount.ParseMountInfo] does, and decodes the two
// paths of each mount, MountPoint and Root, with [Unescape]: the kernel
// writes a space, tab, newline or backslash in them as an octal escape
// (\040, \011, \012, \134), which mount.ParseMountInfo leaves as it is. A
// mount point with a space would otherwise never equal the path it is
// mounted at, nor could it be opened.
//
// FsType, Source and the options are left as the kernel writes them:
// escaped, they hold no white space, which keeps them one field wherever
// they are written down again (see Unescape to show a source).
func ParseMountInfo(path string) ([]mount.MountInfo, error) {
	infos, err := mount.ParseMountInfo(path)
	for i := range infos {
		infos[i].MountPoint = Unescape(infos[i].MountPoint)
		infos[i].Root = Unescape(infos[i].Root)
	}
	return infos, err
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
