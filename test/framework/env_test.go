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

func TestLoadEnvNodes(t *testing.T) {
	base := "export BED_DIR=/b\nexport KUBECONFIG=/b/pki/admin.kubeconfig\nexport KUBECTL=/k/kubectl\n" +
		"export CRI_SOCKET=/b/n/bed-1/containerd/containerd.sock\nexport KUBELET_ROOT=/b/n/bed-1/k\nexport NODE_NAME=bed-1\nexport BED_HOST_NAME=vm\n"
	node := func(i int) string {
		return strings.ReplaceAll("export NODE_#_NAME=bed-#\nexport NODE_#_IP=10.0.0.#\n"+
			"export NODE_#_KUBELET_ROOT=/b/n/bed-#/k\nexport NODE_#_REGISTRATION_DIR=/b/n/bed-#/k/plugin-containers\n"+
			"export NODE_#_CRI_SOCKET=/b/n/bed-#/containerd/containerd.sock\n", "#", string(rune('0'+i)))
	}
	load := func(t *testing.T, content string) (*Env, error) {
		path := filepath.Join(t.TempDir(), "env")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return LoadEnv(path)
	}
	env, err := load(t, base+"export BED_NODES=3\n"+node(1)+node(2)+node(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(env.Nodes) != 3 || env.Nodes[2].Name != "bed-3" || env.Nodes[2].RegistrationDir != "/b/n/bed-3/k/plugin-containers" ||
		env.Nodes[1].CRISocket != "/b/n/bed-2/containerd/containerd.sock" || env.HostName != "vm" {
		t.Fatalf("LoadEnv() nodes %+v, host name %q", env.Nodes, env.HostName)
	}
	if _, err := load(t, base+"export BED_NODES=3\n"+node(1)+node(2)); err == nil || !strings.Contains(err.Error(), "node 3") {
		t.Fatalf("a node missing: %v, want an error naming node 3", err)
	}
	if _, err := load(t, base+"export BED_NODES=three\n"); err == nil || !strings.Contains(err.Error(), "BED_NODES") {
		t.Fatalf("BED_NODES=three: %v", err)
	}
	// An env file older than the nodes is a bed of one.
	env, err = load(t, base)
	if err != nil || len(env.Nodes) != 1 || env.Nodes[0].KubeletRoot != "/b/n/bed-1/k" || env.Nodes[0].Name != "bed-1" {
		t.Fatalf("LoadEnv() of a file without nodes: %+v, %v", env, err)
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
