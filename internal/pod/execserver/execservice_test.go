package execserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

var testID = Identity{PodNamespace: "kube-system", PodName: "mount-x7k2p", PodUID: "0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00", ContainerName: "mount"}

// shortDir returns a new directory with a path short enough for sockets.
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type testServer struct {
	dir, path string
	client    *execclient.Client
	stop      func()
}

// startServer serves testID on a socket under a new registration
// directory and returns a client of it.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	dir := shortDir(t)
	if cfg.Identity == (Identity{}) {
		cfg.Identity = testID
	}
	path := filepath.Join(dir, execclient.SocketName(cfg.Identity.PodUID))
	l, err := Listen(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(cfg).Serve(ctx, l) }()
	c, err := execclient.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			c.Close()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &testServer{dir: dir, path: path, client: c, stop: stop}
}

// runCmd runs cmd to the end and returns its result and output.
func runCmd(t *testing.T, c *execclient.Client, cmd execclient.Command) (execclient.Result, string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	p, err := c.Start(context.Background(), cmd)
	if err != nil {
		return execclient.Result{}, "", "", err
	}
	res, err := p.Wait()
	return res, out.String(), errb.String(), err
}

func TestListen(t *testing.T) {
	ts := startServer(t, Config{})
	fi, err := os.Lstat(filepath.Dir(ts.path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != os.ModeDir|0o700 {
		t.Errorf("socket directory mode %v, want drwx------", fi.Mode())
	}
	fi, err = os.Lstat(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != os.ModeSocket|0o600 {
		t.Errorf("socket mode %v, want Srw-------", fi.Mode())
	}
	if got, err := execclient.CheckSocket(ts.dir, execclient.SocketName(testID.PodUID)); err != nil || got != ts.path {
		t.Errorf("CheckSocket = %q, %v; want %q", got, err, ts.path)
	}
	ts.stop()
	if _, err := os.Lstat(ts.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after Serve returned: %v", err)
	}
}

func TestListenRefuses(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir, sock string)
		want    string
	}{
		{"socket path is a file", func(t *testing.T, dir, sock string) {
			mustMkdir(t, filepath.Dir(sock), 0o700)
			mustWrite(t, sock)
		}, "something else than a socket"},
		{"socket path is a directory", func(t *testing.T, dir, sock string) {
			mustMkdir(t, filepath.Dir(sock), 0o700)
			mustMkdir(t, sock, 0o700)
		}, "something else than a socket"},
		{"socket path is a symlink to a socket", func(t *testing.T, dir, sock string) {
			mustMkdir(t, filepath.Dir(sock), 0o700)
			other := filepath.Join(dir, "other.sock")
			l, err := net.Listen("unix", other)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			if err := os.Symlink(other, sock); err != nil {
				t.Fatal(err)
			}
		}, "something else than a socket"},
		{"directory open to others", func(t *testing.T, dir, sock string) {
			mustMkdir(t, filepath.Dir(sock), 0o755)
		}, "want no access for group and others"},
		{"directory is a file", func(t *testing.T, dir, sock string) {
			mustWrite(t, filepath.Dir(sock))
		}, "not a directory"},
		{"directory is a symlink", func(t *testing.T, dir, sock string) {
			mustMkdir(t, filepath.Join(dir, "elsewhere"), 0o700)
			if err := os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Dir(sock)); err != nil {
				t.Fatal(err)
			}
		}, "not a directory"},
		{"path too long", func(t *testing.T, dir, sock string) {}, "longer than a unix socket address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			sock := filepath.Join(dir, execclient.SocketName(testID.PodUID))
			if tc.name == "path too long" {
				sock = filepath.Join(dir, execclient.SocketDir, strings.Repeat("x", 120)+".sock")
			}
			tc.prepare(t, dir, sock)
			before, _ := os.Lstat(sock)
			l, err := Listen(sock, nil)
			if err == nil {
				l.Close()
				t.Fatal("Listen succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Listen: %v; want an error containing %q", err, tc.want)
			}
			if after, _ := os.Lstat(sock); before != nil && (after == nil || !os.SameFile(before, after)) {
				t.Fatal("Listen removed or replaced what it refused")
			}
		})
	}
}

func TestListenRemovesStaleSocket(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, execclient.SocketName(testID.PodUID))
	mustMkdir(t, filepath.Dir(sock), 0o700)
	// A socket left by a container that died: nobody listens.
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	l, err := Listen(sock, nil)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer l.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the new socket does not answer: %v", err)
	}
	c.Close()
}

func TestIdentity(t *testing.T) {
	ts := startServer(t, Config{Version: "v1.2.3"})
	id, err := ts.client.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := Identity{id.GetPodNamespace(), id.GetPodName(), id.GetPodUid(), id.GetContainerName()}
	if got != testID || id.GetVersion() != "v1.2.3" || id.GetPid() != int64(os.Getpid()) {
		t.Fatalf("Identity = %v", id)
	}
}

func TestExec(t *testing.T) {
	ts := startServer(t, Config{})
	exe := filepath.Join(ts.dir, "not-executable")
	mustWrite(t, exe)
	tests := []struct {
		name      string
		cmd       execclient.Command
		code      int
		sig       syscall.Signal
		out, eout string
		startErr  string // a *execclient.StartError containing this
		notFound  bool
	}{
		{name: "true", cmd: execclient.Command{Argv: []string{"true"}}},
		{name: "exit code", cmd: execclient.Command{Argv: []string{"sh", "-c", "exit 3"}}, code: 3},
		{name: "stdout and stderr", cmd: execclient.Command{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 1"}}, code: 1, out: "out\n", eout: "err\n"},
		{name: "argv0 kept", cmd: execclient.Command{Argv: []string{"sh", "-c", `echo "$0"`, "zero"}}, out: "zero\n"},
		{name: "killed by a signal", cmd: execclient.Command{Argv: []string{"sh", "-c", "kill -9 $$"}}, code: 137, sig: syscall.SIGKILL},
		{name: "not found", cmd: execclient.Command{Argv: []string{"no-such-command-mc"}}, startErr: "executable file not found", notFound: true},
		{name: "not found by path", cmd: execclient.Command{Argv: []string{"/no/such/command"}}, startErr: "no such file", notFound: true},
		{name: "not executable", cmd: execclient.Command{Argv: []string{exe}}, startErr: "permission denied", notFound: true},
		{name: "dir", cmd: execclient.Command{Argv: []string{"pwd"}, Dir: "/"}, out: "/\n"},
		{name: "missing dir", cmd: execclient.Command{Argv: []string{"pwd"}, Dir: "/no/such/dir"}, startErr: "chdir /no/such/dir"},
		{name: "env replaces", cmd: execclient.Command{Argv: []string{"sh", "-c", `echo "$A:$HOME"`}, Env: []string{"A=1", "PATH=/usr/bin:/bin"}}, out: "1:\n"},
		{name: "env PATH is searched", cmd: execclient.Command{Argv: []string{"sh", "-c", "true"}, Env: []string{"PATH=/nonexistent"}}, startErr: "not found", notFound: true},
		{name: "empty env without PATH uses the default", cmd: execclient.Command{Argv: []string{"env"}, Env: []string{}}, out: ""},
		{name: "no stdin is /dev/null", cmd: execclient.Command{Argv: []string{"cat"}}, out: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, out, eout, err := runCmd(t, ts.client, tc.cmd)
			if tc.startErr != "" {
				var se *execclient.StartError
				if !errors.As(err, &se) || !strings.Contains(se.Message, tc.startErr) || se.NotFound != tc.notFound {
					t.Fatalf("err = %v (%#v); want a StartError containing %q, NotFound %v", err, se, tc.startErr, tc.notFound)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Code != tc.code || res.Signal != tc.sig || out != tc.out || eout != tc.eout || res.TimedOut || res.OutputAbandoned {
				t.Fatalf("got %+v stdout %q stderr %q; want code %d signal %v stdout %q stderr %q", res, out, eout, tc.code, tc.sig, tc.out, tc.eout)
			}
		})
	}
}

func TestStdinRoundTrip(t *testing.T) {
	ts := startServer(t, Config{})
	data := make([]byte, 3<<20+17) // several chunks, and more than a pipe holds
	rand.Read(data)
	res, out, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"cat"}, Stdin: bytes.NewReader(data)})
	if err != nil || res.Code != 0 {
		t.Fatalf("cat: %+v, %v", res, err)
	}
	if !bytes.Equal([]byte(out), data) {
		t.Fatalf("stdin round trip: got %d bytes, want %d equal bytes", len(out), len(data))
	}
	// A command that does not read its input still finishes.
	res, _, _, err = runCmd(t, ts.client, execclient.Command{Argv: []string{"true"}, Stdin: bytes.NewReader(data)})
	if err != nil || res.Code != 0 {
		t.Fatalf("true with unread stdin: %+v, %v", res, err)
	}
	// A reader that never ends does not hold Wait once the command exits.
	pr, pw := io.Pipe()
	defer pw.Close()
	start := time.Now()
	res, out, _, err = runCmd(t, ts.client, execclient.Command{Argv: []string{"head", "-c", "3"}, Stdin: io.MultiReader(strings.NewReader("abcdef"), pr)})
	if err != nil || res.Code != 0 || out != "abc" {
		t.Fatalf("head -c 3: %+v %q %v", res, out, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("an endless stdin held the call for %s", d)
	}
}

func TestStreaming(t *testing.T) {
	ts := startServer(t, Config{})
	pr, pw := io.Pipe()
	out := &lineWriter{lines: make(chan string, 10)}
	p, err := ts.client.Start(context.Background(), execclient.Command{Argv: []string{"sh", "-c", "while read l; do echo got $l; done"}, Stdin: pr, Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"one", "two"} {
		fmt.Fprintln(pw, w)
		select {
		case l := <-out.lines:
			if l != "got "+w+"\n" {
				t.Fatalf("got %q", l)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("output was not streamed")
		}
	}
	pw.Close()
	if res, err := p.Wait(); err != nil || res.Code != 0 {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
}

type lineWriter struct{ lines chan string }

func (w *lineWriter) Write(b []byte) (int, error) {
	w.lines <- string(b)
	return len(b), nil
}

func TestDaemonDoesNotHoldTheCall(t *testing.T) {
	ts := startServer(t, Config{})
	start := time.Now()
	var out bytes.Buffer
	// The background sleep keeps stdout and stderr open after sh exits, as
	// a daemonizing utility that does not close them would.
	p, err := ts.client.Start(context.Background(), execclient.Command{Argv: []string{"sh", "-c", "sleep 60 & echo started"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-p.Pid(), syscall.SIGKILL) })
	res, err := p.Wait()
	if err != nil || res.Code != 0 || out.String() != "started\n" {
		t.Fatalf("Wait = %+v, %v, output %q", res, err, out.String())
	}
	if !res.OutputAbandoned {
		t.Error("OutputAbandoned is false")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the daemon held the call for %s", d)
	}
	// The daemon lives on: the call did not kill it.
	if err := syscall.Kill(-p.Pid(), 0); err != nil {
		t.Fatalf("the daemon's process group is gone: %v", err)
	}
}

// TestOutputBeforeExitIsNeverLost: what a command wrote before it exited
// reaches the client however late the server's pumps run after the exit.
// A grace of a nanosecond makes every call end its grace before the pumps
// have sent the output, as a busy node's scheduler can.
func TestOutputBeforeExitIsNeverLost(t *testing.T) {
	ts := startServer(t, Config{OutputGrace: time.Nanosecond})
	const calls, outSize, errSize = 20, 48 << 10, 16 << 10
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			script := fmt.Sprintf("head -c %d /dev/zero; head -c %d /dev/zero >&2; exit %d", outSize, errSize, i%3)
			res, out, eout, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"sh", "-c", script}})
			// Not OutputAbandoned: another call's child, between its
			// fork and its exec, holds a copy of this call's pipes for a
			// moment, and the grace may end then.
			if err != nil || res.Code != i%3 || len(out) != outSize || len(eout) != errSize {
				t.Errorf("call %d: %+v, %v: %d bytes out, %d bytes err; want exit %d, %d and %d bytes",
					i, res, err, len(out), len(eout), i%3, outSize, errSize)
			}
		})
	}
	wg.Wait()
}

func TestTimeout(t *testing.T) {
	ts := startServer(t, Config{})
	start := time.Now()
	res, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"sh", "-c", "sleep 60; echo never"}, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Code != 137 || res.Signal != syscall.SIGKILL {
		t.Fatalf("result %+v, want timed out by SIGKILL", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestCancelKillsTheProcessGroup(t *testing.T) {
	ts := startServer(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	var out lockedBuffer
	p, err := ts.client.Start(ctx, execclient.Command{Argv: []string{"sh", "-c", "sleep 60 & echo $!; wait"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(10 * time.Millisecond) {
		fmt.Sscan(out.String(), &child)
		if time.Now().After(deadline) {
			t.Fatal("no child PID")
		}
	}
	cancel()
	if _, err := p.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if !alive(p.Pid()) && !alive(child) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d or its child %d still alive after cancel", p.Pid(), child)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestSignal(t *testing.T) {
	ts := startServer(t, Config{})
	var out lockedBuffer
	p, err := ts.client.Start(context.Background(), execclient.Command{Argv: []string{"sh", "-c", "trap 'echo term; exit 7' TERM; echo ready; while :; do sleep 0.05; done"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "ready"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil || res.Code != 7 || out.String() != "ready\nterm\n" {
		t.Fatalf("Wait = %+v, %v, output %q", res, err, out.String())
	}
	if err := p.Signal(syscall.SIGTERM); err == nil {
		t.Error("Signal after the end succeeded")
	}
}

func TestIdentityMismatchRunsNothing(t *testing.T) {
	ts := startServer(t, Config{})
	marker := filepath.Join(ts.dir, "ran")
	for _, tc := range []struct{ uid, container string }{
		{"11111111-2222-3333-4444-555555555555", testID.ContainerName},
		{testID.PodUID, "other"},
	} {
		_, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"touch", marker}, ExpectPodUID: tc.uid, ExpectContainer: tc.container})
		if !errors.Is(err, execclient.ErrNotStarted) || status.Code(errors.Unwrap(errors.Unwrap(err))) != codes.FailedPrecondition && !strings.Contains(err.Error(), "FailedPrecondition") {
			t.Fatalf("expecting %s/%s: err = %v, want ErrNotStarted (FailedPrecondition)", tc.uid, tc.container, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the command ran")
		}
	}
	res, _, _, err := runCmd(t, ts.client, execclient.Command{Argv: []string{"true"}, ExpectPodUID: testID.PodUID, ExpectContainer: testID.ContainerName})
	if err != nil || res.Code != 0 {
		t.Fatalf("matching identity: %+v, %v", res, err)
	}
}

func TestServerGoneBeforeStart(t *testing.T) {
	ts := startServer(t, Config{})
	ts.stop()
	c, err := execclient.Dial(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Start(ctx, execclient.Command{Argv: []string{"true"}})
	if !errors.Is(err, execclient.ErrNotStarted) {
		t.Fatalf("Start on a dead socket = %v, want ErrNotStarted", err)
	}
}

func TestServerStopsMidCall(t *testing.T) {
	ts := startServer(t, Config{StopTimeout: 100 * time.Millisecond})
	p, err := ts.client.Start(context.Background(), execclient.Command{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go ts.stop()
	if _, err := p.Wait(); err == nil {
		t.Fatal("Wait returned no error after the server stopped")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}

func mustMkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// peerHelperEnv makes the test binary a client that calls Identity on the
// socket it names and exits 0 if that worked, 3 if not.
const peerHelperEnv = "MC_EXECSERVER_PEER_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(peerHelperEnv); path != "" {
		c, err := execclient.Dial(path)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = c.Identity(ctx)
			cancel()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	if path := os.Getenv(listenHelperEnv); path != "" {
		l, err := net.Listen("unix", path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println("ok")
		conns := make(chan net.Conn, 100) // kept open until the process is killed
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(3)
			}
			select {
			case conns <- c:
			default:
				c.Close()
			}
		}
	}
	os.Exit(m.Run())
}

// listenHelperEnv makes the test binary listen on the socket it names.
const listenHelperEnv = "MC_EXECSERVER_LISTEN_HELPER"

// helperBinary copies the test binary where any user can run it.
func helperBinary(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestNonRootPeerRefused needs root: it connects from a child running as
// nobody to a socket whose file modes would let it in, so that only the
// SO_PEERCRED check stands in the way.
func TestNonRootPeerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to run a client as another user); CI runs it as root")
	}
	ts := startServer(t, Config{})
	for _, p := range []string{ts.dir, filepath.Dir(ts.path)} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(ts.path, 0o666)
	bin := helperBinary(t, ts.dir)
	helper := func(uid uint32) (string, error) {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), peerHelperEnv+"="+ts.path)
		if uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := helper(0); err != nil {
		t.Fatalf("root client refused: %v\n%s", err, out)
	}
	out, err := helper(65534)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("client as nobody: %v\n%s; want it refused (exit 3)", err, out)
	}
}

// TestNonRootServerRefused needs root: the client refuses a socket served
// by a process that is neither root nor the client's user.
func TestNonRootServerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to serve as another user); CI runs it as root")
	}
	dir := shortDir(t)
	os.Chmod(dir, 0o777)
	path := filepath.Join(dir, "nobody.sock")
	// A listener made by a process running as nobody.
	cmd := exec.Command(helperBinary(t, dir), "-test.run=^$")
	cmd.Env = append(os.Environ(), listenHelperEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 3)
	if _, err := io.ReadFull(stdout, buf); err != nil {
		t.Fatalf("helper listener: %v", err)
	}
	c, err := execclient.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Identity(ctx)
	if err == nil || !strings.Contains(err.Error(), "not root") {
		t.Fatalf("Identity against a socket served by nobody = %v, want a refusal", err)
	}
}
