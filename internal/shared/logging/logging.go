// Package logging builds the structured logger of every binary of the
// project from a format and a level, so that all of them accept the same
// values (--log-format, --log-level) and write the same keys.
//
// # Keys
//
// The same thing carries the same key everywhere:
//
//	plugin     a volume plugin's name, such as kubernetes.io/glusterfs
//	pod        a pod as namespace/name
//	podUID     a pod's UID
//	container  a container's name in its pod
//	path       a mount point or another file-system path acted on
//	via        the way a command took: socket or cri (into a mount
//	           container), or host
//	err        the error
//
// Records about one object group its keys (a placement decision's under
// "decision", a command's under "command"). The Flexvolume driver's record
// of a call names its mount directory "dir", as readers of its log expect.
//
// # Defaults
//
// Text at info level, as every binary logged before these settings
// existed. The kubelet-exec-shim does not use [Flags]: its standard streams
// are the utility's, so it logs only what its own variables ask for.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The variables of [Flags] are the binary's prefix followed by these,
// read when a flag is not given.
const (
	SuffixFormat = "LOG_FORMAT"
	SuffixLevel  = "LOG_LEVEL"
)

// The variables every binary read before each had a prefix of its own,
// still read as deprecated aliases (package oldnames).
const (
	EnvFormat = "MOUNTCONTAINERS_LOG_FORMAT"
	EnvLevel  = "MOUNTCONTAINERS_LOG_LEVEL"
)

// Formats.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Formats and Levels are the accepted values, in the order of usage texts.
var (
	Formats = []string{FormatText, FormatJSON}
	Levels  = []string{"debug", "info", "warn", "error"}
)

// ParseLevel returns the level named by s (debug, info, warn or error, any
// case); an empty s is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want %s", s, strings.Join(Levels, ", "))
}

// CheckFormat returns an error naming s unless it is a known format; an
// empty s is text.
func CheckFormat(s string) error {
	switch strings.ToLower(s) {
	case "", FormatText, FormatJSON:
		return nil
	}
	return fmt.Errorf("log format %q: want %s", s, strings.Join(Formats, " or "))
}

// New returns a logger writing records of format (text or json; empty is
// text) at level and above (see [ParseLevel]; empty is info) to w.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	return NewAt(w, format, lvl)
}

// NewAt is [New] with a parsed level.
func NewAt(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	if err := CheckFormat(format); err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(format, FormatJSON) {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
