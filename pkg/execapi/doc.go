// Package execapi is the wire protocol of the mount pod's exec service: the
// protobuf messages and gRPC stubs generated from exec.proto (run
// generate.sh after editing it). Package execclient is the client,
// internal/pod/execserver the server.
package execapi
