package flexvolume

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
)

// FuzzDecodeSettings: settings a file holds that decode and validate have
// only the keys Install writes, are written back (as Install writes them) to the same settings, keep
// validating with their defaults filled in, and give a positive timeout, a
// known exec mode and an allow-list that parses, also from the
// environment's comma-separated form.
func FuzzDecodeSettings(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"plugin":"example.com/gluster","registrationDir":"/r","runtimeEndpoint":"/run/x.sock","timeout":"5s"}`,
		`{"execMode":"socket","logFile":"/var/log/a.log"}`,
		`{"runtimeEndpoint":"unix:///run/containerd/containerd.sock","execMode":"cri"}`,
		`{"allowedServers":["node-1","127.0.1.1"," gluster.example.com ","","10.0.0.0/8","2001:db8::/32","fe80::1"]}`,
		`{"allowedServers":["::ffff:127.0.0.1"]}`, `{"allowedServers":["a,b"]}`, `{"allowedServers":[]}`,
		`{"timeout":"soon"}`, `{"timeout":"-1s"}`, `{"timeout":"0"}`, `{"timeout":"1ns"}`, `{"timeout":"9223372036854775807ns"}`,
		`{"runtimeEndpoint":"tcp://x"}`, `{"execMode":"fast"}`, `{"logFile":"driver.log"}`, `{"logFile":"/a/../b"}`,
		`{"plugin":"Kubernetes.io/x"}`, `{"plugin":"a/b/c"}`, `{"registrationDir":"rel"}`,
		`{"plugin":"a\u0000b"}`, "{\"plugin\":\"\xff\"}", `{"timeout":5}`, `{"allowedServer":["x"]}`,
		`{} {}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSettings(data)
		if err != nil || s.Validate() != nil {
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(data, &obj); err != nil {
			t.Fatalf("settings %q accepted, but they are not one JSON object: %v", data, err)
		}
		for k := range obj {
			if !slices.ContainsFunc(settingsKeys, func(f string) bool { return strings.EqualFold(f, k) }) {
				t.Fatalf("settings %q accepted with the unknown key %q (known: %q)", data, k, settingsKeys)
			}
		}
		enc, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeSettings(enc)
		if err != nil || back.Validate() != nil || !reflect.DeepEqual(normalSettings(back), normalSettings(s)) {
			t.Fatalf("settings %q = %+v; written back as %s they decode to %+v, %v", data, s, enc, back, err)
		}
		w := s.WithDefaults()
		if err := w.Validate(); err != nil || !reflect.DeepEqual(w.WithDefaults(), w) {
			t.Fatalf("settings %+v with defaults %+v: %v", s, w, err)
		}
		if d := s.TimeoutDuration(); d <= 0 || w.TimeoutDuration() != d {
			t.Fatalf("settings %+v: timeout %v, with defaults %v", s, d, w.TimeoutDuration())
		}
		if m := s.Mode(); m != mcexec.ModeAuto && m != mcexec.ModeCRI && m != mcexec.ModeSocket {
			t.Fatalf("settings %+v: exec mode %q", s, m)
		}
		p, err := ParseAllowedServers(s.AllowedServers)
		if err != nil || !reflect.DeepEqual(s.ServerPolicy(), p) {
			t.Fatalf("settings %+v: allow-list %s, %v", s, p, err)
		}
		if env, err := ParseAllowedServers(strings.Split(strings.Join(s.AllowedServers, ","), ",")); err != nil || !reflect.DeepEqual(env, p) {
			t.Fatalf("settings %+v: the allow-list joined as the environment gives it parses to %s, %v", s, env, err)
		}
	})
}

// settingsKeys are the keys of the settings file.
var settingsKeys = func() []string {
	var keys []string
	st := reflect.TypeFor[Settings]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}()

// normalSettings is s with an empty allow-list as nil: the file leaves
// out an empty list.
func normalSettings(s Settings) Settings {
	if len(s.AllowedServers) == 0 {
		s.AllowedServers = nil
	}
	return s
}
