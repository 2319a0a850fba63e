package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// The values of --dry-run, as kubectl's.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
)

// currentSpellings returns args (args[0] the command) with the old
// spellings of its flags replaced by the current ones, and writes one
// warning per old spelling used to stderr:
//
//   - --dry-run alone, or =true, is --dry-run=client (it was a boolean;
//     kubectl's is a string whose bare form meant client); =false is none;
//   - -l is --pod-selector: kubectl drain's -l selects nodes, and will be
//     --selector's here once the old meaning is gone.
//
// Only the flags before the first argument that is not one (the
// DaemonSet's name) or "--" are read, as the flags are parsed; the value
// of a flag that takes one is skipped.
func currentSpellings(args []string, flags []cli.Flag, stderr io.Writer) []string {
	if len(args) < 2 {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			continue
		}
		for _, n := range f.Names() {
			takesValue[n] = true
		}
	}
	warned := map[string]bool{}
	warn := func(old, msg string) {
		if !warned[old] {
			warned[old] = true
			fmt.Fprintf(stderr, "mountpod-rollout: %s is deprecated: %s\n", old, msg)
		}
	}
	out := append([]string{}, args[:1]...)
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, rest[i:]...)
			break
		}
		if strings.HasPrefix(a, "---") {
			out = append(out, a) // not a flag: the parser refuses it
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case name == "dry-run" && (!hasValue || value == "true"):
			warn("--dry-run without a value", "use --dry-run=client, as kubectl")
			a = "--dry-run=" + dryRunClient
		case name == "dry-run" && value == "false":
			warn("--dry-run=false", "use --dry-run=none, as kubectl")
			a = "--dry-run=" + dryRunNone
		case name == "l":
			warn("-l", "use --pod-selector (kubectl drain's -l selects nodes: --selector here)")
			a = "--pod-selector"
			if hasValue {
				a += "=" + value
			}
		}
		out = append(out, a)
		if !hasValue && takesValue[name] && name != "dry-run" && i+1 < len(rest) {
			i++
			out = append(out, rest[i])
		}
	}
	return out
}
