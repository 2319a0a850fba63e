package shim

import (
	"io"
	"strings"
	"testing"
)

// TestShortHelp: the usage line of the shim and of each command is one
// short line; the details are the description.
func TestShortHelp(t *testing.T) {
	var unknown string
	app := newApp(IO{Stdout: io.Discard, Stderr: io.Discard}, nil, &unknown)
	lines := map[string]string{BinaryName: app.Usage}
	for _, c := range app.Commands {
		lines[BinaryName+" "+c.Name] = c.Usage
	}
	for name, u := range lines {
		if len(u) > 100 || strings.Contains(u, "\n") {
			t.Errorf("%s: usage of %d bytes, want one line of at most 100 (the rest in its description): %q", name, len(u), u)
		}
	}
}
