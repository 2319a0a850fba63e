package shim_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/internal/node/shim"
)

// TestLogOnlyWhenAsked: the shim's standard streams are the utility's
// unless its log level asks for more; then its records (JSON with
// KUBELET_EXEC_SHIM_LOG_FORMAT=json) carry the keys of package exec's
// decisions.
func TestLogOnlyWhenAsked(t *testing.T) {
	utility := []string{"run", "--plugin", "kubernetes.io/rbd", "--", "sh", "-c", "echo out; echo err >&2"}
	t.Run("format alone", func(t *testing.T) {
		env := append(noRuntime(t), shim.EnvLogFormat+"=json")
		r := run(t, env, "", shimBin, append([]string{"--registration-dir", t.TempDir()}, utility...)...)
		if r.code != 0 || r.stdout != "out\n" || r.stderr != "err\n" {
			t.Errorf("code %d, stdout %q, stderr %q; want the utility's alone", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("debug json", func(t *testing.T) {
		env := append(noRuntime(t), shim.EnvLogFormat+"=json", shim.EnvLogLevel+"=debug")
		r := run(t, env, "", shimBin, append([]string{"--registration-dir", t.TempDir()}, utility...)...)
		if r.code != 0 || r.stdout != "out\n" {
			t.Fatalf("code %d, stdout %q, stderr %q; want 0 and the utility's stdout", r.code, r.stdout, r.stderr)
		}
		var decisions int
		var rest []string
		for _, line := range strings.SplitAfter(r.stderr, "\n") {
			if !strings.HasPrefix(line, "{") {
				rest = append(rest, line)
				continue
			}
			var rec struct {
				Msg      string
				Decision map[string]string
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q is not JSON: %v", line, err)
			}
			if rec.Msg != "exec decision" {
				continue
			}
			decisions++
			want := map[string]string{"plugin": "kubernetes.io/rbd", "where": "host", "reason": "not registered"}
			for k, v := range want {
				if rec.Decision[k] != v {
					t.Errorf("decision %s = %q, want %q: %s", k, rec.Decision[k], v, line)
				}
			}
		}
		if decisions != 1 || strings.Join(rest, "") != "err\n" {
			t.Errorf("%d decisions, other stderr %q; want 1 and the utility's", decisions, strings.Join(rest, ""))
		}
	})
}

// TestLogSettingsUsage: a bad log level or format is the shim's usage
// error, naming the flag and the variable; the utility does not run.
func TestLogSettingsUsage(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"level variable", []string{shim.EnvLogLevel + "=loud"}, nil, `--log-level (KUBELET_EXEC_SHIM_LOG_LEVEL): log level "loud"`},
		{"format variable", []string{shim.EnvLogFormat + "=yaml"}, nil, `--log-format (KUBELET_EXEC_SHIM_LOG_FORMAT): log format "yaml"`},
		{"level flag", nil, []string{"--log-level", "trace"}, `log level "trace"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append(tc.args, "--registration-dir", t.TempDir()), "run", "--plugin", "kubernetes.io/rbd", "--", "echo", "ran")
			r := run(t, append(noRuntime(t), tc.env...), "", shimBin, args...)
			if r.code != shim.ExitShimFailed || r.stdout != "" || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("code %d, stdout %q, stderr %q; want %d, nothing and %q", r.code, r.stdout, r.stderr, shim.ExitShimFailed, tc.want)
			}
		})
	}
}
