package shimtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests build the binaries as the release does.
func TestReleaseTagsAreTheBuildsTags(t *testing.T) {
	for _, f := range []struct{ path, want string }{
		{"Makefile", "BUILD_TAGS  := " + ReleaseTags + "\n"},
		{"images/Dockerfile", "go build -trimpath -tags " + ReleaseTags + " "},
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", f.path))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), f.want) {
			t.Errorf("%s does not build with %q", f.path, f.want)
		}
	}
}
