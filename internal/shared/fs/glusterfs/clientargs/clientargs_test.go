package clientargs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The distribution's helper the translation is held against:
// testdata/mount.glusterfs is /sbin/mount.glusterfs of Debian 12's
// glusterfs-client 10.3-5 (the mount pod's, images/Dockerfile), unchanged.
// The end-to-end suite checks that the image still carries this script.
const (
	scriptFile   = "testdata/mount.glusterfs"
	scriptSHA256 = "1fcc462ed6a6c23464b429e2700fffeda4afb1739affde8e01dc1e32c20fac22"
)

// script runs the distribution's helper on the machine's /bin/sh with a
// stub client that records its arguments.
type script struct {
	dir, path, out string
}

// newScript copies the script into a directory of its own with the paths
// it acts on moved there: its client (PREFIX/sbin/glusterfs), updatedb's
// configuration (which it edits) and glusterd's state (which it reads).
func newScript(t *testing.T) *script {
	t.Helper()
	for _, tool := range []string{"/bin/sh", "sed", "awk", "cut", "grep", "wc", "stat", "uname"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the script's table test needs %s: %v", tool, err)
		}
	}
	data, err := os.ReadFile(scriptFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &script{dir: dir, path: filepath.Join(dir, "mount.glusterfs"), out: filepath.Join(dir, "argv")}
	text := string(data)
	for old, new := range map[string]string{
		`prefix="/usr";`:                        `prefix="` + dir + `";`,
		`UPDATEDBCONF=/etc/updatedb.conf`:       `UPDATEDBCONF=` + dir + `/updatedb.conf`,
		`GLUSTERD_WORKDIR="/var/lib/glusterd";`: `GLUSTERD_WORKDIR="` + dir + `/glusterd";`,
	} {
		if strings.Count(text, old) != 1 {
			t.Fatalf("%s: %q is not there once: is it still the script of glusterfs-client 10.3?", scriptFile, old)
		}
		text = strings.Replace(text, old, new, 1)
	}
	if err := os.WriteFile(s.path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sbin"), 0o755); err != nil {
		t.Fatal(err)
	}
	stub := "#!/bin/sh\n: > \"$ARGV_OUT\"\nfor a; do printf '%s\\0' \"$a\" >> \"$ARGV_OUT\"; done\n"
	if err := os.WriteFile(filepath.Join(dir, "sbin", "glusterfs"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs the script with args after its name; argv is what the stub
// client was called with (nil when it was not), code the script's exit
// status.
func (s *script) run(t *testing.T, args ...string) (argv []string, code int, stderr string) {
	t.Helper()
	os.Remove(s.out)
	cmd := exec.Command("/bin/sh", append([]string{s.path}, args...)...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "ARGV_OUT=" + s.out, "LC_ALL=C"}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	if data, err := os.ReadFile(s.out); err == nil {
		argv = strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
		if len(data) == 0 {
			argv = []string{}
		}
	}
	return argv, code, errb.String()
}

// withoutSecondMountopts drops the script's second --fuse-mountopts, the
// same as its first: [Args] passes it once.
func withoutSecondMountopts(argv []string) []string {
	var out []string
	seen := ""
	for _, a := range argv {
		if strings.HasPrefix(a, "--fuse-mountopts=") {
			if seen == a {
				continue
			}
			seen = a
		}
		out = append(out, a)
	}
	return out
}

func TestScriptIsTheImages(t *testing.T) {
	if got := sha256File(t, scriptFile); got != scriptSHA256 {
		t.Fatalf("%s has SHA-256 %s, want %s: a changed script needs the translation checked again", scriptFile, got, scriptSHA256)
	}
}

// TestArgsAsTheScript: for every option of the script, and the sources and
// flags mount(8) passes, Args gives the client the arguments the script
// gives it, in the same order.
func TestArgsAsTheScript(t *testing.T) {
	s := newScript(t)
	mnt := filepath.Join(s.dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	volfile := filepath.Join(s.dir, "client.vol")
	if err := os.WriteFile(volfile, []byte("volume x\nend-volume\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string // after SOURCE TARGET
		src  string
	}{
		{"the drivers' options", []string{"-o", "rw,log-level=ERROR,auto_unmount,backup-volfile-servers=srv2:srv3"}, "srv1:/vol"},
		{"the drivers' read-only mount", []string{"-o", "ro,nodev,nosuid,noexec,backup-volfile-servers=srv2"}, "srv1:/vol"},
		{"no options", nil, "srv:/vol"},
		{"every flag", []string{"-o", "ro,acl,selinux,worm,enable-ino32,mem-accounting,aux-gfid-mount,thin-client,resolve-gids,global-threading,localtime-logging,fopen-keep-cache"}, "srv:/vol"},
		{"the options with values, first half", []string{"-o", "log-level=warning,log-file=/var/log/g.log,transport=tcp,direct-io-mode=enable,volume-name=vol-dht,volfile-check=on,server-port=24008,attribute-timeout=1,entry-timeout=2,negative-timeout=3,gid-timeout=4,lru-limit=5,invalidate-limit=6,background-qlen=64"}, "srv:/vol"},
		{"the options with values, second half", []string{"-o", "fetch-attempts=3,congestion-threshold=7,oom-score-adj=-10,xlator-option=*dht*.readdir-optimize=on,use-readdirp=yes,event-history=on,reader-thread-count=2,auto-invalidation=on,kernel-writeback-cache=yes,attr-times-granularity=1,dump-fuse=/tmp/d,fuse-flush-handle-interrupt=yes,fuse-dev-eperm-ratelimit-ns=100,io-engine=io_uring,process-name=client1"}, "srv:/vol"},
		{"halo and root squash", []string{"-o", "halo-max-latency=5,halo-max-replicas=3,halo-min-replicas=2,no-root-squash=yes"}, "srv:/vol"},
		{"root-squash=off", []string{"-o", "root-squash=off"}, "srv:/vol"},
		{"root-squash=on and no-root-squash=no: nothing", []string{"-o", "root-squash=on,no-root-squash=no"}, "srv:/vol"},
		{"the kernel's options", []string{"-o", "atime,noatime,diratime,nodiratime,relatime,norelatime,strictatime,nostrictatime,lazyatime,nolazyatime,dev,nodev,exec,noexec,suid,nosuid,auto_unmount"}, "srv:/vol"},
		{"SELinux contexts", []string{"-o", "context=system_u:object_r:nfs_t:s0,nodev,rootcontext=system_u:object_r:tmp_t:s0"}, "srv:/vol"},
		{"dropped and unhandled options", []string{"-o", "rw,auto,noauto,_netdev,sync,async,dirsync,mand,nomand,silent,loud,iversion,noiversion,nofail,x-systemd.automount,x-a=b,acl"}, "srv:/vol"},
		{"backupvolfile-server", []string{"-o", "backupvolfile-server=srv9"}, "srv:/vol"},
		{"backup-volfile-servers wins over backupvolfile-server", []string{"-o", "backupvolfile-server=srv9,backup-volfile-servers=srv2"}, "srv:/vol"},
		{"an IPv6 backup in brackets", []string{"-o", "backup-volfile-servers=[fe80::1]:srv2:[::1]"}, "srv:/vol"},
		{"servers in the source", nil, "a,b.example.com,10.0.0.3:/vol"},
		{"a volume without a slash", nil, "srv:vol"},
		{"a subdirectory", nil, "srv:/vol/sub/dir"},
		{"a subdirectory, no slash", nil, "srv:vol/sub"},
		{"a trailing slash", nil, "srv:/vol/"},
		{"a snapshot mounts read-only", nil, "srv:/snaps/s1/vol"},
		{"snaps without the slash is not a snapshot's", nil, "srv:snaps/s1/vol"},
		{"subdir-mount option", []string{"-o", "subdir-mount=a/b"}, "srv:/vol"},
		{"the source's subdirectory wins", []string{"-o", "subdir-mount=a"}, "srv:/vol/b"},
		{"volume-id is the source's", []string{"-o", "volume-id=other"}, "srv:/vol"},
		{"rdma transport names the volume file", []string{"-o", "transport=rdma,server-port=24008"}, "srv:/vol"},
		{"a volume file", []string{"-o", "ro"}, volfile},
		{"mount(8)'s -n and -s", []string{"-n", "-s", "-o", "acl"}, "srv:/vol"},
		{"a second -o", []string{"-o", "acl", "-o", "ro"}, "srv:/vol"},
		{"a server of 63 bytes", nil, strings.Repeat("s", 63) + ":/vol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, code, stderr := s.run(t, append([]string{tc.src, mnt}, tc.args...)...)
			if code != 0 || want == nil {
				t.Fatalf("the script: exit %d, client called: %v; stderr:\n%s", code, want != nil, stderr)
			}
			got, target, isMount, err := Args(append([]string{"/sbin/mount.glusterfs", tc.src, mnt}, tc.args...))
			if err != nil || !isMount || target != mnt {
				t.Fatalf("Args: %v (mount %v, target %q)", err, isMount, target)
			}
			if got[0] != Program {
				t.Errorf("Args runs %q, want %q", got[0], Program)
			}
			if want := withoutSecondMountopts(want); !slices.Equal(got[1:], want) {
				t.Errorf("Args gives the client\n  %q\nthe script\n  %q", got[1:], want)
			}
		})
	}
}

// TestArgsDepartures: where the script's translation is wrong or lossy,
// Args departs from it, on purpose, each shown here with what the script
// does.
func TestArgsDepartures(t *testing.T) {
	s := newScript(t)
	mnt := filepath.Join(s.dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string // SOURCE TARGET ...; TARGET is mnt
		scriptArgv []string // what the script gives the client (nil: it is not called)
		scriptCode int
		want       []string // Args' (without the client's name and target); nil: refused
		err        string
	}{
		{"fopen-keep-cache=BOOL: the script makes --fopen-keep-cache==BOOL, which the client refuses",
			[]string{"srv:/vol", mnt, "-o", "fopen-keep-cache=false"},
			[]string{"--fopen-keep-cache==false", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", mnt}, 0,
			[]string{"--fopen-keep-cache=false", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol"}, ""},
		{"volfile-max-fetch-attempts, the client's name, which package glusterfs allows: the script refuses it",
			[]string{"srv:/vol", mnt, "-o", "volfile-max-fetch-attempts=3"}, nil, 1,
			[]string{"--volfile-max-fetch-attempts=3", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol"}, ""},
		{"defaults: the script refuses it",
			[]string{"srv:/vol", mnt, "-o", "defaults"}, nil, 1,
			[]string{"--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol"}, ""},
		{"-oOPTIONS: the script fails (exit 2, shift: can't shift that many)",
			[]string{"srv:/vol", mnt, "-oacl,ro"}, nil, 2,
			[]string{"--read-only", "--acl", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol"}, ""},
		{"-v (verbose): the script prints its usage and exits 0 without a mount",
			[]string{"srv:/vol", mnt, "-v", "-o", "acl"}, nil, 0,
			[]string{"--acl", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol"}, ""},

		{"-f (fake): the script exits 0 without a mount; refused",
			[]string{"srv:/vol", mnt, "-f", "-o", "acl"}, nil, 0, nil, "-f (fake mount) is not supported"},
		{"an unknown log level: the script warns and logs at INFO; refused",
			[]string{"srv:/vol", mnt, "-o", "log-level=chatty"},
			[]string{"--log-level=INFO", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", mnt}, 0,
			nil, `"CHATTY" is no log level`},
		{"an empty value: the script drops it; refused",
			[]string{"srv:/vol", mnt, "-o", "log-file=,acl"},
			[]string{"--acl", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", mnt}, 0,
			nil, `option "log-file" has an empty value`},
		{"a server name of 64 bytes: the script skips it; refused",
			[]string{"srv," + strings.Repeat("s", 64) + ":/vol", mnt},
			[]string{"--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", mnt}, 0,
			nil, "longer than 63 bytes"},
		{"an unknown squash word: the script ignores it; refused",
			[]string{"srv:/vol", mnt, "-o", "no-root-squash=maybe"},
			[]string{"--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", mnt}, 0,
			nil, `"maybe" is not one of`},
		{"backup servers that name none: the script adds none; refused",
			[]string{"srv:/vol", mnt, "-o", "backup-volfile-servers=:"},
			[]string{"--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", mnt}, 0,
			nil, "names no server"},
		{"a source naming no volume: the script mounts volume /; refused",
			[]string{"srv:/", mnt},
			[]string{"--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/", mnt}, 0,
			nil, "names no volume"},

		{"an unknown option: both refuse",
			[]string{"srv:/vol", mnt, "-o", "bogus"}, nil, 1, nil, `invalid option "bogus"`},
		{"an unknown option with a value: both refuse",
			[]string{"srv:/vol", mnt, "-o", "bogus=1"}, nil, 1, nil, `invalid option "bogus"`},
		{"a space in a value: the script drops what follows it; refused",
			[]string{"srv:/vol", mnt, "-o", "log-file=/a b"},
			[]string{"--log-file=/a", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", mnt}, 0,
			nil, "holds a space"},
		{"no server: both refuse",
			[]string{"vol", mnt}, nil, 1, nil, "want SERVER"},
		{"broken brackets: both refuse",
			[]string{"srv:/vol", mnt, "-o", "backup-volfile-servers=[::1"}, nil, 1, nil, "without its ']'"},
		{"an address in brackets without ':': both refuse",
			[]string{"srv:/vol", mnt, "-o", "backup-volfile-servers=[srv2]"}, nil, 1, nil, "without ':'"},
		{"a character no host name has: the script passes it on; refused",
			[]string{"srv;reboot:/vol", mnt},
			[]string{"--process-name", "fuse", "--volfile-server=srv;reboot", "--volfile-id=/vol", mnt}, 0,
			nil, `";" may not be in a server's name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv, code, stderr := s.run(t, tc.args...)
			if code != tc.scriptCode || !slices.Equal(argv, tc.scriptArgv) {
				t.Errorf("the script: exit %d, client %q; want exit %d, client %q (stderr %q)", code, argv, tc.scriptCode, tc.scriptArgv, stderr)
			}
			got, _, _, err := Args(append([]string{"mount.glusterfs"}, tc.args...))
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("Args: %q, %v; want a refusal with %q", got, err, tc.err)
				}
				var e *Error
				if !errors.As(err, &e) || e.Code != 1 {
					t.Errorf("Args' refusal %v: want an *Error with code 1", err)
				}
				return
			}
			if want := append(append([]string{Program}, tc.want...), mnt); err != nil || !slices.Equal(got, want) {
				t.Errorf("Args: %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestArgsNotAMount(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want []string
	}{
		{[]string{"mount.glusterfs", "-V"}, []string{"glusterfs", "-V"}},
		{[]string{"mount.glusterfs", "--version"}, []string{"glusterfs", "-V"}},
	} {
		got, target, isMount, err := Args(tc.argv)
		if err != nil || isMount || target != "" || !slices.Equal(got, tc.want) {
			t.Errorf("Args(%q) = %q, %q, %v, %v; want %q, not a mount", tc.argv, got, target, isMount, err, tc.want)
		}
	}
	for _, argv := range [][]string{
		{"mount.glusterfs"},
		{"mount.glusterfs", "-h"},
		{"mount.glusterfs", "srv:/vol"},
		{"mount.glusterfs", "-o", "acl", "srv:/vol", "/mnt"},
		{"mount.glusterfs", "srv:/vol", "/mnt", "-o"},
		{"mount.glusterfs", "srv:/vol", "/mnt", "-N", "/proc/1/ns/mnt"},
		{"mount.glusterfs", "srv:/vol", "/mnt", "extra"},
		{"mount.glusterfs", "srv:/vol", "/mnt\x00x"},
		{"mount.glusterfs", "srv:/v\tol", "/mnt"},
	} {
		if got, _, _, err := Args(argv); err == nil {
			t.Errorf("Args(%q) = %q; want a refusal", argv, got)
		}
	}
}

// TestArgsKeepsValuesWhole: a value the script would expand as a file name
// pattern, or a mount point with a space, is one argument.
func TestArgsKeepsValuesWhole(t *testing.T) {
	got, target, _, err := Args([]string{"mount.glusterfs", "srv:/vol", "/mnt/a b", "-o", "xlator-option=*/*", "-o", "dump-fuse=$(reboot)"})
	want := []string{"glusterfs", "--xlator-option=*/*", "--dump-fuse=$(reboot)", "--process-name", "fuse", "--volfile-server=srv", "--volfile-id=/vol", "/mnt/a b"}
	if err != nil || target != "/mnt/a b" || !slices.Equal(got, want) {
		t.Errorf("Args = %q, %q, %v; want %q", got, target, err, want)
	}
}
