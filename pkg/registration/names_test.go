package registration

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidatePluginName(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name string
		ok   bool
	}{
		{"kubernetes.io/glusterfs", true},
		{"kubernetes.io/rbd", true},
		{"glusterfs", true},
		{"example.com/My_Plugin-1.2", true},
		{"a", true},
		{long, true},
		{"example.com/" + long, true},
		{"", false},
		{".hidden", false},
		{"..", false},
		{"../etc/passwd", false},
		{"kubernetes.io/../x", false},
		{"a..b", false},
		{"kubernetes.io~glusterfs", false},
		{"a\x00b", false},
		{"a/b/c", false},
		{"/abs", false},
		{"trailing/", false},
		{"-dash", false},
		{"dash-", false},
		{"sp ace", false},
		{"Example.com/x", false}, // the prefix is a DNS subdomain: lower case
		{long + "a", false},
		{"example.com/" + long + "a", false},
		{"a\nb", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.name), func(t *testing.T) {
			err := ValidatePluginName(tc.name)
			if tc.ok && err != nil {
				t.Fatalf("ValidatePluginName(%q) = %v, want nil", tc.name, err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatalf("ValidatePluginName(%q) = nil, want an error", tc.name)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.name)) {
					t.Fatalf("error %q does not quote the name %q", err, tc.name)
				}
			}
		})
	}
}

func TestFileNameRoundTrip(t *testing.T) {
	tests := []struct{ plugin, file string }{
		{"kubernetes.io/glusterfs", "kubernetes.io~glusterfs.json"},
		{"kubernetes.io/rbd", "kubernetes.io~rbd.json"},
		{"glusterfs", "glusterfs.json"},
		{"example.com/a.b_c-d", "example.com~a.b_c-d.json"},
	}
	for _, tc := range tests {
		got, err := FileName(tc.plugin)
		if err != nil || got != tc.file {
			t.Errorf("FileName(%q) = %q, %v; want %q", tc.plugin, got, err, tc.file)
		}
		back, err := PluginFromFileName(tc.file)
		if err != nil || back != tc.plugin {
			t.Errorf("PluginFromFileName(%q) = %q, %v; want %q", tc.file, back, err, tc.plugin)
		}
	}
}

func TestPluginFromFileNameRejects(t *testing.T) {
	for _, base := range []string{
		".kubernetes.io~rbd.json",
		".kubernetes.io~rbd.json.tmp-123",
		"kubernetes.io~rbd",
		"a~b~c.json",
		"~rbd.json",
		".json",
		"../x.json",
		"dir/x.json",
		"..json",
	} {
		if p, err := PluginFromFileName(base); err == nil {
			t.Errorf("PluginFromFileName(%q) = %q, want an error", base, p)
		}
	}
}

func TestPathStaysInDir(t *testing.T) {
	if _, err := Path("/reg", "../../etc/shadow"); err == nil {
		t.Fatal("Path accepted a name that leaves the directory")
	}
	p, err := Path("/reg", "kubernetes.io/rbd")
	if err != nil || p != "/reg/kubernetes.io~rbd.json" {
		t.Fatalf("Path = %q, %v", p, err)
	}
}

func ExampleFileName() {
	name, _ := FileName("kubernetes.io/glusterfs")
	fmt.Println(name)
	plugin, _ := PluginFromFileName(name)
	fmt.Println(plugin)
	// Output:
	// kubernetes.io~glusterfs.json
	// kubernetes.io/glusterfs
}
