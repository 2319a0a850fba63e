package boundary

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func ExampleMountKey() {
	fmt.Println(MountKey("/var/lib/kubelet/pods/0c9f6a2e/volumes/kubernetes.io~glusterfs/data"))
	// The same target, written differently, has the same key.
	fmt.Println(MountKey("/var/lib/kubelet/pods/0c9f6a2e/volumes/kubernetes.io~glusterfs/data/"))
	// Output:
	// mount-b4b18144bf8ab18f
	// mount-b4b18144bf8ab18f
}

func ExampleEscapePluginName() {
	fmt.Println(EscapePluginName("kubernetes.io/glusterfs"))
	// Output: kubernetes.io~glusterfs
}

func TestValidMountKey(t *testing.T) {
	for name, want := range map[string]bool{
		MountKey("/x"):             true,
		"mount-0123456789abcdef":   true,
		"mount-0123456789ABCDEF":   false,
		"mount-0123456789abcde":    false,
		"mount-0123456789abcdef0":  false,
		"Mount-0123456789abcdef":   false,
		"mount-0123456789abcdef\n": false,
		"":                         false,
	} {
		if got := ValidMountKey(name); got != want {
			t.Errorf("ValidMountKey(%q) = %v, want %v", name, got, want)
		}
	}
}

// pluginNames are names to hold ValidatePluginName to Kubernetes' rule with.
var pluginNames = []string{
	"kubernetes.io/glusterfs", "kubernetes.io/rbd", "example.com/my-driver_v2.1", "glusterfs", "a", "A1",
	"", "/", "a/", "/a", "a/b/c", "..", "a..b", "x/a..b", ".a", "a.", "-a", "a-", "_a", "a_",
	"Kubernetes.io/x", "kube_rnetes.io/x", "k8s..io/x", ".k8s.io/x", "k8s.io./x", "-k.io/x", "k-.io/x",
	"a~b", "a b", "a\x00b", "ü", strings.Repeat("a", 63), strings.Repeat("a", 64),
	strings.Repeat("a", 63) + "/" + strings.Repeat("b", 63), strings.Repeat("a.", 126) + "a/x", strings.Repeat("a.", 127) + "a/x",
}

func TestValidatePluginNameAgreesWithKubernetes(t *testing.T) {
	for _, name := range pluginNames {
		checkPluginName(t, name)
	}
}

// FuzzValidatePluginName holds the hand-written rule to Kubernetes'
// qualified-name validation, with what a path component needs on top.
func FuzzValidatePluginName(f *testing.F) {
	for _, name := range pluginNames {
		f.Add(name)
	}
	f.Fuzz(checkPluginName)
}

// kubernetesRule is the rule as Kubernetes' validation package and the
// needs of a path component state it.
func kubernetesRule(name string) bool {
	return name != "" && !strings.ContainsRune(name, 0) && !strings.HasPrefix(name, ".") &&
		!strings.Contains(name, "..") && !strings.Contains(name, PluginNameSeparator) &&
		len(validation.IsQualifiedName(name)) == 0
}

func checkPluginName(t *testing.T, name string) {
	err := ValidatePluginName(name)
	if want := kubernetesRule(name); (err == nil) != want {
		t.Fatalf("ValidatePluginName(%q) = %v; Kubernetes' rule says valid: %v", name, err, want)
	}
	if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
		t.Errorf("the error %q does not quote the name", err)
	}
	if err == nil {
		c := EscapePluginName(name)
		if strings.Contains(c, "/") || c == "." || c == ".." || UnescapePluginName(c) != name {
			t.Fatalf("EscapePluginName(%q) = %q: not one component that gives the name back", name, c)
		}
	}
}
