// Package shimtest builds kubelet-exec-shim for tests, as `make build` and
// the image build it: static, stripped, with the helper next to the shim.
package shimtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
)

const module = "github.com/mountcontainers/mountcontainers"

// ReleaseTags are the build tags of `make build` and the image build.
const ReleaseTags = "urfave_cli_no_docs,grpcnotrace"

// Build builds kubelet-exec-shim and kubelet-exec-shim-cri into dir and
// returns the shim's path. It must run inside the module.
func Build(dir string) (string, error) { return buildIn("", dir) }

// BuildRevision builds the shim and its helper of git revision rev of the
// repository the current directory is in into dir, as Build does, for
// benchmarks that compare a change with its base in the same run.
func BuildRevision(dir, rev string) (string, error) {
	src := filepath.Join(dir, "src")
	if out, err := exec.Command("git", "worktree", "add", "--detach", src, rev).CombinedOutput(); err != nil {
		return "", fmt.Errorf("check out %s: %v\n%s", rev, err, out)
	}
	defer exec.Command("git", "worktree", "remove", "--force", src).Run()
	return buildIn(src, dir)
}

// buildIn builds the binaries of the module in src (the current
// directory's when empty) into dir.
func buildIn(src, dir string) (string, error) {
	for name, pkg := range map[string]string{
		shim.BinaryName: module + "/cmd/kubelet-exec-shim",
		shim.HelperName: module + "/cmd/kubelet-exec-shim-cri",
	} {
		cmd := exec.Command("go", "build", "-trimpath", "-tags", ReleaseTags, "-ldflags", "-s -w", "-o", filepath.Join(dir, name), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %v\n%s", name, err, out)
		}
	}
	return filepath.Join(dir, shim.BinaryName), nil
}
