package execserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/pkg/execclient"
)

// Listen prepares path's directory and listens on path; see "The socket"
// in the package documentation. The directory's parent must exist. Closing
// the listener removes the socket.
func Listen(path string, log *slog.Logger) (*net.UnixListener, error) {
	if len(path) > execclient.MaxSocketPath {
		return nil, fmt.Errorf("exec socket %s: %d bytes, longer than a unix socket address holds (%d)", path, len(path), execclient.MaxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o700); err == nil {
		// Mkdir applies the umask; 0700 is what we want whatever it is.
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("exec socket directory %s: %w", dir, err)
		}
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("exec socket directory: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("exec socket directory: %w", err)
	}
	switch euid := uint32(os.Geteuid()); {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, fmt.Errorf("exec socket directory %s: not a directory (mode %o); remove it", dir, st.Mode)
	case st.Uid != euid:
		return nil, fmt.Errorf("exec socket directory %s: owned by uid %d, not %d", dir, st.Uid, euid)
	case st.Mode&0o077 != 0:
		return nil, fmt.Errorf("exec socket directory %s: mode %04o, want no access for group and others (0700)", dir, st.Mode&0o7777)
	}
	if err := removeStaleSocket(path, log); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on exec socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("exec socket %s: %w", path, err)
	}
	return l, nil
}

// removeStaleSocket removes a leftover socket at path (an earlier run of
// the same pod's container); anything else there is an error.
func removeStaleSocket(path string, log *slog.Logger) error {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("exec socket %s: %w", path, err)
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return fmt.Errorf("exec socket %s: something else than a socket is there (mode %o); not removing it", path, st.Mode)
	}
	if log != nil {
		log.Info("removing stale exec socket", "path", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale exec socket: %w", err)
	}
	return nil
}

// peerListener accepts only trusted peers (execclient.TrustedUID).
type peerListener struct {
	net.Listener
	log *slog.Logger
}

// Accept returns the next connection of a trusted peer; others are closed.
func (l peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := execclient.PeerCredentials(c)
		if err == nil && execclient.TrustedUID(uid) {
			return c, nil
		}
		if err == nil {
			err = fmt.Errorf("peer pid %d runs as uid %d, not root", pid, uid)
		}
		l.log.Warn("exec service: refusing connection", "err", err)
		c.Close()
	}
}
