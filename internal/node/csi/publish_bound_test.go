package csi

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	csiapi "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
)

// TestPublishLookupDoesNotHoldTheCall: the lookup beneath the staging
// mount (held here, as a server that answers statfs but not lookups would
// hold it) does not hold NodePublish past its context; the volume's next
// call is Aborted while the lookup still runs, not queued behind it; once
// the lookup ends, the bind it made is the published target and a retry
// finds it so. No clock decides: the contexts are ended by the test.
func TestPublishLookupDoesNotHoldTheCall(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	base := mountfdtest.Base(t)
	staging, target := filepath.Join(base, "staging"), filepath.Join(base, "target")
	mountfdtest.MountTmpfs(t, staging)
	n := node{d: &Driver{Name: "glusterfs.mountcontainers.io", FS: glusterfs.FS{}, Volumes: &volume.Mounter{Timeout: time.Hour}}}

	started, release := make(chan struct{}), make(chan struct{})
	bindVolume = func(staging, sub, target string, ro bool) error {
		close(started)
		<-release
		return volume.Bind(staging, sub, target, ro)
	}
	t.Cleanup(func() { bindVolume = volume.Bind })
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})

	req := &csiapi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: &csiapi.VolumeCapability{
			AccessType: &csiapi.VolumeCapability_Mount{Mount: &csiapi.VolumeCapability_MountVolume{}},
			AccessMode: &csiapi.VolumeCapability_AccessMode{Mode: csiapi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		}}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := n.NodePublishVolume(ctx, req)
		first <- err
	}()
	// The call reaches the lookup, or ends before it (which it must not).
	select {
	case <-started:
	case err := <-first:
		t.Fatalf("NodePublish ended before its lookup: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("NodePublish reached no lookup within a minute")
	}
	cancel()
	if err := within(t, "NodePublish whose lookup hangs, its context ended", first); status.Code(err) != codes.Canceled {
		t.Fatalf("NodePublish whose lookup hangs, its context ended: %v; want Canceled", err)
	}
	if mounted(t, target, base) {
		t.Fatal("the target is mounted while the lookup still hangs")
	}

	ended, stop := context.WithCancel(context.Background())
	stop()
	second, third := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := n.NodePublishVolume(ended, req)
		second <- err
	}()
	if err := within(t, "NodePublish of the volume while its lookup hangs", second); status.Code(err) != codes.Aborted {
		t.Fatalf("NodePublish of the volume while its lookup hangs: %v; want Aborted", err)
	}
	go func() {
		_, err := n.NodeUnpublishVolume(ended, &csiapi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target})
		third <- err
	}()
	if err := within(t, "NodeUnpublish of the target while its lookup hangs", third); status.Code(err) != codes.Aborted {
		t.Fatalf("NodeUnpublish of the target while its lookup hangs: %v; want Aborted", err)
	}

	released = true
	close(release)
	// The retry waits for the lookup's end (the locks), then finds the
	// target published by it.
	if _, err := n.NodePublishVolume(context.Background(), req); err != nil {
		t.Fatalf("NodePublish once the lookup ended: %v", err)
	}
	if !mounted(t, target, base) {
		t.Fatal("the target is not mounted after the lookup ended")
	}
	if _, err := n.NodeUnpublishVolume(context.Background(), &csiapi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublish: %v", err)
	}
}

// within returns what ch gives, or fails the test when nothing comes
// within a minute: a hang guard, far above the microseconds these calls
// take, never the verdict.
func within(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s: no answer within a minute", what)
		return nil
	}
}

// mounted reports whether dir is on another device than base.
func mounted(t *testing.T, dir, base string) bool {
	t.Helper()
	var d, b unix.Stat_t
	if err := unix.Stat(base, &b); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(dir, &d); err != nil {
		return false
	}
	return d.Dev != b.Dev
}
