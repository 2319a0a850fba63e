// Package execsocket is what both ends of the mount pod's exec socket (see
// package execserver) need to trust each other, without the gRPC client:
// where the socket lives, how its path is checked, who serves or connects
// (SO_PEERCRED), which pod's container a serving process is in, and the
// one proof that a registration's container is live ([Prove]), which
// package exec and kubelet-exec-shim both apply. The shim links it without
// gRPC, so none of it may import gRPC or protobuf.
package execsocket

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

// PeerCredentials returns the user and process ID of the process at the
// other end of c, a unix socket connection (SO_PEERCRED): who connected,
// for a server; who serves, for a client.
func PeerCredentials(c net.Conn) (uid uint32, pid int32, err error) {
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

// TrustedUID reports whether a peer running as uid may be trusted, by the
// service and by its clients alike: root, or the caller's own effective
// user (which can do anything the caller does anyway).
func TrustedUID(uid uint32) bool {
	return uid == 0 || uid == uint32(os.Geteuid())
}
