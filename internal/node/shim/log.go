package shim

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
)

// Environment variables of the shim's log. The shim's standard streams
// are the utility's: it logs to stderr only what these (or --verbose, or
// the flags of the same names) ask for.
const (
	// EnvLogLevel is the least level logged: debug (each decision and
	// command, as --verbose), info, warn (the default) or error.
	EnvLogLevel = "KUBELET_EXEC_SHIM_LOG_LEVEL"
	// EnvLogFormat is the log's format: text (the default) or json.
	EnvLogFormat = "KUBELET_EXEC_SHIM_LOG_FORMAT"
)

// defaultLogLevel logs nothing a working shim does: decisions and
// commands are debug records, a failed command an info record.
const defaultLogLevel = slog.LevelWarn

// Logger returns the shim's logger to w: at the level of cfg.LogLevel, or
// debug when cfg.Verbose, or warn; in the format of cfg.LogFormat. The
// settings were checked when cfg was built.
func (cfg *Config) Logger(w io.Writer) *slog.Logger {
	level, _ := cfg.logLevel()
	log, err := logging.NewAt(w, cfg.LogFormat, level)
	if err != nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

func (cfg *Config) logLevel() (slog.Level, error) {
	switch {
	case cfg.LogLevel != "":
		return logging.ParseLevel(cfg.LogLevel)
	case cfg.Verbose:
		return slog.LevelDebug, nil
	}
	return defaultLogLevel, nil
}

// checkLog refuses a log level or format the shim does not know, naming
// the flag and the variable.
func (cfg *Config) checkLog() error {
	if _, err := cfg.logLevel(); err != nil {
		return cli.Exit(fmt.Sprintf("--log-level (%s): %v", EnvLogLevel, err), ExitShimFailed)
	}
	if err := logging.CheckFormat(cfg.LogFormat); err != nil {
		return cli.Exit(fmt.Sprintf("--log-format (%s): %v", EnvLogFormat, err), ExitShimFailed)
	}
	return nil
}

func logFlags(cfg *Config) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name: "log-level", Usage: "Least level logged to stderr: debug (as --verbose), info (also failed commands), warn or error; empty is warn, or debug with --verbose.",
			EnvVars: []string{EnvLogLevel}, Destination: &cfg.LogLevel,
		},
		&cli.StringFlag{
			Name: "log-format", Usage: "Format of the log on stderr: text or json (one object per line).",
			EnvVars: []string{EnvLogFormat}, Value: logging.FormatText, Destination: &cfg.LogFormat,
		},
	}
}
