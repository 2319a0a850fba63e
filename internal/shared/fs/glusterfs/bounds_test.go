package glusterfs

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// optionBounds are the most (and least) values of the mount options that
// size the glusterfs client's caches, queues and threads, written out here
// rather than read from the allow list.
var optionBounds = map[string][2]uint64{
	"lru-limit":                  {1, 262144},
	"invalidate-limit":           {0, 65536},
	"background-qlen":            {0, 1024},
	"reader-thread-count":        {0, 16},
	"fetch-attempts":             {0, 64},
	"volfile-max-fetch-attempts": {0, 64},
}

// TestBoundedMountOptions: each bounded option takes its bounds and
// refuses a value past them with an error naming the option and the
// bounds.
func TestBoundedMountOptions(t *testing.T) {
	for name, b := range optionBounds {
		for _, v := range []uint64{b[0], b[1]} {
			raw := fmt.Sprintf(`{"server":"a","volume":"v","mountOptions":"%s=%d"}`, name, v)
			if _, err := ParseOptions([]byte(raw)); err != nil {
				t.Errorf("%s=%d: %v, want it accepted", name, v, err)
			}
		}
		bad := []uint64{b[1] + 1, 4294967295}
		if b[0] > 0 {
			bad = append(bad, b[0]-1)
		}
		for _, v := range bad {
			raw := fmt.Sprintf(`{"server":"a","volume":"v","mountOptions":"%s=%d"}`, name, v)
			_, err := ParseOptions([]byte(raw))
			want := fmt.Sprintf("%s=%d: out of range, want %d to %d", name, v, b[0], b[1])
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strconv.Quote(KeyMountOptions)) {
				t.Errorf("%s=%d: %v, want an error on %q saying %q", name, v, err, KeyMountOptions, want)
			}
		}
	}
}

// checkBounds fails t for an accepted mount option past its bound.
func checkBounds(t *testing.T, raw []byte, opt string) {
	t.Helper()
	name, value, _ := strings.Cut(opt, "=")
	b, ok := optionBounds[name]
	if !ok {
		return
	}
	if n, err := strconv.ParseUint(value, 10, 64); err != nil || n < b[0] || n > b[1] {
		t.Fatalf("ParseOptions(%q): mount option %q past its bounds %d to %d", raw, opt, b[0], b[1])
	}
}
