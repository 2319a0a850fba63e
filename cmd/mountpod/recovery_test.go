package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/pod/hostinstall"
	"github.com/mountcontainers/mountcontainers/internal/pod/registrar"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// TestRecoveryChecksAllowedServers: a mount pod that installs a Flexvolume
// driver makes a dead mount again only while the driver's allow-list
// allows its servers, and says which server and plugin it refused; one that
// installs no driver has no allow-list to apply.
func TestRecoveryChecksAllowedServers(t *testing.T) {
	cfg := registrar.Config{Pod: pod, Plugins: []string{"kubernetes.io/glusterfs"}, Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	rec := func(source string) mountrecord.Record {
		return mountrecord.Record{Plugin: "kubernetes.io/glusterfs", Source: source, Target: "/t", FSType: "glusterfs"}
	}

	r, err := newRecoverer(cfg, hostinstall.Config{FlexvolumeAllowedServers: []string{"10.0.0.1"}}, nil, nil)
	if err != nil || r.Allow != nil {
		t.Fatalf("no driver installed: Allow set (%v), err %v; want no check", r.Allow != nil, err)
	}

	inst := hostinstall.Config{FlexvolumeDir: t.TempDir(), FlexvolumeAllowedServers: []string{"10.0.0.1"}}
	r, err = newRecoverer(cfg, inst, nil, nil)
	if err != nil || r.Allow == nil {
		t.Fatalf("driver installed: Allow set %v, err %v; want the allow-list's check", r.Allow != nil, err)
	}
	if err := r.Allow(context.Background(), rec("10.0.0.1:/vol")); err != nil {
		t.Errorf("an allowed server is refused: %v", err)
	}
	err = r.Allow(context.Background(), rec("10.0.0.9:/vol"))
	if err == nil {
		t.Fatal("a server removed from the allow-list is allowed")
	}
	for _, want := range []string{"plugin kubernetes.io/glusterfs", "server 10.0.0.9", "MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}

// TestServeRecoveryUsesTheDriversAllowList: serve gives the recovery the
// allow-list of the driver it installs.
func TestServeRecoveryUsesTheDriversAllowList(t *testing.T) {
	for _, tc := range []struct {
		name    string
		install bool
	}{{"driver installed", true}, {"no driver", false}} {
		t.Run(tc.name, func(t *testing.T) {
			setPodEnv(t)
			if tc.install {
				t.Setenv(hostinstall.EnvFlexvolumeDir, t.TempDir())
			}
			t.Setenv("MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS", "10.0.0.1,gluster-1.example")
			// serve stops before it registers: the recovery has started.
			t.Setenv("MOUNTPOD_REQUIRE_TOOLS", "no-such-tool-here")
			code, _, stderr := runApp(context.Background(), "serve")
			if code != 1 {
				t.Fatalf("serve = %d, want 1 (missing tool); stderr:\n%s", code, stderr)
			}
			said := strings.Contains(stderr, "made again only while the Flexvolume driver's allow-list allows") &&
				strings.Contains(stderr, "10.0.0.1") && strings.Contains(stderr, "gluster-1.example")
			if said != tc.install {
				t.Errorf("the recovery applies the allow-list: %v, want %v; stderr:\n%s", said, tc.install, stderr)
			}
		})
	}
}
