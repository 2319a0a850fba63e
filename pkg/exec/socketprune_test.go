package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/pod/execserver"
	"github.com/mountcontainers/mountcontainers/internal/pod/execserver/execservertest"
	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

// serveSocket serves an exec service at path until the returned function
// is called (which removes the socket).
func serveSocket(t *testing.T, path string) func() {
	t.Helper()
	return execservertest.Serve(t, path, execserver.Config{Identity: testIdentity})
}

// TestSocketClientsPruned: a resolver that meets one mount pod after
// another (a socket per pod UID) keeps no client of a socket that is gone,
// never more than maxSocketClients idle ones, never drops one in use, and
// leaves no goroutine behind once closed.
func TestSocketClientsPruned(t *testing.T) {
	base, err := os.MkdirTemp("", "mcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	g0 := runtime.NumGoroutine()
	r := NewResolver(Options{Dir: base})
	use := func(path string) {
		t.Helper()
		c, release, err := r.socketClient(path)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if _, err := c.Identity(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	sock := func(i int) string { return filepath.Join(base, ".exec", fmt.Sprintf("pod-%d.sock", i)) }

	// Pods replaced one after another: only the live one's client stays.
	for i := range 5 {
		stop := serveSocket(t, sock(i))
		use(sock(i))
		if n := len(r.sockets); n != 1 {
			t.Fatalf("after pod %d: %d clients kept, want 1 (the sockets of the pods before are gone)", i, n)
		}
		stop()
	}

	// Many live sockets: at most maxSocketClients idle clients, and one in
	// use is never dropped.
	stops := []func(){serveSocket(t, sock(100))}
	held, release, err := r.socketClient(sock(100))
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 10+2*maxSocketClients; i++ {
		stops = append(stops, serveSocket(t, sock(i)))
		use(sock(i))
	}
	if n := len(r.sockets); n > maxSocketClients+1 {
		t.Fatalf("%d clients kept, want at most %d", n, maxSocketClients+1)
	}
	if _, err := held.Identity(context.Background()); err != nil {
		t.Fatalf("the client in use was closed: %v", err)
	}
	release()

	r.Close()
	for _, stop := range stops {
		stop()
	}
	g1 := runtime.NumGoroutine()
	for deadline := time.Now().Add(3 * time.Second); g1 > g0 && time.Now().Before(deadline); g1 = runtime.NumGoroutine() {
		time.Sleep(20 * time.Millisecond)
	}
	if g1 > g0 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", g1, g0, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("goroutines: %d before, %d after Close", g0, g1)
}

// TestSocketOutputLimit: through the exec socket, a stream over
// execclient.MaxOutput is cut there and the command's error wraps
// ErrOutputLimit; a failing command keeps its exit code, and the error
// names the truncation.
func TestSocketOutputLimit(t *testing.T) {
	e := newSocketEnv(t, testIdentity)
	ex := e.exec(t, Options{ExecMode: ModeSocket})
	n := fmt.Sprint(execclient.MaxOutput + 1000)
	out, err := ex.Command("head", "-c", n, "/dev/zero").Output()
	if len(out) != execclient.MaxOutput || err == nil || !strings.Contains(err.Error(), "stdout truncated") {
		t.Fatalf("%d bytes, %v; want %d and an error saying stdout was truncated", len(out), err, execclient.MaxOutput)
	}
	if !errors.Is(err, ErrOutputLimit) {
		t.Fatalf("%v does not wrap ErrOutputLimit", err)
	}
	_, err = ex.Command("sh", "-c", "head -c "+n+" /dev/zero >&2; exit 4").Output()
	ee, ok := err.(utilexec.ExitError)
	if !ok || ee.ExitStatus() != 4 || !strings.Contains(err.Error(), "stderr truncated") {
		t.Fatalf("%v (%T), want exit status 4 naming the truncation", err, err)
	}
}
