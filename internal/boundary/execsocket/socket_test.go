package execsocket

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testPodUID = "0c9f2d1e-5b7a-4c3e-9f10-2a6b8d4e1f00"

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

func TestCheckSocketTrusted(t *testing.T) {
	dir := shortDir(t)
	rel := SocketName(testPodUID)
	mustMkdir(t, filepath.Join(dir, SocketDir), 0o700)
	listenAt(t, filepath.Join(dir, rel))
	if got, err := CheckSocket(dir, rel); err != nil || got != filepath.Join(dir, rel) {
		t.Fatalf("CheckSocket = %q, %v; want %q", got, err, filepath.Join(dir, rel))
	}
}

func TestCheckSocket(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string) string // returns rel
		want    string
	}{
		{"group-writable directory", func(t *testing.T, dir string) string {
			mustMkdir(t, filepath.Join(dir, "d"), 0o770)
			os.Chmod(filepath.Join(dir, "d"), 0o770)
			listenAt(t, filepath.Join(dir, "d", "s.sock"))
			return "d/s.sock"
		}, "writable by group or others"},
		{"symlinked directory", func(t *testing.T, dir string) string {
			mustMkdir(t, filepath.Join(dir, "real"), 0o700)
			listenAt(t, filepath.Join(dir, "real", "s.sock"))
			os.Symlink("real", filepath.Join(dir, "link"))
			return "link/s.sock"
		}, "not a directory"},
		{"regular file", func(t *testing.T, dir string) string {
			mustWrite(t, filepath.Join(dir, "f.sock"))
			return "f.sock"
		}, "not a socket"},
		{"symlink to a socket", func(t *testing.T, dir string) string {
			listenAt(t, filepath.Join(dir, "s.sock"))
			os.Symlink("s.sock", filepath.Join(dir, "l.sock"))
			return "l.sock"
		}, "not a socket"},
		{"missing", func(t *testing.T, dir string) string { return ".exec/none.sock" }, "no such file"},
		{"outside", func(t *testing.T, dir string) string { return "../x.sock" }, "not a path inside"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			rel := tc.prepare(t, dir)
			if _, err := CheckSocket(dir, rel); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckSocket = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSocketName(t *testing.T) {
	if got := SocketName(testPodUID); got != ".exec/"+testPodUID+".sock" {
		t.Errorf("SocketName = %q", got)
	}
	for _, uid := range []string{"a/b", "..", strings.Repeat("a", 65), "-x"} {
		got := SocketName(uid)
		if !strings.HasPrefix(got, ".exec/") || strings.Count(got, "/") != 1 || len(got) != len(".exec/")+32+len(".sock") {
			t.Errorf("SocketName(%q) = %q", uid, got)
		}
	}
}

func listenAt(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
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

func TestPeerCredentials(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	defer server.Close()
	// Both ends are this process.
	for name, conn := range map[string]net.Conn{"client side": c, "server side": server} {
		uid, pid, err := PeerCredentials(conn)
		if err != nil || uid != uint32(os.Geteuid()) || pid != int32(os.Getpid()) {
			t.Errorf("%s: PeerCredentials = %d, %d, %v; want %d, %d", name, uid, pid, err, os.Geteuid(), os.Getpid())
		}
	}
	if _, _, err := PeerCredentials(pipeConn{}); err == nil || !strings.Contains(err.Error(), "not a unix socket") {
		t.Errorf("PeerCredentials of a pipe = %v", err)
	}
}

// pipeConn is a net.Conn that is not a unix socket.
type pipeConn struct{ net.Conn }

func TestTrustedUID(t *testing.T) {
	if !TrustedUID(0) || !TrustedUID(uint32(os.Geteuid())) {
		t.Error("root or the caller's own user not trusted")
	}
	if os.Geteuid() != 65534 && TrustedUID(65534) {
		t.Error("nobody trusted")
	}
}
