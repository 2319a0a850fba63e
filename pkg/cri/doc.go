// Package cri is the connection of a volume host to the node's container
// runtime through the Container Runtime Interface (CRI).
//
// [Dial] opens one gRPC client connection over a unix socket; it is meant to
// be shared by every caller in the process. The two calls the MountContainers
// rule needs are wrapped: [Conn.FindRunning] finds a pod's running container
// by the labels the kubelet puts on every CRI container, and [Conn.ExecSync]
// runs a command in it.
//
// # Endpoints
//
// [ResolveEndpoint] takes the endpoint from the caller, else from the
// CONTAINER_RUNTIME_ENDPOINT environment variable, else the first socket of
// [DefaultEndpoints] (containerd, CRI-O, cri-dockerd: crictl's order) that
// exists. A bare absolute path is accepted as a unix socket. Only unix
// sockets are supported.
//
// # Limits
//
// Dialing never blocks: the connection is made by the first call, and a
// connection attempt is bounded by [DialTimeout]. Calls fail fast (they do
// not wait for the runtime to come back) and reconnect with a backoff of at
// most a few seconds. The receive limit is [MaxRecvMsgSize] (16 MiB), the
// kubelet's: the CRI asks runtimes to cap ExecSync's stdout and stderr at
// 16 MB each, so a command that fills both can exceed it; such a response
// fails with [ErrResponseTooLarge].
package cri
