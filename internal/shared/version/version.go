// Package version holds the version of the binaries, set at build time with
// -ldflags "-X github.com/mountcontainers/mountcontainers/internal/shared/version.Version=v1.2.3
// -X github.com/mountcontainers/mountcontainers/internal/shared/version.Revision=<commit>".
package version

// Version is the version of this build; "dev" when not set by the build.
var Version = "dev"

// Revision is the source revision (commit) of this build; "unknown" when
// not set by the build.
var Revision = "unknown"
