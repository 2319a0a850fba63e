package scope

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func ExampleName() {
	fmt.Println(Name("/var/lib/kubelet/pods/0c9f6a2e/volumes/kubernetes.io~glusterfs/data"))
	// The same target, written differently, is the same scope.
	fmt.Println(Name("/var/lib/kubelet/pods/0c9f6a2e/volumes/kubernetes.io~glusterfs/data/"))
	// Output:
	// mount-b4b18144bf8ab18f
	// mount-b4b18144bf8ab18f
}

func ExamplePluginDir() {
	dir, _ := PluginDir("kubernetes.io/glusterfs")
	fmt.Println(dir)
	// Output: kubernetes.io~glusterfs
}

func ExampleSliceName() {
	for _, plugin := range []string{"kubernetes.io/glusterfs", "example.com/my-fs", "cephfs"} {
		slice, _ := SliceName("mountcontainers", plugin)
		fmt.Println(slice, slicePath(slice))
	}
	// Output:
	// mountcontainers-kubernetes.io-glusterfs.slice /mountcontainers.slice/mountcontainers-kubernetes.io.slice/mountcontainers-kubernetes.io-glusterfs.slice
	// mountcontainers-example.com-my\x2dfs.slice /mountcontainers.slice/mountcontainers-example.com.slice/mountcontainers-example.com-my\x2dfs.slice
	// mountcontainers-cephfs.slice /mountcontainers.slice/mountcontainers-cephfs.slice
}

func TestSliceNameRefuses(t *testing.T) {
	for _, tc := range []struct{ parent, plugin string }{
		{"mountcontainers", "../x"},
		{"mountcontainers", "a~b"},
		{"../x", "kubernetes.io/glusterfs"},
		{"", "kubernetes.io/glusterfs"},
	} {
		if s, err := SliceName(tc.parent, tc.plugin); err == nil {
			t.Errorf("SliceName(%q, %q) = %q; want an error", tc.parent, tc.plugin, s)
		}
	}
	if got := unitEscape(".a-b/c"); got != `\x2ea\x2db\x2fc` {
		t.Errorf("unitEscape = %q", got)
	}
}

func TestParseMemoryLimit(t *testing.T) {
	for s, want := range map[string]int64{
		"": 0, "0": 0, "512Mi": 512 << 20, "1G": 1e9, "1073741824": 1 << 30, "64Ki": 64 << 10,
		"3k": 3000, "2Ti": 2 << 40, "1Ei": 1 << 60, "7E": 7e18,
	} {
		if got, err := ParseMemoryLimit(s); err != nil || got != want {
			t.Errorf("ParseMemoryLimit(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"lots", "-1Mi", "0.5", "1e9", "0.5Gi", "1K", "1ki", "1GT", "Mi", "1 Mi", "8Ei", "9223372036854775808", "1m"} {
		if got, err := ParseMemoryLimit(s); err == nil {
			t.Errorf("ParseMemoryLimit(%q) = %d; want an error", s, got)
		}
	}
}

// FuzzParseMemoryLimit holds ParseMemoryLimit to Kubernetes' own parser:
// whatever it accepts, resource.ParseQuantity reads as the same number of
// bytes.
func FuzzParseMemoryLimit(f *testing.F) {
	for _, s := range []string{"512Mi", "1G", "1073741824", "0", "7E", "1Ei", "0.5Gi", "1e9", "+1Mi", "01Mi"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseMemoryLimit(s)
		if err != nil || s == "" {
			return
		}
		q, qerr := resource.ParseQuantity(s)
		if qerr != nil {
			t.Fatalf("ParseMemoryLimit(%q) = %d, but Kubernetes refuses it: %v", s, got, qerr)
		}
		if q.CmpInt64(got) != 0 {
			t.Fatalf("ParseMemoryLimit(%q) = %d, Kubernetes reads %s", s, got, q.String())
		}
	})
}

func TestConfigRefuses(t *testing.T) {
	for _, cfg := range []Config{
		{Backend: "docker"},
		{CgroupNS: "sometimes"},
		{MemoryLimit: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded; want an error", cfg)
		}
	}
}
