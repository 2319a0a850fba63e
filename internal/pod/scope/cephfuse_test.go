package scope

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCephFuseArgs(t *testing.T) {
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
			args, target, mount, err := cephFuseArgs(tc.argv)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("cephFuseArgs(%q) = %q, %v; want an error with %q", tc.argv, args, err, tc.err)
				}
				if args != nil || mount {
					t.Errorf("refused, yet args %q, mount %v", args, mount)
				}
				return
			}
			if err != nil || !slices.Equal(args, tc.want) {
				t.Fatalf("cephFuseArgs(%q) = %q, %v; want %q", tc.argv, args, err, tc.want)
			}
			wantTarget, wantMount := HelperTarget(tc.argv)
			if target != wantTarget || mount != wantMount {
				t.Errorf("target, mount = %q, %v; want %q, %v", target, mount, wantTarget, wantMount)
			}
		})
	}
}

// recordExec replaces execve for the test and returns what it was called
// with (nil when it was not); the replacement fails with ENOEXEC-like err.
func recordExec(t *testing.T) *[]string {
	t.Helper()
	var got []string
	old := execve
	execve = func(path string, argv, env []string) error {
		got = append([]string{path}, argv...)
		return errors.New("recorded")
	}
	t.Cleanup(func() { execve = old })
	return &got
}

// fakeTools returns a PATH directory holding an executable ceph-fuse and
// the directory of a mount.fuse.ceph with its diverted script.
func fakeTools(t *testing.T) (bin, sbin string) {
	t.Helper()
	bin, sbin = t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(bin, "ceph-fuse"), filepath.Join(sbin, "mount.fuse.ceph"), filepath.Join(sbin, "mount.fuse.ceph"+DivertedSuffix)} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 99\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin, sbin
}

func getenvOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestRunHelperCephFuse: mount.fuse.ceph executes ceph-fuse from PATH with
// the translated arguments, never the diverted script.
func TestRunHelperCephFuse(t *testing.T) {
	got := recordExec(t)
	bin, sbin := fakeTools(t)
	getenv := getenvOf(map[string]string{"PATH": sbin + ":relative/dir:" + bin, EnvScopes: "false"})
	env := []string{"PATH=x", "A=b"}

	err := RunHelper(getenv, []string{filepath.Join(sbin, "mount.fuse.ceph"), "none", "/mnt/x", "-o", "rw,ceph.id=a,ceph.client_fs=cephfs"}, env)
	want := []string{filepath.Join(bin, "ceph-fuse"), "ceph-fuse", "--id=a", "--client_fs=cephfs", "/mnt/x", "-o", "rw"}
	if !slices.Equal(*got, want) {
		t.Errorf("executed %q, want %q", *got, want)
	}
	if err == nil || ExitCode(err) != ExitCannotRun || !strings.Contains(err.Error(), "recorded") {
		t.Errorf("a failed exec: %v (exit %d), want the exec's error, exit %d", err, ExitCode(err), ExitCannotRun)
	}

	*got = nil
	RunHelper(getenv, []string{"mount.fuse.ceph", "-V"}, env)
	if want := []string{filepath.Join(bin, "ceph-fuse"), "ceph-fuse", "--version"}; !slices.Equal(*got, want) {
		t.Errorf("-V executed %q, want %q", *got, want)
	}

	// Another helper still runs its diverted program.
	other := filepath.Join(sbin, "mount.glusterfs")
	for _, p := range []string{other, other + DivertedSuffix} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	*got = nil
	RunHelper(getenv, []string{other, "srv:/v", "/mnt/x", "-o", "ceph.id=a"}, env)
	if want := []string{other + DivertedSuffix, other, "srv:/v", "/mnt/x", "-o", "ceph.id=a"}; !slices.Equal(*got, want) {
		t.Errorf("mount.glusterfs executed %q, want %q", *got, want)
	}
}

// TestRunHelperCephFuseRefusals: a refused translation, a missing ceph-fuse
// or a scope that cannot be had runs nothing.
func TestRunHelperCephFuseRefusals(t *testing.T) {
	got := recordExec(t)
	bin, sbin := fakeTools(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		argv []string
		code int
		err  string
	}{
		{"empty value", map[string]string{"PATH": bin, EnvScopes: "false"},
			[]string{"mount.fuse.ceph", "none", "/mnt/x", "-o", "ceph.keyfile="}, ExitFailed, `mount helper mount.fuse.ceph: option "ceph.keyfile" has an empty value`},
		{"NUL", map[string]string{"PATH": bin, EnvScopes: "false"},
			[]string{"mount.fuse.ceph", "none", "/mnt/x", "-o", "ceph.id=\x00"}, ExitFailed, `option "ceph.id" holds a NUL byte`},
		{"no ceph-fuse on PATH (the script is not a fallback)", map[string]string{"PATH": sbin, EnvScopes: "false"},
			[]string{filepath.Join(sbin, "mount.fuse.ceph"), "none", "/mnt/x"}, ExitNotFound, "ceph-fuse"},
		{"no scope: no plugin to put it under", map[string]string{"PATH": bin, EnvPlugins: "a,b"},
			[]string{"mount.fuse.ceph", "none", "/mnt/x", "-o", "ceph.id=a"}, ExitFailed, "scope for /mnt/x"},
		{"no scope: bad settings", map[string]string{"PATH": bin, EnvScopes: "maybe"},
			[]string{"mount.fuse.ceph", "none", "/mnt/x"}, ExitFailed, "scope for /mnt/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*got = nil
			err := RunHelper(getenvOf(tc.env), tc.argv, nil)
			if *got != nil {
				t.Errorf("executed %q", *got)
			}
			if err == nil || ExitCode(err) != tc.code || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("RunHelper: %v (exit %d); want exit %d and %q", err, ExitCode(err), tc.code, tc.err)
			}
		})
	}
}

func TestLookPathDefault(t *testing.T) {
	// With PATH empty, the shell's default is searched: sh is there.
	if p, err := lookPath(func(string) string { return "" }, "sh"); err != nil || !strings.HasPrefix(p, "/") {
		t.Errorf("lookPath(sh) with no PATH = %q, %v", p, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"noexec", "adir", "missing"} {
		if p, err := lookPath(getenvOf(map[string]string{"PATH": dir}), name); err == nil || ExitCode(err) != ExitNotFound {
			t.Errorf("lookPath(%s) = %q, %v; want not found", name, p, err)
		}
	}
}
