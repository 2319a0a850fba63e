package scope

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// hostCgroupNS returns the cgroup namespace file that cgroupfs operations
// must run in for cfg, or "" to run them where the process is.
func hostCgroupNS(cfg Config) (string, error) {
	switch cfg.CgroupNS {
	case CgroupNSOff:
		return "", nil
	case CgroupNSEnter:
		return cfg.HostCgroupNS, nil
	}
	private, err := privateCgroupNS(cfg.ProcRoot, cfg.HostCgroupNS)
	if err != nil || !private {
		return "", err
	}
	return cfg.HostCgroupNS, nil
}

// privateCgroupNS reports whether this process's cgroup namespace differs
// from the one at hostNS. When either namespace file cannot be read (no
// cgroup namespaces, or a PID 1 this process may not inspect), it decides
// from PID 1's cgroups instead: a path starting with "/.." lies outside
// this process's namespace root, so the namespace is private, and that is
// an error since the host's cannot be entered.
//
// It reads the calling thread's namespace (thread-self): /proc/self is the
// main thread's, which may be one inCgroupNS left in the host's namespace.
func privateCgroupNS(procRoot, hostNS string) (bool, error) {
	runtime.LockOSThread()
	own, err := os.Readlink(filepath.Join(procRoot, "thread-self/ns/cgroup"))
	runtime.UnlockOSThread()
	host, hostErr := os.Readlink(hostNS)
	if err == nil && hostErr == nil {
		return own != host, nil
	}
	if hostErr == nil {
		hostErr = err
	}
	f, err := os.Open(filepath.Join(procRoot, "1/cgroup"))
	if err != nil {
		return false, fmt.Errorf("detect the cgroup namespace: %w", err)
	}
	defer f.Close()
	m, err := ParseMembership(f)
	if err != nil {
		return false, fmt.Errorf("detect the cgroup namespace: %w", err)
	}
	for _, e := range m {
		if e.Path == "/.." || strings.HasPrefix(e.Path, "/../") {
			return true, fmt.Errorf("this process is in a private cgroup namespace (PID 1 is in %s, outside it) and cannot enter the host's: %w", e.Path, hostErr)
		}
	}
	return false, nil
}

// inCgroupNS runs fn on a thread of its own that has entered the cgroup
// namespace at ns, or in place when ns is empty.
//
// setns(2) with CLONE_NEWCGROUP changes only the calling thread (unlike
// CLONE_NEWNS, which a multithreaded process cannot join), so the goroutine
// locks its thread, enters the namespace, runs fn and goes back to the
// thread's own namespace before unlocking. If going back fails it ends
// still locked, and the Go runtime ends the thread instead of reusing it
// (or, for the main thread, never schedules on it again). While locked,
// the thread is never the parent of a new thread: the runtime starts those
// from a clean template thread.
func inCgroupNS(ns string, fn func() error) error {
	if ns == "" {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/cgroup")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open this thread's cgroup namespace: %w", err)
			return
		}
		defer own.Close()
		host, err := os.Open(ns)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter the host's cgroup namespace: %w", err)
			return
		}
		err = unix.Setns(int(host.Fd()), unix.CLONE_NEWCGROUP)
		host.Close()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter the host's cgroup namespace %s: setns: %w", ns, err)
			return
		}
		err = fn()
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWCGROUP) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}
