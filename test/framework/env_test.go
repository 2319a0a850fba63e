package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadEnv(t *testing.T) {
	tests := []struct {
		name    string
		content string
		wantErr string
	}{
		{
			name: "as up.sh writes it",
			content: "export BED_DIR=/b\nexport KUBECONFIG=/b/pki/admin.kubeconfig\nexport KUBECTL=/k/kubectl\n" +
				"export CRI_SOCKET=/b/containerd/containerd.sock\nexport KUBELET_ROOT=/b/kubelet\nexport NODE_NAME=vm\n",
		},
		{
			name:    "plain and quoted, comments and blanks",
			content: "# bed\n\nBED_DIR=/b\nKUBECONFIG='/b/pki/admin.kubeconfig'\nKUBECTL=\"/k/kubectl\"\nCRI_SOCKET=/b/containerd/containerd.sock\nKUBELET_ROOT=/b/kubelet\nNODE_NAME=vm\n",
		},
		{name: "missing keys", content: "export BED_DIR=/b\n", wantErr: "missing"},
		{name: "bad line", content: "what\n", wantErr: "bad line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			env, err := LoadEnv(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadEnv() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if env.Kubeconfig != "/b/pki/admin.kubeconfig" || env.Kubectl != "/k/kubectl" || env.NodeName != "vm" ||
				env.KubeletRoot != "/b/kubelet" || env.Vars["BED_DIR"] != "/b" {
				t.Fatalf("LoadEnv() = %+v", env)
			}
		})
	}
}

func TestPoll(t *testing.T) {
	n := 0
	err := Poll(context.Background(), "three calls", time.Millisecond, time.Second,
		func(context.Context) (bool, string, error) { n++; return n == 3, "not yet", nil })
	if err != nil || n != 3 {
		t.Fatalf("Poll() = %v after %d calls, want nil after 3", err, n)
	}
	err = Poll(context.Background(), "never", time.Millisecond, 20*time.Millisecond,
		func(context.Context) (bool, string, error) { return false, "still waiting", nil })
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "still waiting") {
		t.Fatalf("Poll() = %v, want a timeout naming the last state", err)
	}
}
