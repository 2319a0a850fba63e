package oldnames

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	renames := []Rename{{"OLD_A", "NEW_A"}, {"OLD_B", "NEW_B"}, {"OLD_C", "NEW_C"}}
	t.Setenv("OLD_A", "a")   // old only: copied, warned
	t.Setenv("OLD_B", "old") // both: the new wins, the old is ignored
	t.Setenv("NEW_B", "new")
	t.Setenv("NEW_C", "c") // new only: no word
	os.Unsetenv("NEW_A")
	var stderr bytes.Buffer
	Env(&stderr, "prog", renames)
	if _, set := os.LookupEnv("NEW_A"); set {
		t.Error("Env set NEW_A: it only warns")
	}
	want := "prog: OLD_A is deprecated: set NEW_A\nprog: OLD_B is deprecated and ignored: NEW_B is set\n"
	if stderr.String() != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", stderr.String(), want)
	}
}

func TestVars(t *testing.T) {
	renames := []Rename{{"OLD_A", "NEW_A"}, {"OLD_B", "NEW_B"}, {"OLDER_A", "NEW_A"}}
	if got := Vars("NEW_A", renames); !slices.Equal(got, []string{"NEW_A", "OLD_A", "OLDER_A"}) {
		t.Errorf("Vars(NEW_A) = %q", got)
	}
	if got := Vars("NEW_C", renames); !slices.Equal(got, []string{"NEW_C"}) {
		t.Errorf("Vars(NEW_C) = %q", got)
	}
}

func TestFlags(t *testing.T) {
	renames := []Rename{{"plugin", "plugins"}, {"install-shim", "install-shim-dir"}}
	for _, tc := range []struct {
		args, want []string
		warned     []string
	}{
		{[]string{"p", "serve", "--plugin", "a", "-plugin=b", "--install-shim", "/x"},
			[]string{"p", "serve", "--plugins", "a", "--plugins=b", "--install-shim-dir", "/x"},
			[]string{"--plugin", "--install-shim"}},
		// The current names, and names that only begin alike, stay.
		{[]string{"p", "--plugins", "a", "--plugin-x", "---plugin", "plugin"},
			[]string{"p", "--plugins", "a", "--plugin-x", "---plugin", "plugin"}, nil},
		// After --, a command's own arguments.
		{[]string{"p", "run", "--", "cmd", "--plugin"},
			[]string{"p", "run", "--", "cmd", "--plugin"}, nil},
		{[]string{"p"}, []string{"p"}, nil},
	} {
		var stderr bytes.Buffer
		got := Flags(&stderr, "prog", tc.args, renames)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Flags(%q) = %q, want %q", tc.args, got, tc.want)
		}
		for _, w := range tc.warned {
			if strings.Count(stderr.String(), w+" is deprecated") != 1 {
				t.Errorf("Flags(%q): warnings %q, want one for %s", tc.args, stderr.String(), w)
			}
		}
		if tc.warned == nil && stderr.Len() != 0 {
			t.Errorf("Flags(%q): warned %q", tc.args, stderr.String())
		}
	}
}
