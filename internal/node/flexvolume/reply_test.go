package flexvolume_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
)

// TestFailureExitsZero: every Failure exits 0 and only Not supported exits
// 1, since the kubelet logs the arguments (the options, with the volume's
// secrets) of a call that exits otherwise; and no reply quotes a secret,
// not even where the mount utility's output does.
func TestFailureExitsZero(t *testing.T) {
	c := newCephDriver(t)
	c.failing = true
	c.failOut = "ceph-fuse: auth failed for key " + cephKey + " (" + cephKeyOpt + ")"
	dir := filepath.Join(t.TempDir(), "v")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"failing mount", []string{"mount", dir, cephOpts("")}},
		{"bad option", []string{"mount", dir, cephOpts(`"mountOptions":"ceph.keyring=/x"`)}},
		{"not JSON", []string{"mount", dir, `{"kubernetes.io/secret/key":"` + cephKeyOpt + `"`}},
		{"relative target", []string{"mount", "rel", cephOpts("")}},
		{"too many arguments", []string{"mount", dir, cephOpts(""), "x"}},
		{"failing unmount", []string{"unmount", "rel"}},
		{"no call", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := c.Run(context.Background(), tc.args, &out)
			if code != 0 || !strings.HasPrefix(out.String(), `{"status":"Failure","message":`) {
				t.Errorf("reply %q, exit %d; want a Failure, exit 0", out.String(), code)
			}
			if strings.Contains(out.String(), cephKey[:20]) || strings.Contains(out.String(), cephKeyOpt[:20]) {
				t.Errorf("the reply quotes the key: %s", out.String())
			}
		})
	}
	var out bytes.Buffer
	if code := c.Run(context.Background(), []string{"getvolumename", cephOpts("")}, &out); code != 1 || out.String() != `{"status":"Not supported"}`+"\n" {
		t.Errorf("getvolumename: %q, exit %d; want Not supported, exit 1", out.String(), code)
	}
}

// panicFS is a file system whose options check panics.
type panicFS struct{ glusterfs.FS }

func (panicFS) Mount(context.Context, map[string]string, fs.Env) (fs.Mount, error) {
	panic("options check blew up")
}

// TestPanicIsAFailure: a panic is a Failure reply with exit 0, not a crash
// (exit 2, which the kubelet would log with the call's arguments).
func TestPanicIsAFailure(t *testing.T) {
	d := hostDriver(t)
	d.FS = panicFS{}
	s, _, code := call(t, d, "mount", filepath.Join(t.TempDir(), "v"), goodOpts)
	if s.Status != flexvolume.StatusFailure || code != 0 || !strings.Contains(s.Message, "blew up") {
		t.Fatalf("%+v, exit %d; want a Failure naming the panic, exit 0", s, code)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestUnwritableReplyExitsZero: a reply that cannot be written exits 0 too.
func TestUnwritableReplyExitsZero(t *testing.T) {
	if code := flexvolume.WriteStatus(failingWriter{}, flexvolume.Status{Status: flexvolume.StatusFailure}); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
}

// TestNotice: a driver's notice is in every Success and Failure reply, and
// Not supported stays as it is.
func TestNotice(t *testing.T) {
	d := hostDriver(t)
	d.Notice = "the driver's log is not written: log file /x is a symbolic link: refused"
	if s, _, _ := call(t, d, "init"); s.Status != flexvolume.StatusSuccess || s.Message != d.Notice || s.Capabilities == nil {
		t.Errorf("init: %+v, want Success with the notice", s)
	}
	if s, _, _ := call(t, d, "unmount", "rel"); s.Status != flexvolume.StatusFailure || !strings.HasSuffix(s.Message, "; "+d.Notice) {
		t.Errorf("unmount: %+v, want a Failure ending with the notice", s)
	}
	if _, out, _ := call(t, d, "attach", "{}"); out != `{"status":"Not supported"}`+"\n" {
		t.Errorf("attach: %q, want Not supported alone", out)
	}
}
