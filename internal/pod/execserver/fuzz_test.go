package execserver

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mountcontainers/mountcontainers/pkg/execapi"
)

// FuzzCheckStart: the validation of a call's Start, which runs before
// anything else, accepts only a command with a non-empty argv[0], for this
// server's pod and container, with a timeout in (0, MaxTimeout]: the
// default for none, else exactly the one asked for. A refusal is
// INVALID_ARGUMENT or FAILED_PRECONDITION, and one of the timeout names the
// timeout asked for.
func FuzzCheckStart(f *testing.F) {
	uid, ctr := testID.PodUID, testID.ContainerName
	f.Add(false, "mount\x00-t\x00glusterfs\x00a:/v\x00/m", "PATH=/usr/bin", true, "/", int64(0), uid, ctr)
	f.Add(false, "sh\x00-c\x00exit 3", "", false, "", int64(1500), "", "")
	f.Add(false, "/usr/sbin/mount.glusterfs", "", false, "/tmp", int64(3600000), uid, "")
	f.Add(false, "x", "", false, "", int64(3600001), "", "")
	f.Add(false, "x", "", false, "", int64(-1), "", "")
	f.Add(false, "x", "", false, "", int64(math.MaxInt64), "", "")
	f.Add(false, "x", "", false, "", int64(math.MinInt64), "", "")
	f.Add(false, "x", "", false, "", int64(math.MaxInt64/int64(time.Millisecond)+1), "", "")
	f.Add(false, "", "", false, "", int64(0), "", "")
	f.Add(false, "\x00x", "", false, "", int64(0), "", "")
	f.Add(false, "a\xffb\x00..\x00../../etc/passwd", "\x00=\x00PATH", true, "..", int64(1), "", "")
	f.Add(false, "x", "", false, "", int64(0), "another-uid", ctr)
	f.Add(false, "x", "", false, "", int64(0), uid, "other")
	f.Add(true, "", "", false, "", int64(0), "", "")
	servers := []*Server{
		NewServer(Config{Identity: testID}),
		NewServer(Config{Identity: testID, CommandTimeout: 5 * time.Minute, MaxTimeout: time.Second}),
	}
	f.Fuzz(func(t *testing.T, nilStart bool, argv, env string, setEnv bool, dir string, ms int64, expectUID, expectCtr string) {
		var start *execapi.Start
		if !nilStart {
			start = &execapi.Start{
				Argv: split(argv), Env: split(env), SetEnv: setEnv, Dir: dir, TimeoutMs: ms,
				ExpectPodUid: expectUID, ExpectContainerName: expectCtr,
			}
		}
		for _, s := range servers {
			d, err := s.checkStart(start)
			if d2, err2 := s.checkStart(start); d2 != d || (err == nil) != (err2 == nil) {
				t.Fatalf("checkStart(%v) = %v, %v, then %v, %v", start, d, err, d2, err2)
			}
			if err != nil {
				st, _ := status.FromError(err)
				if c := st.Code(); c != codes.InvalidArgument && c != codes.FailedPrecondition {
					t.Fatalf("checkStart(%v): %v, want INVALID_ARGUMENT or FAILED_PRECONDITION", start, err)
				}
				if start != nil && len(start.Argv) > 0 && start.Argv[0] != "" && st.Code() == codes.InvalidArgument &&
					!strings.Contains(st.Message(), askedTimeout(ms)) {
					t.Fatalf("checkStart refuses timeout_ms %d with %q, which does not name it (%s)", ms, st.Message(), askedTimeout(ms))
				}
				continue
			}
			switch {
			case start == nil || len(start.Argv) == 0 || start.Argv[0] == "":
				t.Fatalf("checkStart accepted %v: no command", start)
			case expectUID != "" && expectUID != testID.PodUID, expectCtr != "" && expectCtr != testID.ContainerName:
				t.Fatalf("checkStart accepted %v for another pod or container", start)
			case d <= 0 || d > s.cfg.MaxTimeout:
				t.Fatalf("checkStart(%v): timeout %v, not in (0, %v]", start, d, s.cfg.MaxTimeout)
			case ms == 0 && d != s.cfg.CommandTimeout, ms != 0 && d != time.Duration(ms)*time.Millisecond:
				t.Fatalf("checkStart(timeout_ms %d): timeout %v", ms, d)
			}
		}
	})
}

// split splits a NUL-separated list; "" is no element.
func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// TestTimeoutRefusalNamesTheTimeout: a timeout too large for a duration
// was named by its wrapped, negative value. Found by FuzzCheckStart.
func TestTimeoutRefusalNamesTheTimeout(t *testing.T) {
	s := NewServer(Config{Identity: testID})
	for ms, want := range map[int64]string{
		math.MaxInt64:  "timeout 9223372036854775807ms:",
		3600001:        "timeout 1h0m0.001s:",
		-1:             "timeout -1ms:",
		math.MinInt64:  "timeout -9223372036854775808ms:",
		-9223372036854: "timeout -2562047h47m16.854s:",
	} {
		_, err := s.checkStart(&execapi.Start{Argv: []string{"true"}, TimeoutMs: ms})
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) {
			t.Errorf("timeout_ms %d: %v; want INVALID_ARGUMENT saying %q", ms, err, want)
		}
	}
}
