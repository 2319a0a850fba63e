package cri

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestSocketPath(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "unix:///run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{in: "/run/crio/crio.sock", want: "/run/crio/crio.sock"},
		{in: "unix:///run//x/../y.sock", want: "/run/y.sock"},
		{in: "unix://run/x.sock", bad: true},
		{in: "unix:run/x.sock", bad: true},
		{in: "tcp://127.0.0.1:1234", bad: true},
		{in: "npipe:////./pipe/x", bad: true},
	}
	for _, tc := range tests {
		got, err := SocketPath(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("SocketPath(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestResolveEndpoint(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	if got, err := ResolveEndpoint("/a/b.sock"); err != nil || got != "unix:///a/b.sock" {
		t.Errorf("explicit: %q, %v", got, err)
	}
	t.Setenv(EnvEndpoint, "unix:///from/env.sock")
	if got, err := ResolveEndpoint(""); err != nil || got != "unix:///from/env.sock" {
		t.Errorf("env: %q, %v", got, err)
	}
	if got, _ := ResolveEndpoint("unix:///explicit.sock"); got != "unix:///explicit.sock" {
		t.Errorf("explicit over env: %q", got)
	}

	t.Setenv(EnvEndpoint, "")
	dir := t.TempDir()
	defaults := DefaultEndpoints
	t.Cleanup(func() { DefaultEndpoints = defaults })
	DefaultEndpoints = []string{"unix://" + filepath.Join(dir, "containerd.sock"), "unix://" + filepath.Join(dir, "crio.sock")}
	if _, err := ResolveEndpoint(""); !errors.Is(err, ErrNoEndpoint) {
		t.Errorf("none: %v", err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "crio.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, err := ResolveEndpoint(""); err != nil || got != DefaultEndpoints[1] {
		t.Errorf("probe: %q, %v", got, err)
	}
}

func TestTimeoutSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		0: 1, -time.Second: 1, time.Millisecond: 1, time.Second: 1,
		1001 * time.Millisecond: 2, 2 * time.Minute: 120,
	} {
		if got := TimeoutSeconds(d); got != want {
			t.Errorf("TimeoutSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}
