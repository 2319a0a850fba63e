// Command rawexecsync runs one command in a container through CRI ExecSync
// and exits with its exit code: the minimal client that kubelet-exec-shim's
// live path is benchmarked against.
//
//	rawexecsync unix:///run/containerd/containerd.sock CONTAINER-ID CMD [ARGS...]
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: rawexecsync ENDPOINT CONTAINER-ID CMD [ARGS...]")
		os.Exit(2)
	}
	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawexecsync:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).ExecSync(ctx, &runtimeapi.ExecSyncRequest{
		ContainerId: os.Args[2], Cmd: os.Args[3:], Timeout: 50,
	})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawexecsync:", err)
		os.Exit(2)
	}
	os.Stdout.Write(resp.Stdout)
	os.Stderr.Write(resp.Stderr)
	os.Exit(int(resp.ExitCode))
}
