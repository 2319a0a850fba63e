package shim_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
	crifake "github.com/mountcontainers/mountcontainers/pkg/cri/critest"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// nobody is the owner the tests give what root must not trust.
const nobody = 65534

// needRoot skips t unless it can change owners: the refusals are of files
// root does not own, which only root can make.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
}

// shortDir returns a new directory with a short path (a unix socket's path
// holds 107 bytes; t.TempDir embeds the test's name), removed at the end.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "trust")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// listen creates a unix socket at path, open until the test ends.
func listen(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // not masked by the umask
		t.Fatal(err)
	}
}

func lchown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// trustCase lays out a path below base and says what checking it gives:
// the path returned, or an error naming blame and saying why.
type trustCase struct {
	name  string
	setup func(t *testing.T, base string) (path, want, blame, why string)
}

func TestCheckRuntimeSocket(t *testing.T) {
	needRoot(t)
	// base/run/cri.sock, base/run 0755: what every case starts from.
	layout := func(t *testing.T, base string) (run, sock string) {
		run = filepath.Join(base, "run")
		mkdir(t, run, 0o755)
		sock = filepath.Join(run, "cri.sock")
		listen(t, sock)
		return run, sock
	}
	for _, tc := range []trustCase{
		{"root's socket", func(t *testing.T, base string) (string, string, string, string) {
			_, sock := layout(t, base)
			return sock, sock, "", ""
		}},
		{"socket not root's", func(t *testing.T, base string) (string, string, string, string) {
			_, sock := layout(t, base)
			lchown(t, sock, nobody)
			return sock, "", sock, "owned by uid 65534"
		}},
		{"directory not root's", func(t *testing.T, base string) (string, string, string, string) {
			run, sock := layout(t, base)
			lchown(t, run, nobody)
			return sock, "", run, "owned by uid 65534"
		}},
		{"directory writable by group", func(t *testing.T, base string) (string, string, string, string) {
			run, sock := layout(t, base)
			mkdir(t, run, 0o775)
			return sock, "", run, "writable by group or others"
		}},
		{"ancestor writable by others", func(t *testing.T, base string) (string, string, string, string) {
			_, sock := layout(t, base)
			mkdir(t, base, 0o757)
			return sock, "", base, "writable by group or others"
		}},
		{"directory root's and sticky", func(t *testing.T, base string) (string, string, string, string) {
			run, sock := layout(t, base)
			mkdir(t, run, 0o777|os.ModeSticky)
			return sock, sock, "", ""
		}},
		{"directory sticky but not root's", func(t *testing.T, base string) (string, string, string, string) {
			run, sock := layout(t, base)
			mkdir(t, run, 0o777|os.ModeSticky)
			lchown(t, run, nobody)
			return sock, "", run, "owned by uid 65534"
		}},
		{"symbolic link not root's", func(t *testing.T, base string) (string, string, string, string) {
			layout(t, base)
			mkdir(t, filepath.Join(base, "var"), 0o755)
			link := filepath.Join(base, "var", "run")
			symlink(t, "../run", link)
			lchown(t, link, nobody)
			return filepath.Join(link, "cri.sock"), "", link, "symbolic link owned by uid 65534"
		}},
		{"root's symbolic link, as /var/run", func(t *testing.T, base string) (string, string, string, string) {
			_, sock := layout(t, base)
			mkdir(t, filepath.Join(base, "var"), 0o755)
			link := filepath.Join(base, "var", "run")
			symlink(t, "../run", link)
			return filepath.Join(link, "cri.sock"), sock, "", ""
		}},
		{"root's symbolic link to a directory not root's", func(t *testing.T, base string) (string, string, string, string) {
			evil := filepath.Join(base, "evil")
			mkdir(t, evil, 0o755)
			listen(t, filepath.Join(evil, "cri.sock"))
			lchown(t, evil, nobody)
			symlink(t, evil, filepath.Join(base, "run"))
			return filepath.Join(base, "run", "cri.sock"), "", evil, "owned by uid 65534"
		}},
		{"socket is a symbolic link not root's", func(t *testing.T, base string) (string, string, string, string) {
			_, sock := layout(t, base)
			link := filepath.Join(base, "link.sock")
			symlink(t, sock, link)
			lchown(t, link, nobody)
			return link, "", link, "symbolic link owned by uid 65534"
		}},
		{"not a socket", func(t *testing.T, base string) (string, string, string, string) {
			run, _ := layout(t, base)
			f := filepath.Join(run, "file.sock")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return f, "", f, "is a regular file, not a socket"
		}},
		{"missing in root's directory: the dial reports it", func(t *testing.T, base string) (string, string, string, string) {
			run, _ := layout(t, base)
			p := filepath.Join(run, "down", "cri.sock")
			return p, p, "", ""
		}},
		{"missing in a directory others may write", func(t *testing.T, base string) (string, string, string, string) {
			run, _ := layout(t, base)
			mkdir(t, run, 0o777|os.ModeSticky)
			p := filepath.Join(run, "none.sock")
			return p, "", p, "does not exist"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, want, blame, why := tc.setup(t, shortDir(t))
			got, err := shim.CheckRuntimeSocket(path)
			checkTrust(t, path, got, err, want, blame, why)
		})
	}
}

func TestCheckTrustedDir(t *testing.T) {
	needRoot(t)
	for _, tc := range []trustCase{
		{"root's directory", func(t *testing.T, base string) (string, string, string, string) {
			d := filepath.Join(base, "host")
			mkdir(t, d, 0o755)
			return d, d, "", ""
		}},
		{"not root's", func(t *testing.T, base string) (string, string, string, string) {
			d := filepath.Join(base, "host")
			mkdir(t, d, 0o755)
			lchown(t, d, nobody)
			return d, "", d, "owned by uid 65534"
		}},
		{"writable by group", func(t *testing.T, base string) (string, string, string, string) {
			d := filepath.Join(base, "host")
			mkdir(t, d, 0o775)
			return d, "", d, "writable by group or others"
		}},
		{"root's and sticky", func(t *testing.T, base string) (string, string, string, string) {
			d := filepath.Join(base, "host")
			mkdir(t, d, 0o777|os.ModeSticky)
			return d, "", d, "writable by group or others"
		}},
		{"ancestor writable by group", func(t *testing.T, base string) (string, string, string, string) {
			a := filepath.Join(base, "a")
			d := filepath.Join(a, "host")
			mkdir(t, d, 0o755)
			mkdir(t, a, 0o775)
			return d, "", a, "writable by group or others"
		}},
		{"ancestor not root's", func(t *testing.T, base string) (string, string, string, string) {
			a := filepath.Join(base, "a")
			d := filepath.Join(a, "host")
			mkdir(t, d, 0o755)
			lchown(t, a, nobody)
			return d, "", a, "owned by uid 65534"
		}},
		{"symbolic link, even root's", func(t *testing.T, base string) (string, string, string, string) {
			mkdir(t, filepath.Join(base, "real"), 0o755)
			link := filepath.Join(base, "host")
			symlink(t, "real", link)
			return link, "", link, "is a symbolic link"
		}},
		{"below a symbolic link", func(t *testing.T, base string) (string, string, string, string) {
			mkdir(t, filepath.Join(base, "real", "host"), 0o755)
			link := filepath.Join(base, "link")
			symlink(t, "real", link)
			return filepath.Join(link, "host"), "", link, "is a symbolic link"
		}},
		{"not a directory", func(t *testing.T, base string) (string, string, string, string) {
			f := filepath.Join(base, "host")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return f, "", f, "is a regular file, not a directory"
		}},
		{"missing", func(t *testing.T, base string) (string, string, string, string) {
			d := filepath.Join(base, "host")
			return d, "", d, "does not exist"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, want, blame, why := tc.setup(t, shortDir(t))
			err := shim.CheckTrustedDir(path)
			checkTrust(t, path, want, err, want, blame, why)
			if why == "does not exist" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("error %v is not fs.ErrNotExist", err)
			}
		})
	}
}

// checkTrust checks what checking path gave: want, or an error naming
// blame and why.
func checkTrust(t *testing.T, path, got string, err error, want, blame, why string) {
	t.Helper()
	if blame == "" {
		if err != nil || got != want {
			t.Fatalf("%s: got %q, %v; want %q", path, got, err, want)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), blame+" ") || !strings.Contains(err.Error(), why) {
		t.Fatalf("%s: got %q, %v; want refused, naming %s: %s", path, got, err, blame, why)
	}
}

// TestUntrustedRuntimeSocketIsRefused: the helper does not talk to a
// runtime socket root does not own, wherever the endpoint comes from (the
// environment here), for a command or for status.
func TestUntrustedRuntimeSocketIsRefused(t *testing.T) {
	needRoot(t)
	reg := t.TempDir()
	if err := registration.Write(reg, "kubernetes.io/glusterfs", validRegistration()); err != nil {
		t.Fatal(err)
	}
	rt := crifake.NewFakeRuntime()
	endpoint := rt.Serve(t)
	r0 := validRegistration()
	rt.SetContainers(crifake.Container("0123456789abcdef", r0.PodNamespace, r0.PodName, r0.PodUID, r0.ContainerName, runtimeapi.ContainerState_CONTAINER_RUNNING))
	rt.SetExec(func(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
		return &runtimeapi.ExecSyncResponse{Stdout: []byte("ran by whoever serves the socket\n")}, nil
	})
	env := []string{shim.EnvRuntimeEndpoint + "=" + endpoint}
	runArgs := []string{"--exec-mode", "cri", "--registration-dir", reg, "run", "--plugin", "kubernetes.io/glusterfs", "--", "true"}
	if r := run(t, env, "", shimBin, runArgs...); r.code != 0 {
		t.Fatalf("through root's socket: code %d, stderr %q; want 0", r.code, r.stderr)
	}

	sock := strings.TrimPrefix(endpoint, "unix://")
	lchown(t, sock, nobody)
	lists, execs := rt.ListCalls(), len(rt.ExecRequests())
	for _, args := range [][]string{runArgs, {"--registration-dir", reg, "status"}} {
		r := run(t, env, "", shimBin, args...)
		if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, sock+" is owned by uid 65534") {
			t.Errorf("%v through a socket of uid %d: code %d, stdout %q, stderr %q; want 125 naming %s", args, nobody, r.code, r.stdout, r.stderr, sock)
		}
	}
	if rt.ListCalls() != lists || len(rt.ExecRequests()) != execs {
		t.Errorf("the runtime behind the untrusted socket was asked: %d lists, %d execs, want %d, %d", rt.ListCalls(), len(rt.ExecRequests()), lists, execs)
	}
}

// TestUntrustedHostRootIsRefused: in nsenter mode the host's root decides
// which binary root runs, so it must be root's.
func TestUntrustedHostRootIsRefused(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, host string) // nil: the host root is named through a link
		why   string
	}{
		{"not root's", func(t *testing.T, host string) { lchown(t, host, nobody) }, "owned by uid 65534"},
		{"writable by group", func(t *testing.T, host string) { mkdir(t, host, 0o775) }, "writable by group or others"},
		{"through a symbolic link", nil, "is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			host := filepath.Join(base, "host")
			mkdir(t, host, 0o755)
			hostRoot, blame := host, host
			if tc.setup != nil {
				tc.setup(t, host)
			} else {
				link := filepath.Join(base, "link")
				symlink(t, host, link)
				hostRoot, blame = link, link
			}
			r := run(t, noRuntime(t), "", shimBin, "--host-mode", "nsenter", "--host-root", hostRoot,
				"--registration-dir", t.TempDir(), "run", "--plugin", "kubernetes.io/rbd", "--", "true")
			if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, "host root: "+blame+" ") || !strings.Contains(r.stderr, tc.why) {
				t.Errorf("code %d, stderr %q; want 125 naming %s: %s", r.code, r.stderr, blame, tc.why)
			}
		})
	}
}

// TestHelperBelowAWritableAncestorIsRefused: the helper's directory is
// walked from /, so an ancestor whose writers could swap the directory is
// refused too.
func TestHelperBelowAWritableAncestorIsRefused(t *testing.T) {
	needRoot(t)
	a := filepath.Join(t.TempDir(), "a")
	dir := filepath.Join(a, "bin")
	mkdir(t, dir, 0o755)
	for _, name := range []string{shim.BinaryName, shim.HelperName} {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(shimBin), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(t, a, 0o775)
	r := run(t, noRuntime(t), "", filepath.Join(dir, shim.BinaryName), "--registration-dir", t.TempDir(), "status")
	if r.code != shim.ExitShimFailed || !strings.Contains(r.stderr, a+" is writable by group or others") {
		t.Errorf("helper below a group-writable %s: code %d, stderr %q; want 125, refused naming it", a, r.code, r.stderr)
	}
}
