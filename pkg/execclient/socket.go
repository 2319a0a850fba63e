package execclient

import (
	"net"

	"github.com/mountcontainers/mountcontainers/internal/boundary/execsocket"
)

// SocketDir is the directory, relative to the registration directory, that
// holds the exec sockets.
const SocketDir = execsocket.SocketDir

// MaxSocketPath is the longest path a unix socket address holds.
const MaxSocketPath = execsocket.MaxSocketPath

// ErrUntrustedSocket is wrapped by the error of [CheckSocket] when the socket
// or a directory on its way could have been planted by someone else than
// root.
var ErrUntrustedSocket = execsocket.ErrUntrustedSocket

// SocketName returns the socket of the pod with podUID, relative to the
// registration directory: ".exec/<pod UID>.sock", or, for a UID that is not
// a plain name (Kubernetes UIDs always are), ".exec/<sha256 of it, 32 hex
// digits>.sock".
func SocketName(podUID string) string { return execsocket.SocketName(podUID) }

// CheckSocket returns the path of the socket rel (a registration's
// execSocket) under the registration directory dir after checking that it
// can be trusted: every directory below dir on the way is a real directory
// owned by root or the caller's effective user and not writable by group or
// others, and the socket is a socket of that owner. dir itself is the
// registration package's to check.
func CheckSocket(dir, rel string) (string, error) { return execsocket.CheckSocket(dir, rel) }

// PeerCredentials returns the user and process ID of the process at the
// other end of c, a unix socket connection (SO_PEERCRED): who connected,
// for a server; who serves, for a client.
func PeerCredentials(c net.Conn) (uid uint32, pid int32, err error) {
	return execsocket.PeerCredentials(c)
}

// TrustedUID reports whether a peer running as uid may be trusted, by the
// service and by its clients alike: root, or the caller's own effective
// user (which can do anything the caller does anyway).
func TrustedUID(uid uint32) bool { return execsocket.TrustedUID(uid) }
