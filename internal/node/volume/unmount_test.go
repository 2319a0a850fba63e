package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountfd/mountfdtest"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// noCommands is an executor that runs nothing: a command it is asked for
// fails the test. It records the targets it is told to forget.
type noCommands struct {
	t       *testing.T
	records string

	mu        sync.Mutex
	forgotten []string
}

var _ mcexec.Executor = (*noCommands)(nil)

func (e *noCommands) Command(name string, args ...string) utilexec.Cmd {
	e.t.Errorf("a command ran: %s %q", name, args)
	return utilexec.New().Command("false")
}

func (e *noCommands) CommandContext(ctx context.Context, name string, args ...string) utilexec.Cmd {
	e.t.Errorf("a command ran: %s %q", name, args)
	return utilexec.New().CommandContext(ctx, "false")
}

func (e *noCommands) LookPath(file string) (string, error) {
	return "", errors.New("no commands here")
}

func (e *noCommands) DecisionOf(utilexec.Cmd) (mcexec.Decision, bool) {
	return mcexec.Decision{}, false
}
func (e *noCommands) RecordsDir() string { return e.records }
func (e *noCommands) RecordMount(utilexec.Cmd, mcexec.MountRecord) (error, error) {
	return nil, nil
}

func (e *noCommands) ForgetMount(target string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forgotten = append(e.forgotten, target)
	return nil
}

// TestUnmountOnTheNode: Unmount is umount2(2) in the caller's mount
// namespace, no command of the mount pod (or the host): a mount goes, its
// record is forgotten, and the message says where. A symbolic link at the
// target is not followed, even when the mount-point check follows it
// (mount-utils', the Flexvolume driver's): the mount it points to stays.
// An unmount that does not return is bounded by the timeout.
func TestUnmountOnTheNode(t *testing.T) {
	if !mountfdtest.InPrivateMountNS(t) {
		return
	}
	base := mountfdtest.Base(t)
	x := &noCommands{t: t, records: filepath.Join(base, "records")}
	ctx := context.Background()

	t.Run("a mount", func(t *testing.T) {
		dir := filepath.Join(base, "m")
		mountfdtest.MountTmpfs(t, dir)
		v := &Mounter{Plugin: "kubernetes.io/glusterfs", Exec: x, Timeout: 10 * time.Second, SecretsDir: filepath.Join(base, "secrets")}
		msg, err := v.Unmount(ctx, dir)
		if err != nil || !strings.Contains(msg, "unmounted "+dir+" on the node (umount2)") {
			t.Fatalf("Unmount: %q, %v; want it unmounted on the node", msg, err)
		}
		if mnt, err := IsMountPoint(dir); err != nil || mnt {
			t.Fatalf("%s is still a mount point (%v)", dir, err)
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		if len(x.forgotten) != 1 || x.forgotten[0] != dir {
			t.Fatalf("records forgotten: %q, want %s's", x.forgotten, dir)
		}
	})

	t.Run("a symbolic link to a mount", func(t *testing.T) {
		other := filepath.Join(base, "other")
		mountfdtest.MountTmpfs(t, other)
		t.Cleanup(func() { unix.Unmount(other, unix.MNT_DETACH) })
		link := filepath.Join(base, "link")
		if err := os.Symlink(other, link); err != nil {
			t.Fatal(err)
		}
		v := &Mounter{Plugin: "kubernetes.io/glusterfs", Exec: x, Mounts: mount.New(""), Timeout: 10 * time.Second, SecretsDir: filepath.Join(base, "secrets")}
		msg, err := v.Unmount(ctx, link)
		if err == nil {
			t.Fatalf("Unmount of a symbolic link to a mount: %q, want an error", msg)
		}
		if mnt, serr := IsMountPoint(other); serr != nil || !mnt {
			t.Fatalf("Unmount of %s (%v) unmounted %s, which it points to (%v)", link, err, other, serr)
		}
		t.Logf("refused: %v", err)
	})

	t.Run("an unmount that does not return", func(t *testing.T) {
		dir := filepath.Join(base, "hung")
		mountfdtest.MountTmpfs(t, dir)
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		v := &Mounter{Plugin: "kubernetes.io/glusterfs", Exec: x, Timeout: 200 * time.Millisecond, SecretsDir: filepath.Join(base, "secrets"),
			Umount2: func(string, int) error { <-release; return nil }}
		done := make(chan error, 1)
		go func() {
			_, err := v.Unmount(ctx, dir)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "did not return within 200ms") {
				t.Fatalf("Unmount with a hung umount2: %v, want an error saying it did not return", err)
			}
		case <-time.After(time.Minute): // a hang guard, not a verdict on speed
			t.Fatal("Unmount did not return while its umount2 hung")
		}
	})
}
