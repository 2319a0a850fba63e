package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// The node's layout. On the default bed the node is this machine: its
// kubelet and containerd are plain processes in the machine's namespaces.
// On a systemd bed (up.sh with BED_FLAVOR=systemd) the node is a container
// booted by systemd-nspawn, systemd its PID 1: the same paths (the bed's
// directory is bound in at its own path) but its own mount, PID and cgroup
// namespaces, so its mounts are read through its PID 1's /proc entry and
// its commands run through nsenter.

// FlavorSystemd is BED_FLAVOR of a bed whose node runs systemd.
const FlavorSystemd = "systemd"

// Flavor returns the bed's BED_FLAVOR: "default" or [FlavorSystemd].
func (e *Env) Flavor() string {
	if f := e.Vars["BED_FLAVOR"]; f != "" {
		return f
	}
	return "default"
}

// SystemdNode reports whether the node runs systemd as its PID 1.
func (e *Env) SystemdNode() bool { return e.Flavor() == FlavorSystemd }

// NodeInit returns the node's PID 1 as this machine sees it (a systemd
// node), after checking that it still runs systemd; 0 on the default bed.
func (e *Env) NodeInit() (int, error) {
	if !e.SystemdNode() {
		return 0, nil
	}
	pid, err := strconv.Atoi(e.Vars["NODE_1_INIT_PID"])
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("the env file's NODE_1_INIT_PID %q is not a PID", e.Vars["NODE_1_INIT_PID"])
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "systemd" {
		return 0, fmt.Errorf("the node's PID 1 (%d here) is gone or no longer systemd (%q, %v)", pid, comm, err)
	}
	// Its PID namespace is not this machine's: it is a PID 1 there.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil || !strings.Contains(string(status), fmt.Sprintf("\nNSpid:\t%d\t1\n", pid)) {
		return 0, fmt.Errorf("process %d is not the PID 1 of a PID namespace of its own (%v)", pid, err)
	}
	return pid, nil
}

// NodeProc returns the /proc entry of a process in the node's namespaces:
// /proc/<node PID 1> on a systemd node, /proc/self otherwise. Its
// mountinfo is the node's mount table, its ns/pid the PID namespace of the
// node's hostPID pods.
func (e *Env) NodeProc() (string, error) {
	pid, err := e.NodeInit()
	if err != nil || pid == 0 {
		return "/proc/self", err
	}
	return fmt.Sprintf("/proc/%d", pid), nil
}

// NodeCommand returns a command that runs name with args on the node: in
// the node's mount, UTS, IPC, PID and cgroup namespaces (nsenter) on a
// systemd node, as is otherwise. Paths under the bed's directory are the
// same on both sides; others are the node's.
func (e *Env) NodeCommand(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	pid, err := e.NodeInit()
	if err != nil {
		return nil, err
	}
	if pid == 0 {
		return exec.CommandContext(ctx, name, args...), nil
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(pid),
		"--mount", "--uts", "--ipc", "--pid", "--cgroup", "--", name}, args...)...), nil
}

// NodeProcOf returns the node's /proc entry ([Env.NodeProc]) of the
// suite's bed, /proc/self without one: for helpers that have no bed.
func NodeProcOf() string {
	if current == nil {
		return "/proc/self"
	}
	p, err := current.Env.NodeProc()
	if err != nil {
		// A node gone is what the caller's read then shows; the path
		// still names the node's PID 1.
		return "/proc/" + current.Env.Vars["NODE_1_INIT_PID"]
	}
	return p
}

// NodeCommandOf is [Env.NodeCommand] of the suite's bed; without one the
// command runs as is.
func NodeCommandOf(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	if current == nil {
		return exec.CommandContext(ctx, name, args...), nil
	}
	return current.Env.NodeCommand(ctx, name, args...)
}

// CurrentEnv returns the suite's bed's env, or nil without a bed.
func CurrentEnv() *Env {
	if current == nil {
		return nil
	}
	return current.Env
}

// PodCgroupParts returns the forms a pod's UID takes in its cgroups' paths:
// "pod<uid>" (the cgroupfs driver) and "pod<uid with _ for ->" (the systemd
// driver's kubepods-...-pod<uid>.slice).
func PodCgroupParts(uid string) []string {
	return []string{"pod" + uid, "pod" + strings.ReplaceAll(uid, "-", "_")}
}
