package execsocket

import (
	"regexp"
	"strings"
	"testing"
)

func TestPlainUIDMatchesItsExpression(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
	cases := []string{
		"", "a", "-", "-a", "a-", "9d1c7a52-2f0e-4c59-8a51-7f3e0c1b2a11", "A_b", "a.b", "a/b", "ü",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "a\x00", "a\n", "Z-0-z",
	}
	for _, s := range cases {
		if got, want := plainUID(s), re.MatchString(s); got != want {
			t.Errorf("plainUID(%q) = %v, the expression says %v", s, got, want)
		}
	}
}

func FuzzPlainUID(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
	f.Add("9d1c7a52-2f0e-4c59-8a51-7f3e0c1b2a11")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainUID(s), re.MatchString(s); got != want {
			t.Fatalf("plainUID(%q) = %v, the expression says %v", s, got, want)
		}
	})
}
