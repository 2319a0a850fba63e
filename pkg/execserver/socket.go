package execserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// SocketDir is the directory, relative to the registration directory, that
// holds the exec sockets.
const SocketDir = ".exec"

// MaxSocketPath is the longest path a unix socket address holds.
const MaxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

// ErrUntrustedSocket is wrapped by the error of [CheckSocket] when the socket
// or a directory on its way could have been planted by someone else than
// root.
var ErrUntrustedSocket = errors.New("untrusted exec socket")

// plainUID reports whether s matches ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$. (A
// regular expression with that counted repetition costs every process that
// links this package 0.2 ms of start-up to compile.)
func plainUID(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// SocketName returns the socket of the pod with podUID, relative to the
// registration directory: ".exec/<pod UID>.sock", or, for a UID that is not
// a plain name (Kubernetes UIDs always are), ".exec/<sha256 of it, 32 hex
// digits>.sock".
func SocketName(podUID string) string {
	name := podUID
	if !plainUID(name) {
		sum := sha256.Sum256([]byte(podUID))
		name = hex.EncodeToString(sum[:16])
	}
	return SocketDir + "/" + name + ".sock"
}

// Listen prepares path's directory and listens on path; see "The socket"
// in the package documentation. The directory's parent must exist. Closing
// the listener removes the socket.
func Listen(path string, log *slog.Logger) (*net.UnixListener, error) {
	if len(path) > MaxSocketPath {
		return nil, fmt.Errorf("exec socket %s: %d bytes, longer than a unix socket address holds (%d)", path, len(path), MaxSocketPath)
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

// CheckSocket returns the path of the socket rel (a registration's
// execSocket) under the registration directory dir after checking that it
// can be trusted: every directory below dir on the way is a real directory
// owned by root or the caller's effective user and not writable by group or
// others, and the socket is a socket of that owner. dir itself is the
// registration package's to check.
func CheckSocket(dir, rel string) (string, error) {
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("exec socket %q: not a path inside %s", rel, dir)
	}
	path := filepath.Join(dir, rel)
	if len(path) > MaxSocketPath {
		return "", fmt.Errorf("exec socket %s: %d bytes, longer than a unix socket address holds (%d)", path, len(path), MaxSocketPath)
	}
	euid := uint32(os.Geteuid())
	cur := dir
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		cur = filepath.Join(cur, p)
		var st unix.Stat_t
		if err := unix.Lstat(cur, &st); err != nil {
			return "", fmt.Errorf("exec socket %s: %w", cur, err)
		}
		if st.Uid != 0 && st.Uid != euid {
			return "", fmt.Errorf("exec socket %s: %w: owned by uid %d, want 0 or %d", cur, ErrUntrustedSocket, st.Uid, euid)
		}
		last := i == len(parts)-1
		switch t := st.Mode & unix.S_IFMT; {
		case !last && t != unix.S_IFDIR:
			return "", fmt.Errorf("exec socket %s: %w: not a directory (mode %o)", cur, ErrUntrustedSocket, st.Mode)
		case !last && st.Mode&0o022 != 0:
			return "", fmt.Errorf("exec socket %s: %w: mode %04o is writable by group or others", cur, ErrUntrustedSocket, st.Mode&0o7777)
		case last && t != unix.S_IFSOCK:
			return "", fmt.Errorf("exec socket %s: %w: not a socket (mode %o)", cur, ErrUntrustedSocket, st.Mode)
		}
	}
	return path, nil
}

// peerUID returns the user of the process at the other end of c.
func peerUID(c net.Conn) (uint32, int32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, 0, fmt.Errorf("not a unix socket connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return cred.Uid, cred.Pid, nil
}

// trustedUID reports whether a peer running as uid may talk to us: root, or
// our own effective user.
func trustedUID(uid uint32) bool {
	return uid == 0 || uid == uint32(os.Geteuid())
}

// peerListener accepts only trusted peers.
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
		uid, pid, err := peerUID(c)
		if err == nil && trustedUID(uid) {
			return c, nil
		}
		if err == nil {
			err = fmt.Errorf("peer pid %d runs as uid %d, not root", pid, uid)
		}
		l.log.Warn("exec service: refusing connection", "err", err)
		c.Close()
	}
}
