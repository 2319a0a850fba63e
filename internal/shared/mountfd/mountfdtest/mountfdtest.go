// Package mountfdtest runs a test in a private mount namespace of its own,
// as root, so that it can make real mounts (tmpfs, binds, FUSE) that
// nothing outside the test sees and that go with it. Only tests link it.
package mountfdtest

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// envMountNS names, in the process that runs a test in a private mount
// namespace, that test.
const envMountNS = "MOUNTFD_TEST_MOUNT_NS"

// InPrivateMountNS reports whether the calling test runs in a private mount
// namespace of its own. When it does not, InPrivateMountNS runs the test
// again, alone, in a new process in such a namespace (util-linux unshare),
// fails the caller if that run failed, and reports false: the caller then
// returns. Without root the test is skipped.
func InPrivateMountNS(t *testing.T) bool {
	t.Helper()
	if os.Getenv(envMountNS) == t.Name() {
		return true
	}
	if os.Geteuid() != 0 {
		t.Skip("mounts need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no util-linux unshare to make a private mount namespace")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		self, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envMountNS+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a private mount namespace: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skipf("in a private mount namespace:\n%s", out)
	}
	t.Logf("in a private mount namespace:\n%s", out)
	return false
}

// MountTmpfs mounts a small tmpfs at dir, creating dir.
func MountTmpfs(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v", dir, err)
	}
}

// Base returns a new directory on a tmpfs of its own, unmounted when the
// test ends.
func Base(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	MountTmpfs(t, base)
	t.Cleanup(func() { unix.Unmount(base, unix.MNT_DETACH) })
	return base
}
