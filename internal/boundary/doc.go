// Package boundary holds what the processes on both sides of a mount pod's
// boundary must name alike, so that each name is made in one place:
//
//   - the plugin-name rule ([ValidatePluginName]) and its escape into one
//     path component, "/" as "~" ([EscapePluginName]), as in the
//     registration file names, the kubelet's Flexvolume and volume
//     directories and the scopes' parent cgroups;
//   - the mount key ([MountKey]) that names a mount target's record (the
//     volume host writes it, the mount pod's recovery reads it), its FUSE
//     daemon's scope and its key file;
//   - the names of where a plugin's utility runs and how it gets there
//     (exec mode, the way to a container, the reasons of a decision, a
//     command's path and result), which package exec and
//     kubelet-exec-shim decide, log and report with;
//   - the exec socket's place and peer rules, and the proof that a
//     registration's container is live (package execsocket).
//
// It links the standard library only: every binary of the project links
// it, among them the mount helper run for each FUSE mount and the
// Flexvolume driver the kubelet runs for each call, whose start-up the
// initialisers of larger packages (regexp, Kubernetes' validation) would
// cost as much again as the Go runtime's own (BENCHMARKS.md). A test holds
// the rule to Kubernetes' qualified-name validation.
package boundary
