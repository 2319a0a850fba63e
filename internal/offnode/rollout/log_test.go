package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
)

// TestStepsLoggedAtDebug: each progress step is also a debug record (one
// JSON object with its node, step and status under --log-format json), and
// none at the default level.
func TestStepsLoggedAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level string
		steps bool
	}{{"debug", true}, {"info", false}} {
		t.Run(tc.level, func(t *testing.T) {
			e := newEnv(t, nil)
			var buf bytes.Buffer
			log, err := logging.New(&buf, "json", tc.level)
			if err != nil {
				t.Fatal(err)
			}
			r := e.rollout(nil)
			r.Logger = log
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := r.Run(ctx); err != nil {
				t.Fatal(err)
			}
			steps := 0
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if line == "" {
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q is not JSON: %v", line, err)
				}
				if rec["msg"] != "rollout step" {
					continue
				}
				steps++
				for _, k := range []string{"node", "step", "status", "totalSeconds"} {
					if _, ok := rec[k]; !ok {
						t.Errorf("rollout step record without %q: %s", k, line)
					}
				}
			}
			if tc.steps && steps == 0 || !tc.steps && steps != 0 {
				t.Errorf("%d rollout step records at level %s:\n%s", steps, tc.level, buf.String())
			}
		})
	}
}
