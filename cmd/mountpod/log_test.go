package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/shared/logging"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// TestServeLogFlagsUsage: a bad log format or level, by flag or variable,
// is a usage error naming it.
func TestServeLogFlagsUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"format flag", []string{"serve", "--log-format", "yaml"}, nil, `--log-format: log format "yaml": want text or json`},
		{"level flag", []string{"serve", "--log-level", "loud"}, nil, `--log-level: log level "loud": want debug, info, warn, error`},
		{"format variable", []string{"serve"}, map[string]string{logging.EnvFormat: "xml"}, `--log-format: log format "xml"`},
		{"level variable", []string{"serve"}, map[string]string{logging.EnvLevel: "trace"}, `--log-level: log level "trace"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setPodEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, _, stderr := runApp(context.Background(), tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("mountpod %q = %d, %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// TestServeJSONLog: with --log-format json every line of serve's log is
// a JSON object, and its records of serving and of each registration carry
// the keys of package logging.
func TestServeJSONLog(t *testing.T) {
	dir := setPodEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var stderr string
	go func() {
		var code int
		code, _, stderr = runApp(ctx, "serve", "--log-format", "json", "--log-level", "debug")
		done <- code
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if entries, err := registration.List(dir); err == nil && len(entries) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not registered 5s after serve started")
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d, want 0; stderr:\n%s", code, stderr)
	}
	byMsg := map[string][]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		msg, _ := rec["msg"].(string)
		byMsg[msg] = append(byMsg[msg], rec)
	}
	want := map[string]map[string]any{
		"serving":      {"pod": pod.PodNamespace + "/" + pod.PodName, "podUID": pod.PodUID, "container": pod.ContainerName},
		"registered":   {"podUID": pod.PodUID, "plugin": nil, "path": nil},
		"unregistered": {"podUID": pod.PodUID, "plugin": nil, "path": nil},
	}
	for msg, keys := range want {
		recs := byMsg[msg]
		if len(recs) == 0 {
			t.Errorf("no %q record in:\n%s", msg, stderr)
			continue
		}
		for k, v := range keys {
			got, ok := recs[0][k]
			if !ok || v != nil && got != v {
				t.Errorf("%q record: %s = %v, want %v", msg, k, got, v)
			}
		}
	}
}
