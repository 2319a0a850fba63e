package logging_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
)

func TestNew(t *testing.T) {
	tests := []struct {
		format, level string
		wantErr       string // empty: no error
		json          bool
		debug, info   bool // whether a record of that level is written
	}{
		{"", "", "", false, false, true},
		{"text", "info", "", false, false, true},
		{"json", "debug", "", true, true, true},
		{"JSON", "WARN", "", true, false, false},
		{"json", "error", "", true, false, false},
		{"yaml", "info", `log format "yaml": want text or json`, false, false, false},
		{"text", "trace", `log level "trace": want debug, info, warn, error`, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.format+"/"+tc.level, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := logging.New(&buf, tc.format, tc.level)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("d")
			if got := buf.Len() > 0; got != tc.debug {
				t.Errorf("debug record written: %t, want %t", got, tc.debug)
			}
			buf.Reset()
			log.Info("i", "plugin", "kubernetes.io/glusterfs")
			if got := buf.Len() > 0; got != tc.info {
				t.Errorf("info record written: %t, want %t", got, tc.info)
			}
			if !tc.info {
				return
			}
			var rec map[string]any
			err = json.Unmarshal(buf.Bytes(), &rec)
			if (err == nil) != tc.json {
				t.Errorf("record %q parses as JSON: %v, want %t", buf.String(), err, tc.json)
			}
			if tc.json && rec["plugin"] != "kubernetes.io/glusterfs" {
				t.Errorf("record %q: plugin %v", buf.String(), rec["plugin"])
			}
		})
	}
}

func TestParseLevel(t *testing.T) {
	for s, want := range map[string]slog.Level{"": slog.LevelInfo, "debug": slog.LevelDebug, "Info": slog.LevelInfo, "warning": slog.LevelWarn, "error": slog.LevelError} {
		if got, err := logging.ParseLevel(s); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
}
