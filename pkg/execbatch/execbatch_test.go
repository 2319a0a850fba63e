package execbatch

import (
	"strings"
	"testing"
)

// TestEncodeDecode: requests survive the trip through arguments; what a
// batch may not carry is refused with the request's position.
func TestEncodeDecode(t *testing.T) {
	reqs := []Request{
		{Argv: []string{"mount", "-t", "glusterfs", "-o", "log-level=WARNING,a b", "h:/v", "/var/lib/kubelet/x"}, TimeoutMs: 60_000},
		{Argv: []string{"umount", "/x\n\"y\""}, TimeoutMs: 1},
	}
	args, err := EncodeRequests(reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		got, err := DecodeRequest(a)
		if err != nil || strings.Join(got.Argv, "\x00") != strings.Join(reqs[i].Argv, "\x00") || got.TimeoutMs != reqs[i].TimeoutMs {
			t.Errorf("request %d: %+v, %v; want %+v", i, got, err, reqs[i])
		}
	}
	for _, bad := range []struct {
		reqs []Request
		says string
	}{
		{nil, "want 1 to"},
		{make([]Request, MaxRequests+1), "want 1 to"},
		{[]Request{{Argv: []string{"true"}, TimeoutMs: 1}, {TimeoutMs: 1}}, "request 1: no command"},
		{[]Request{{Argv: []string{"true"}}}, "request 0: true: timeout 0 ms"},
		{[]Request{{Argv: []string{"x", strings.Repeat("a", MaxRequestSize)}, TimeoutMs: 1}}, "more than"},
	} {
		if _, err := EncodeRequests(bad.reqs); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%d requests: %v, want an error saying %q", len(bad.reqs), err, bad.says)
		}
	}
	for _, arg := range []string{`{"argv":[]}`, `{"argv":["x"],"timeoutMs":-1}`, `[`, strings.Repeat(" ", MaxRequestSize+1)} {
		if _, err := DecodeRequest(arg); err == nil {
			t.Errorf("DecodeRequest(%.40q) accepted it", arg)
		}
	}
	if _, err := DecodeResults([]byte(`[{"exitCode":0}]`), 2); err == nil || !strings.Contains(err.Error(), "1 results for 2") {
		t.Errorf("DecodeResults of one result for two commands: %v", err)
	}
}

// FuzzDecodeRequest: any argument decodes to a valid request or an error,
// never a panic; a request that decodes encodes again to one that decodes
// the same.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"argv":["mount","-t","glusterfs","h:/v","/x"],"timeoutMs":60000}`,
		`{"argv":[""],"timeoutMs":1}`, `{"argv":["x"],"timeoutMs":-5}`, `{"argv":null}`, `[]`, `{`, "",
		`{"argv":["a\u0000b"],"timeoutMs":9223372036854775807}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		r, err := DecodeRequest(arg)
		if err != nil {
			return
		}
		if r.Validate() != nil {
			t.Fatalf("DecodeRequest(%q) = %+v, which does not validate", arg, r)
		}
		args, err := EncodeRequests([]Request{r})
		if err != nil {
			if len(arg) <= MaxRequestSize/2 && !strings.Contains(err.Error(), "more than") {
				t.Fatalf("EncodeRequests of a decoded request %+v: %v", r, err)
			}
			return
		}
		again, err := DecodeRequest(args[0])
		if err != nil || strings.Join(again.Argv, "\x00") != strings.Join(r.Argv, "\x00") || again.TimeoutMs != r.TimeoutMs {
			t.Fatalf("round trip of %+v: %+v, %v", r, again, err)
		}
	})
}
