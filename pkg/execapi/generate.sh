#!/bin/sh
# Regenerates exec.pb.go and exec_grpc.pb.go from exec.proto. Needs protoc
# (Debian: protobuf-compiler), and installs the Go plugins at the versions
# below into a temporary GOBIN.
set -eu
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
# protoc-gen-go at the version of google.golang.org/protobuf in go.mod.
GOBIN=$bin go install google.golang.org/protobuf/cmd/protoc-gen-go
GOBIN=$bin go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
PATH=$bin:$PATH protoc --go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative exec.proto
