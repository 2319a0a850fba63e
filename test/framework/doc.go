// Package framework holds the helpers of the end-to-end tests: it finds the test
// bed that test/bed/up.sh started (through the env file it writes), talks to its
// API server with client-go and kubectl, waits for pods and nodes with bounded
// timeouts, execs into pods, reads the CRI runtime directly and makes loop
// devices. RunSuite brings a bed up for a test binary and tears it down after
// (when a test failed, after printing what test/bed/diagnose.sh finds).
//
// # Environment
//
//   - BED_DIR: the bed's work directory (default /var/tmp/mountcontainers-bed).
//   - BED_ENV: the env file to read (default $BED_DIR/env).
//   - BED_REUSE=1: use a bed that is already running instead of starting one;
//     such a bed is left running.
//   - BED_KEEP=1: leave the bed the suite started running after the tests.
//   - BED_DIAGNOSE=0: when a test failed, do not run test/bed/diagnose.sh
//     (the bed's state and logs, printed before the teardown).
//   - CI=true: a missing prerequisite (not root, binaries or images not built)
//     fails the suite instead of skipping it.
//
// # Caveats
//
// The bed has no kube-proxy: ClusterIP services do not work, and host-network
// pods that talk to the API server need KUBERNETES_SERVICE_HOST=127.0.0.1.
// A privileged container's /dev is a snapshot taken at its creation: make loop
// devices before the pod that uses them.
package framework
