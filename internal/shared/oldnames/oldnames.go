// Package oldnames keeps the old names of flags and environment variables
// working after a rename, as deprecated aliases: a flag reads its
// variable's old names after its new one ([Vars]), a command maps old flag
// names to the new ones before it parses them ([Flags]), and says once, on
// standard error, which old name it met and what replaces it ([Env]).
//
// Every binary of the project names its environment variables with one
// prefix, its own, followed by its flag's name (MOUNTPOD_REGISTRATION_DIR
// is mountpod's --registration-dir); docs/naming.md lists them with the
// old names still read.
package oldnames

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// A Rename is an old name and the name that replaced it: environment
// variables as they are spelt, flags without their dashes.
type Rename struct {
	Old, New string
}

// Vars returns name and then the old names renames give it: a flag's
// EnvVars, read in that order (the first set wins).
func Vars(name string, renames []Rename) []string {
	vars := []string{name}
	for _, r := range renames {
		if r.New == name {
			vars = append(vars, r.Old)
		}
	}
	return vars
}

// Env warns once per old variable name set in the environment: deprecated,
// or ignored when the new name is set too (a flag whose EnvVars are
// [Vars]' reads the new one first). prog names the command in the
// warnings. It changes nothing.
func Env(stderr io.Writer, prog string, renames []Rename) {
	for _, r := range renames {
		if _, ok := os.LookupEnv(r.Old); !ok {
			continue
		}
		if _, set := os.LookupEnv(r.New); set {
			fmt.Fprintf(stderr, "%s: %s is deprecated and ignored: %s is set\n", prog, r.Old, r.New)
			continue
		}
		fmt.Fprintf(stderr, "%s: %s is deprecated: set %s\n", prog, r.Old, r.New)
	}
}

// Flags returns args with each old flag name replaced by its new one
// (-old, --old, -old=v and --old=v alike), and warns once per old name
// used. args[0] is the command; nothing after a "--" is read, so a
// command's own arguments stay as they are.
func Flags(stderr io.Writer, prog string, args []string, renames []Rename) []string {
	if len(args) < 2 {
		return args
	}
	warned := map[string]bool{}
	out := make([]string, 0, len(args))
	out = append(out, args[0])
	for i, a := range args[1:] {
		if a == "--" {
			out = append(out, args[1+i:]...)
			break
		}
		out = append(out, rename(stderr, prog, a, renames, warned))
	}
	return out
}

func rename(stderr io.Writer, prog, arg string, renames []Rename, warned map[string]bool) string {
	dashes := len(arg) - len(strings.TrimLeft(arg, "-"))
	if dashes != 1 && dashes != 2 {
		return arg
	}
	name, value, hasValue := strings.Cut(arg[dashes:], "=")
	for _, r := range renames {
		if name != r.Old {
			continue
		}
		if !warned[r.Old] {
			warned[r.Old] = true
			fmt.Fprintf(stderr, "%s: --%s is deprecated: use --%s\n", prog, r.Old, r.New)
		}
		arg = "--" + r.New
		if hasValue {
			arg += "=" + value
		}
		return arg
	}
	return arg
}
