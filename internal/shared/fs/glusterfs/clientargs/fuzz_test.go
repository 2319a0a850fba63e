package clientargs

import (
	"slices"
	"strings"
	"testing"
)

// FuzzArgs: the translation is deterministic; what it accepts gives the
// client its own options only (each --NAME..., the process name's and a
// halo option's word after their flag), no argument holding a space, a
// control character or a NUL byte, and the target last; a refusal is an
// *Error with the script's status.
func FuzzArgs(f *testing.F) {
	for _, s := range [][2]string{
		{"srv:/vol", "rw,log-level=ERROR,auto_unmount,backup-volfile-servers=srv2:srv3"},
		{"a,b:/vol/sub", "ro,acl,halo-max-latency=5,process-name=x,context=system_u:object_r:t:s0"},
		{"srv:/snaps/s/v", "transport=rdma,server-port=1,fopen-keep-cache"},
		{"/etc/glusterfs/v.vol", "backup-volfile-servers=[::1]:b,,x-a"},
		{"srv:/", "no-root-squash=maybe"},
		{"-o", "ro"},
	} {
		f.Add(s[0], s[1], "/mnt/x")
	}
	f.Fuzz(func(t *testing.T, source, opts, target string) {
		argv := []string{Helper, source, target, "-o", opts}
		args, tgt, isMount, err := Args(argv)
		args2, tgt2, isMount2, err2 := Args(argv)
		if !slices.Equal(args, args2) || tgt != tgt2 || isMount != isMount2 || (err == nil) != (err2 == nil) {
			t.Fatalf("Args(%q) differs between two calls", argv)
		}
		if err != nil {
			if errorCode(err) != 1 {
				t.Fatalf("Args(%q): %v, want an *Error with status 1", argv, err)
			}
			return
		}
		if !isMount || args[0] != Program || args[len(args)-1] != tgt {
			t.Fatalf("Args(%q) = %q (mount %v, target %q)", argv, args, isMount, tgt)
		}
		for i, a := range args[1 : len(args)-1] {
			prev := args[i]
			if bad(a) || !strings.HasPrefix(a, "--") && prev != "--process-name" && prev != "--xlator-option" {
				t.Fatalf("Args(%q) = %q: argument %q", argv, args, a)
			}
		}
	})
}
