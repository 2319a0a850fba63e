// Package cliexit turns the error a urfave/cli application returns into the
// process's exit code, the same way for every binary of the project. Exit
// codes are data: urfave/cli only type-asserts cli.ExitCoder, so the
// applications return cli.Exit values unwrapped and let main exit with
// what Code says.
package cliexit

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// Code returns the exit code for err and prints its message to stderr,
// prefixed with "prog: " unless it already is: 0 for nil (nothing printed),
// the code of a cli.ExitCoder (nothing printed for an empty message), and
// fallback for any other error, such as a usage error of urfave/cli.
func Code(stderr io.Writer, prog string, err error, fallback int) int {
	if err == nil {
		return 0
	}
	code := fallback
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if msg := err.Error(); msg != "" {
		if !strings.HasPrefix(msg, prog+":") {
			msg = prog + ": " + msg
		}
		fmt.Fprintln(stderr, msg)
	}
	return code
}
