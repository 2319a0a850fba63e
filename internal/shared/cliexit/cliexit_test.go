package cliexit

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestCode(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"nil", nil, 0, ""},
		{"exit coder keeps its code", cli.Exit("bad registration", 125), 125, "prog: bad registration\n"},
		{"silent exit coder", cli.Exit("", 37), 37, ""},
		{"already prefixed", cli.Exit("prog: refused", 3), 3, "prog: refused\n"},
		{"wrapped exit coder", fmt.Errorf("ctx: %w", cli.Exit("x", 4)), 4, "prog: ctx: x\n"},
		{"other error", errors.New("flag provided but not defined: -x"), 2, "prog: flag provided but not defined: -x\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if got := Code(&b, "prog", tc.err, 2); got != tc.code || b.String() != tc.stderr {
				t.Fatalf("Code = %d, %q; want %d, %q", got, b.String(), tc.code, tc.stderr)
			}
		})
	}
}
