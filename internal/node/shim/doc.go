// Package shim is the logic of kubelet-exec-shim, the host-side binary that
// runs a volume plugin's utilities in the plugin's mount pod for programs
// that can only exec a command (Flexvolume drivers, scripts, a kubelet
// calling a mount helper).
//
// # Two binaries
//
// kubelet-exec-shim does not link the container runtime's client (gRPC,
// protobuf and the CRI API, whose package initialisation alone costs more
// than a host fallback). It serves the two common cases itself: a plugin
// with no registration runs on the host, and a registration whose exec
// socket proves its container live (the service answers for the registered
// pod and container, and the kernel places the serving process in a
// container of that pod: execsocket.Prove, the proof package exec's
// resolver applies first too) runs the command through the socket, spoken
// by package execclient without gRPC. Whenever the
// runtime is needed (a registration the socket cannot prove live, trusted or
// not; --exec-mode cri; status; host mode nsenter with no registration) it
// replaces its process with [HelperName] next to it, passing its arguments
// and environment on. A command the exec socket refused before it started
// (the service busy, gone, or another pod's by then) is handed over too, as
// package exec decides such a command afresh.
// The helper (package shim/crihelper) is the whole shim with a backend that
// decides through package exec, so it decides, reports and exits exactly as
// the shim would. It is run only when it is a regular file owned by root (or
// the shim's user) and writable by nobody else; [Install] places both.
//
// # Exit codes
//
// The shim's exit code is exactly the utility's. Its own failures use the
// codes of docker and podman run:
//
//	124  the utility timed out (--timeout)
//	125  the shim or the runtime failed: usage, a bad or untrusted
//	     registration, the runtime unreachable while a registration is live
//	126  the utility exists but cannot be invoked
//	127  the utility was not found (in the pod or on the host)
//
// A utility killed by a signal exits 128+signal, as in a shell.
//
// # Multi-call
//
// `kubelet-exec-shim install --dir DIR --plugin P TOOL...` places a copy of
// the shim and its helper in DIR and a symbolic link DIR/TOOL to the shim
// for each tool, each written as a dotfile and renamed into place, and
// records the tool-to-plugin mapping in DIR/kubelet-exec-shim.json. Invoked under a tool's name, the
// shim behaves as `run --plugin P -- TOOL args...`; a name starting with
// kubelet-exec-shim is the shim's own (it runs as itself under it), so no
// tool may have one, and a mapping naming a tool or plugin install would
// refuse is refused. The mapping is trusted
// only as a registration is (a regular file owned by root or the shim's
// user, writable by nobody else, in a directory writable by nobody else);
// otherwise the tool fails with 125 and names the file. When the command
// falls back to the host, the host's own TOOL is searched on the absolute
// PATH entries skipping DIR and any file that is the shim or its helper
// (same device and inode), so the shim never runs itself.
//
// # Standard input
//
// On the host the utility gets the shim's standard input. In a container a
// terminal, /dev/null or an empty file is not passed on (the utility gets
// /dev/null), and anything that may hold data (a pipe, a non-empty file)
// is: through the mount pod's exec socket it is streamed to the utility;
// through CRI ExecSync, which has no stdin, the command fails with an error
// (125) rather than silently dropping the data.
//
// # Paths root trusts
//
// The settings that decide where a tool runs are names anyone could write
// into an environment: the runtime endpoint (--runtime-endpoint,
// CONTAINER_RUNTIME_ENDPOINT, the mapping, or the first of package cri's
// probed sockets), the host root of nsenter mode and the directory the
// helper is run from. Each is walked from / without the kernel following a
// symbolic link, with the rules of a registration directory (package
// registration): owned by root (or the shim's own user), not writable by
// group or others unless root's and sticky, as /tmp is; the host root and
// the helper's directory not writable by others at all. The runtime's
// socket must be a socket of that owner; on its path only, a symbolic link
// root owns in a checked directory is followed and its target walked the
// same way, since /var/run is one on most distributions. Anything else
// fails with 125 and an error naming the path and why. The registration
// directory, the mapping and the exec sockets are checked by packages
// registration and execsocket; the host PATH is the caller's, as for the
// tool run without the shim, less its empty and relative entries.
package shim
