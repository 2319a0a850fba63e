// Package version holds the version of the binaries, set at build time with
// -ldflags "-X github.com/mountcontainers/mountcontainers/internal/version.Version=v1.2.3".
package version

// Version is the version of this build; "dev" when not set by the build.
var Version = "dev"
