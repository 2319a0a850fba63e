// Package api is the wire protocol of the mount pod's exec service: the
// protobuf messages and gRPC stubs generated from exec.proto (run
// generate.sh after editing it). Package execserver is the client,
// internal/execservice the server.
package api
