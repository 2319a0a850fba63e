package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/shared/atomicfile"
)

// DefaultSecretsDir is where the node's volume hosts write the secrets
// mounts need ([fs.Mount].Secret) unless their settings name another
// directory. /run is a
// tmpfs on systemd nodes; the mount pod mounts the directory at the same
// path, so the client it starts finds the file.
const DefaultSecretsDir = "/run/mountcontainers/secrets"

// SecretFile is the file that holds the secret of the mount at target:
// named after the target's scope ([boundary.MountKey] plus ".key"), so that an
// unmount finds it without any record.
func SecretFile(secretsDir, target string) string {
	return filepath.Join(secretsDir, boundary.MountKey(target)+".key")
}

// InMemory reports why dir is not on a file system in memory (nil when it
// is: tmpfs or ramfs): the default of [Mounter].SecretsInMemory.
func InMemory(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	switch uint32(st.Type) {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return nil
	}
	return fmt.Errorf("secrets directory %s is not on a tmpfs (file system type %#x): a secret must not reach a disk; mount a tmpfs there, or point the volume host's secrets directory at one (/run is a tmpfs on most nodes)", dir, st.Type)
}

// checkSecretsDir checks that dir can hold secrets: a directory (not a
// symbolic link) owned by root or the process's own user, not writable by
// group or others, on a file system in memory (inMemory says).
func checkSecretsDir(dir string, inMemory func(string) error) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("secrets directory %s does not exist (the mount pod's DaemonSet mounts it; is this the right secrets directory?)", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("secrets directory %s is not a directory (%s): not trusted", dir, fi.Mode().Type())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("secrets directory %s is writable by group or others (%v): not trusted", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("secrets directory %s is owned by uid %d, not root: not trusted", dir, st.Uid)
	}
	return inMemory(dir)
}

// writeSecret writes data as the secret of the mount at target (mode
// 0600, atomically) into secretsDir and returns its path.
func writeSecret(secretsDir, target string, data []byte, inMemory func(string) error) (string, error) {
	if err := checkSecretsDir(secretsDir, inMemory); err != nil {
		return "", err
	}
	p := SecretFile(secretsDir, target)
	if err := atomicfile.Write(p, 0o600, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	}); err != nil {
		return "", fmt.Errorf("write the secret file of %s: %w", target, err)
	}
	return p, nil
}

// removeSecret removes the secret file of the mount at target, if any.
func removeSecret(secretsDir, target string) error {
	err := os.Remove(SecretFile(secretsDir, target))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the secret file of %s: %w", target, err)
	}
	return nil
}
