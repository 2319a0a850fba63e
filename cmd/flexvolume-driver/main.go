// Command flexvolume-driver is the Flexvolume driver of GlusterFS and
// CephFS volumes that mounts through the plugin's mount pod (see package
// github.com/mountcontainers/mountcontainers/internal/node/flexvolume). The mount
// pod installs it as <volume plugin dir>/mountcontainers.io~glusterfs/glusterfs
// or .../mountcontainers.io~cephfs/cephfs, with settings next to it that say
// which file system it mounts.
//
// The kubelet reads the driver's standard output and standard error as one
// JSON reply, so standard error is pointed at /dev/null before anything
// else runs: a library's log line there would corrupt the reply. For the
// same reason a log file that cannot be used does not fail the call, nor
// is it reported on standard error: the call goes on unlogged and its
// reply's message says why, naming the file.
//
// A failure exits 0 with a Failure reply, and only Not supported exits 1:
// the kubelet logs the arguments of a call that exits otherwise, and they
// hold the volume's secrets (see flexvolume.Status.ExitCode).
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mountcontainers/mountcontainers/internal/node/flexvolume"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

func main() {
	silenceStderr()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	fail := func(err error) int {
		return flexvolume.WriteStatus(os.Stdout, flexvolume.Status{Status: flexvolume.StatusFailure, Message: err.Error()})
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	s, err := flexvolume.LoadSettings(exe, nil)
	if err != nil {
		return fail(err)
	}
	log, closeLog, notice := openLog(s.LogFile)
	defer closeLog()
	for _, r := range s.OldNames() {
		log.WarnContext(ctx, "deprecated variable", "name", r.Old, "use", r.New)
	}
	r := mcexec.NewResolver(mcexec.Options{
		Dir:      s.RegistrationDir,
		Endpoint: s.RuntimeEndpoint,
		Timeout:  s.TimeoutDuration(),
		ExecMode: s.Mode(),
		BatchDir: s.BatchDir(),
		Logger:   log,
		Observer: mcexec.LogObserver(log),
	})
	defer r.Close()
	e, err := r.For(s.Plugin)
	if err != nil {
		return fail(err)
	}
	d := &flexvolume.Driver{FS: s.FS(), Plugin: s.Plugin, Exec: e, Timeout: s.TimeoutDuration(), Servers: s.ServerPolicy(), SecretsDir: s.SecretsDir, SharedMounts: s.SharedMounts, Log: log, Notice: notice}
	return d.Run(ctx, os.Args[1:], os.Stdout)
}

// openLog opens the log file path, if set, and returns the logger, what
// closes it, and a notice for the reply when the file cannot be used: the
// call then goes on with no log.
func openLog(path string) (log *slog.Logger, closeLog func(), notice string) {
	discard := slog.New(slog.DiscardHandler)
	if path == "" {
		return discard, func() {}, ""
	}
	l, f, err := flexvolume.OpenLog(path)
	if err != nil {
		return discard, func() {}, "the driver's log is not written: " + err.Error()
	}
	return l, func() { _ = f.Close() }, ""
}

// silenceStderr points file descriptor 2 at /dev/null.
func silenceStderr() {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	_ = unix.Dup2(int(null.Fd()), 2)
	_ = null.Close()
}
