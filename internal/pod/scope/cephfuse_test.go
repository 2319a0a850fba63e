package scope

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
	other := filepath.Join(sbin, "mount.fuse3")
	for _, p := range []string{other, other + DivertedSuffix} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	*got = nil
	RunHelper(getenv, []string{other, "srv:/v", "/mnt/x", "-o", "ceph.id=a"}, env)
	if want := []string{other + DivertedSuffix, other, "srv:/v", "/mnt/x", "-o", "ceph.id=a"}; !slices.Equal(*got, want) {
		t.Errorf("mount.fuse3 executed %q, want %q", *got, want)
	}
}

// TestRunHelperScripts: MOUNTPOD_HELPER_SCRIPTS makes a translated helper
// run the distribution's script, as any other helper; a name it does not
// translate is refused, whatever helper runs.
func TestRunHelperScripts(t *testing.T) {
	got := recordExec(t)
	bin, sbin := fakeTools(t)
	gluster := filepath.Join(sbin, "mount.glusterfs")
	for _, p := range []string{gluster, gluster + DivertedSuffix} {
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"PATH": sbin + ":" + bin, EnvScopes: "false", EnvScripts: "mount.glusterfs"}
	argv := []string{gluster, "srv:/v", "/mnt/x", "-o", "acl"}
	RunHelper(getenvOf(env), argv, nil)
	if want := append([]string{gluster + DivertedSuffix}, argv...); !slices.Equal(*got, want) {
		t.Errorf("with %s=mount.glusterfs: executed %q, want the script %q", EnvScripts, *got, want)
	}
	// The other translated helper is still translated.
	*got = nil
	RunHelper(getenvOf(env), []string{filepath.Join(sbin, "mount.fuse.ceph"), "none", "/mnt/x", "-o", "ceph.id=a"}, nil)
	if want := []string{filepath.Join(bin, "ceph-fuse"), "ceph-fuse", "--id=a", "/mnt/x"}; !slices.Equal(*got, want) {
		t.Errorf("mount.fuse.ceph with %s=mount.glusterfs: executed %q, want %q", EnvScripts, *got, want)
	}
	*got = nil
	env[EnvScripts] = "mount.glusterfs, mount.nfs"
	err := RunHelper(getenvOf(env), argv, nil)
	if *got != nil || err == nil || !strings.Contains(err.Error(), `"mount.nfs" is not a helper mount-scope translates`) || ExitCode(err) != ExitFailed {
		t.Errorf("a misspelt %s: executed %q, %v (exit %d); want nothing run and the name refused", EnvScripts, *got, err, ExitCode(err))
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
