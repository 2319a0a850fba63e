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

// FuzzFlags: whatever the arguments, Flags keeps their number and order,
// changes none after "--", and leaves no old name spelt as a flag before
// it; each old name is warned of at most once.
func FuzzFlags(f *testing.F) {
	for _, seed := range []string{"serve --plugin a", "--plugin=b -- --plugin", "---plugin -plugin", "-", "--=x --"} {
		f.Add(seed)
	}
	renames := []Rename{{"plugin", "plugins"}, {"install-shim", "install-shim-dir"}}
	f.Fuzz(func(t *testing.T, line string) {
		args := append([]string{"prog"}, strings.Fields(line)...)
		var stderr bytes.Buffer
		got := Flags(&stderr, "prog", args, renames)
		if len(got) != len(args) {
			t.Fatalf("Flags(%q) = %q: %d arguments, want %d", args, got, len(got), len(args))
		}
		dash := slices.Index(args, "--")
		for i := range args {
			if dash >= 0 && i >= dash {
				if got[i] != args[i] {
					t.Fatalf("Flags(%q) changed %q after --", args, args[i])
				}
				continue
			}
			for _, r := range renames {
				for _, old := range []string{"-" + r.Old, "--" + r.Old} {
					if got[i] == old || strings.HasPrefix(got[i], old+"=") {
						t.Fatalf("Flags(%q) left %q", args, got[i])
					}
				}
			}
		}
		for _, r := range renames {
			if n := strings.Count(stderr.String(), "--"+r.Old+" is deprecated"); n > 1 {
				t.Fatalf("Flags(%q) warned %d times of --%s", args, n, r.Old)
			}
		}
	})
}
