package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// LoopDevice makes a file of sizeMiB MiB under the bed's loop directory,
// formats it with mkfs.<fsType> unless fsType is empty (an unformatted
// device), attaches it to a loop device and returns the device path. The
// device is detached and the file removed at the end of the test (down.sh
// also detaches every loop device backed by a file under the bed directory).
// Make it before any pod that must see it: a privileged container's /dev is
// a snapshot taken when the container is created.
func (b *Bed) LoopDevice(t testing.TB, sizeMiB int64, fsType string) string {
	t.Helper()
	dir := b.Env.LoopDir
	if dir == "" {
		dir = filepath.Join(b.Env.BedDir, "loop")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("loop device: %v", err)
	}
	f, err := os.CreateTemp(dir, "disk-*.img")
	if err != nil {
		t.Fatalf("loop device: %v", err)
	}
	file := f.Name()
	t.Cleanup(func() { _ = os.Remove(file) })
	err = f.Truncate(sizeMiB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("loop device: size %s: %v", file, err)
	}
	if fsType != "" {
		if out, err := exec.Command("mkfs."+fsType, "-q", "-F", file).CombinedOutput(); err != nil {
			t.Fatalf("loop device: mkfs.%s %s: %v: %s", fsType, file, err, out)
		}
	}
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		t.Fatalf("loop device: losetup %s: %v: %s", file, err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Logf("detach %s: %v: %s", dev, err, out)
		}
	})
	return dev
}
