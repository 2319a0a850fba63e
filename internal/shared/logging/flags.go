package logging

import (
	"io"
	"log/slog"
	"strings"

	"github.com/urfave/cli/v2"
)

// Flag names.
const (
	FlagFormat = "log-format"
	FlagLevel  = "log-level"
)

// Flags returns --log-format and --log-level, read from envPrefix followed
// by [SuffixFormat] and [SuffixLevel] when not given (MOUNTPOD_LOG_LEVEL),
// then from the deprecated [EnvFormat] and [EnvLevel]; the defaults are
// text and info.
func Flags(envPrefix string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: FlagFormat, EnvVars: []string{envPrefix + SuffixFormat, EnvFormat}, Value: FormatText,
			Usage: "Format of the log on stderr: " + strings.Join(Formats, " or ") + " (one object per line)."},
		&cli.StringFlag{Name: FlagLevel, EnvVars: []string{envPrefix + SuffixLevel, EnvLevel}, Value: "info",
			Usage: "Least level logged: " + strings.Join(Levels, ", ") + "."},
	}
}

// FromFlags returns the logger to w that the [Flags] of c ask for, or a
// cli.Exit value with usageCode naming the flag and its bad value.
func FromFlags(c *cli.Context, w io.Writer, usageCode int) (*slog.Logger, error) {
	level, err := ParseLevel(c.String(FlagLevel))
	if err != nil {
		return nil, cli.Exit("--"+FlagLevel+": "+err.Error(), usageCode)
	}
	log, err := NewAt(w, c.String(FlagFormat), level)
	if err != nil {
		return nil, cli.Exit("--"+FlagFormat+": "+err.Error(), usageCode)
	}
	return log, nil
}
