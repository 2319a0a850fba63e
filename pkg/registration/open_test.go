package registration

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// watchOpens reports whether path is opened (for reading or writing, not
// with O_PATH) while fn runs. inotify queues the event during the open
// system call, so no waiting is needed.
func watchOpens(t *testing.T, path string, fn func()) bool {
	t.Helper()
	ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ifd)
	if _, err := unix.InotifyAddWatch(ifd, path, unix.IN_OPEN|unix.IN_DONT_FOLLOW); err != nil {
		t.Fatal(err)
	}
	fn()
	buf := make([]byte, 4096)
	n, err := unix.Read(ifd, buf)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return false
	case err != nil:
		t.Fatal(err)
	}
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		// struct inotify_event: wd, mask, cookie, len, name[len].
		if binary.NativeEndian.Uint32(buf[off+4:])&unix.IN_OPEN != 0 {
			return true
		}
		off += unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(buf[off+12:]))
	}
	return false
}

// TestReadNeverOpensAnUntrustedFile checks that Read judges a file before
// it opens it for reading: opening a device node or a FIFO has side
// effects, so only a trusted regular file may be opened.
func TestReadNeverOpensAnUntrustedFile(t *testing.T) {
	good, _ := Encode(validReg())
	tests := []struct {
		name     string
		setup    func(t *testing.T, path string)
		wantOpen bool
	}{
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"world-writable regular file", func(t *testing.T, path string) {
			writeRaw(t, path, good, 0o646)
		}, false},
		{"trusted regular file", func(t *testing.T, path string) {
			writeRaw(t, path, good, 0o644)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := regDir(t)
			path := filepath.Join(dir, "kubernetes.io~glusterfs.json")
			tc.setup(t, path)
			var err error
			opened := watchOpens(t, path, func() { _, _, err = Read(dir, plugin) })
			if opened != tc.wantOpen {
				t.Fatalf("Read opened %s: %v, want %v (Read error: %v)", path, opened, tc.wantOpen, err)
			}
			if (err == nil) != tc.wantOpen {
				t.Fatalf("Read = %v", err)
			}
		})
	}
}
