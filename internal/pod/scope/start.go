package scope

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// Shell runs the gate of [Start].
const Shell = "/bin/sh"

// gate is the script Start runs first: wait for "go" on the pipe, close
// it, exec the command. Anything but "go" (the parent gave up or died)
// ends it with ExitFailed before the command runs.
const gate = `read -r go <&%[1]d || exit 125; [ "$go" = go ] || exit 125; exec %[1]d<&-; exec "$@"`

// Start starts cmd (not yet started) with its process in the scope of
// target under plugin's parent, before the command runs: cmd first runs
// Shell, which waits on a pipe while Start places its PID with m, then
// execs the command (by cmd.Path, so it gets that as argv[0]). This is
// [Exec] for a long-running process that starts commands itself (the mount
// pod's exec service): no second Go process to start, and it works with
// either backend and from a private cgroup namespace.
//
// Before the command runs, its oom_score_adj is raised to the manager's
// Config.OOMScoreAdj (0 for a Manager of another package) when lower.
//
// On success the caller waits for cmd as usual. On error nothing of the
// command has run; a started process has been killed and waited for.
// cmd.ExtraFiles gets one more entry (the pipe's read end).
func Start(m Manager, plugin, target string, cmd *exec.Cmd) (Scope, error) {
	if err := validate(plugin, target); err != nil {
		return Scope{}, err
	}
	if cmd.Err != nil {
		return Scope{}, &commandError{code: commandExitCode(cmd.Err), err: cmd.Err}
	}
	if cmd.Process != nil {
		return Scope{}, errors.New("scope.Start: command already started")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return Scope{}, err
	}
	defer w.Close()
	fd := 3 + len(cmd.ExtraFiles)
	cmd.Args = append([]string{"sh", "-c", fmt.Sprintf(gate, fd), "sh", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = Shell
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	err = cmd.Start()
	r.Close()
	if err != nil {
		return Scope{}, &commandError{code: commandExitCode(err), err: err}
	}
	s, err := m.Place(plugin, target, cmd.Process.Pid)
	if err == nil {
		cfg := configOf(m)
		err = raiseOOMScoreAdj(oomScoreAdjFile(cfg, cmd.Process.Pid), cfg.OOMScoreAdj)
	}
	if err == nil {
		_, err = w.WriteString("go\n")
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return s, err
	}
	return s, nil
}
