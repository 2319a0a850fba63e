package registrar

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMissingTools(t *testing.T) {
	bin1, bin2 := t.TempDir(), t.TempDir()
	writeExecutable(t, filepath.Join(bin1, "rbd"))
	writeExecutable(t, filepath.Join(bin2, "mkfs.xfs"))
	if err := os.WriteFile(filepath.Join(bin1, "notexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(bin1, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(bin1, "rbd"), filepath.Join(bin2, "rbd-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(bin1, "gone"), filepath.Join(bin2, "dangling")); err != nil {
		t.Fatal(err)
	}
	path := bin1 + string(filepath.ListSeparator) + bin2
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relBin1, err := filepath.Rel(wd, bin1)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		searchPath string
		tools      []string
		want       []string
	}{
		{"all present", path, []string{"rbd", "mkfs.xfs"}, nil},
		{"none required", path, nil, nil},
		{"missing listed in order", path, []string{"zz", "rbd", "aa"}, []string{"zz", "aa"}},
		{"not executable", path, []string{"notexec"}, []string{"notexec"}},
		{"directory", path, []string{"adir"}, []string{"adir"}},
		{"symlink to executable", path, []string{"rbd-link"}, nil},
		{"dangling symlink", path, []string{"dangling"}, []string{"dangling"}},
		{"absolute path", "/nonexistent", []string{filepath.Join(bin2, "mkfs.xfs")}, nil},
		{"absolute path missing", path, []string{filepath.Join(bin2, "rbd")}, []string{filepath.Join(bin2, "rbd")}},
		{"relative PATH entry ignored", relBin1, []string{"rbd"}, []string{"rbd"}},
		{"only later PATH entry has it", "/nonexistent:" + bin2, []string{"mkfs.xfs"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MissingTools(tt.searchPath, tt.tools); !slices.Equal(got, tt.want) {
				t.Errorf("MissingTools(%q, %q) = %q, want %q", tt.searchPath, tt.tools, got, tt.want)
			}
		})
	}
}
