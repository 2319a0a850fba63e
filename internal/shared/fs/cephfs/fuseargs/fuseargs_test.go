package fuseargs

import (
	"slices"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

func TestArgs(t *testing.T) {
	const h = "/sbin/mount.fuse.ceph"
	for _, tc := range []struct {
		name string
		argv []string
		want []string // nil: refused
		err  string   // in the refusal
	}{
		{"ceph options become long options, in order",
			[]string{h, "none", "/mnt/x", "-o", "ceph.id=admin,ceph.client_fs=cephfs,ceph.mon_host=10.0.0.1:6789"},
			[]string{"ceph-fuse", "--id=admin", "--client_fs=cephfs", "--mon_host=10.0.0.1:6789", "/mnt/x"}, ""},
		{"a ceph option without a value is a flag",
			[]string{h, "none", "/mnt/x", "-o", "ceph.fuse_default_permissions,ceph.id=a"},
			[]string{"ceph-fuse", "--fuse_default_permissions", "--id=a", "/mnt/x"}, ""},
		{"fuse options after the mount point, in their order, defaults/noauto/_netdev/nofail dropped",
			[]string{h, "none", "/mnt/x", "-o", "rw,defaults,ceph.id=a,noatime,_netdev,noauto,nofail,allow_other"},
			[]string{"ceph-fuse", "--id=a", "/mnt/x", "-o", "rw,noatime,allow_other"}, ""},
		{"only dropped options: no -o",
			[]string{h, "none", "/mnt/x", "-o", "defaults,_netdev,ceph.id=a"},
			[]string{"ceph-fuse", "--id=a", "/mnt/x"}, ""},
		{"values keep '=' ';' and shell syntax as one argument",
			[]string{h, "none", "/mnt/x", "-o", "ceph.mon_host=v1:1.2.3.4:6789;v1:1.2.3.5:6789,ceph.keyfile=/k;rm -rf /,ceph.a=b=c"},
			[]string{"ceph-fuse", "--mon_host=v1:1.2.3.4:6789;v1:1.2.3.5:6789", "--keyfile=/k;rm -rf /", "--a=b=c", "/mnt/x"}, ""},
		{"a mount point with spaces and shell syntax is one argument",
			[]string{h, "none", "/mnt/a b;$(reboot)", "-o", "ceph.id=a"},
			[]string{"ceph-fuse", "--id=a", "/mnt/a b;$(reboot)"}, ""},
		{"the old form: options in the source",
			[]string{h, "id=admin,conf=/etc/ceph/ceph.conf", "/mnt/x", "-o", "ceph.client_mountpoint=/sub,ro"},
			[]string{"ceph-fuse", "--id=admin", "--conf=/etc/ceph/ceph.conf", "--client_mountpoint=/sub", "/mnt/x", "-o", "ro"}, ""},
		{"a source without '=' is ignored",
			[]string{h, "cephfs", "/mnt/x", "-o", "ceph.id=a"},
			[]string{"ceph-fuse", "--id=a", "/mnt/x"}, ""},
		{"no options", []string{h, "none", "/mnt/x"}, []string{"ceph-fuse", "/mnt/x"}, ""},
		{"a relative mount point is made absolute (as the scope's)",
			[]string{h, "none", "/mnt/x/../y", "-o", "ceph.id=a"},
			[]string{"ceph-fuse", "--id=a", "/mnt/y"}, ""},
		{"mount(8)'s flags are ignored, several -o joined, -oOPTS, -t",
			[]string{h, "none", "/mnt/x", "-s", "-nv", "-o", "ceph.id=a", "-oro", "-t", "fuse.ceph", "-o", "ceph.conf=/dev/null,,"},
			[]string{"ceph-fuse", "--id=a", "--conf=/dev/null", "/mnt/x", "-o", "ro"}, ""},
		{"-V", []string{h, "-V"}, []string{"ceph-fuse", "--version"}, ""},
		{"--version", []string{h, "--version"}, []string{"ceph-fuse", "--version"}, ""},

		{"empty ceph value", []string{h, "none", "/mnt/x", "-o", "ceph.id=a,ceph.keyfile="}, nil, `"ceph.keyfile" has an empty value`},
		{"empty fuse value", []string{h, "none", "/mnt/x", "-o", "fsname="}, nil, `"fsname" has an empty value`},
		{"no name", []string{h, "none", "/mnt/x", "-o", "ceph.=x"}, nil, `"ceph.=x" has no name`},
		{"bare ceph.", []string{h, "none", "/mnt/x", "-o", "ceph."}, nil, `"ceph." has no name`},
		{"NUL in a ceph value", []string{h, "none", "/mnt/x", "-o", "ceph.id=a\x00b"}, nil, `"ceph.id" holds a NUL byte`},
		{"NUL in a fuse option", []string{h, "none", "/mnt/x", "-o", "ro,x\x00"}, nil, `"x\x00" holds a NUL byte`},
		{"NUL in the target", []string{h, "none", "/mnt/x\x00y"}, nil, "NUL byte"},
		{"NUL in the source", []string{h, "id=a\x00", "/mnt/x"}, nil, "NUL byte"},
		{"empty value in the old form", []string{h, "id=,conf=/c", "/mnt/x"}, nil, `option "id=" has no name or an empty value`},
		{"empty entry in the old form", []string{h, "id=a,,conf=/c", "/mnt/x"}, nil, `option "" has no name`},
		{"fake mount", []string{h, "none", "/mnt/x", "-f", "-o", "ceph.id=a"}, nil, "-f (fake mount)"},
		{"fake among flags", []string{h, "none", "/mnt/x", "-vf"}, nil, "-f (fake mount)"},
		{"other namespace", []string{h, "none", "/mnt/x", "-N", "/proc/1/ns/mnt"}, nil, "-N"},
		{"-o without value", []string{h, "none", "/mnt/x", "-o"}, nil, "-o needs a value"},
		{"unknown flag", []string{h, "none", "/mnt/x", "-d"}, nil, `unexpected argument "-d"`},
		{"stray argument", []string{h, "none", "/mnt/x", "/mnt/y"}, nil, `unexpected argument "/mnt/y"`},
		{"no target", []string{h, "none"}, nil, "usage: mount.fuse.ceph"},
		{"option as target", []string{h, "none", "--help"}, nil, "usage: mount.fuse.ceph"},
		{"nothing", []string{h}, nil, "usage: mount.fuse.ceph"},
		{"help", []string{h, "-h"}, nil, "usage: mount.fuse.ceph"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, target, mount, err := Args(tc.argv)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Args(%q) = %q, %v; want an error with %q", tc.argv, args, err, tc.err)
				}
				if args != nil || mount {
					t.Errorf("refused, yet args %q, mount %v", args, mount)
				}
				return
			}
			if err != nil || !slices.Equal(args, tc.want) {
				t.Fatalf("Args(%q) = %q, %v; want %q", tc.argv, args, err, tc.want)
			}
			wantTarget, wantMount := boundary.MountHelperTarget(tc.argv)
			if target != wantTarget || mount != wantMount {
				t.Errorf("target, mount = %q, %v; want %q, %v", target, mount, wantTarget, wantMount)
			}
		})
	}
}
