package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// recordingBackend records the one call the shim makes of it.
type recordingBackend struct {
	calls []string // "run PLUGIN ARGV..." or "status PLUGIN OUTPUT"
	cfg   Config
	argv  []string
}

var _ Backend = (*recordingBackend)(nil)

// backendCode is what the recording backend's Run returns: not a code the
// shim uses for itself.
const backendCode = 42

func (b *recordingBackend) Run(_ context.Context, cfg *Config, plugin string, argv []string, _ IO) int {
	b.calls = append(b.calls, "run "+plugin+" "+strings.Join(argv, "\x00"))
	b.cfg, b.argv = *cfg, slices.Clone(argv)
	return backendCode
}

func (b *recordingBackend) Status(_ context.Context, _ *Config, plugin, output string, _ IO) error {
	b.calls = append(b.calls, "status "+plugin+" "+output)
	return nil
}

// splitArgv splits a NUL-separated argument vector, as execve(2) passes
// it: no argument can hold a NUL.
func splitArgv(data string) []string {
	if data == "" {
		return nil
	}
	return strings.Split(data, "\x00")
}

// sideEffectCommands are left out of the fuzzing of argv: they write files
// or watch a directory until interrupted.
var sideEffectCommands = []string{"install", "uninstall", "watch"}

// FuzzArgv: the shim's decision on its argv (multi-call or its own
// commands) is deterministic; a multi-call name is the base name of
// argv[0], never has a '/' and never starts with the shim's name, every
// tool name install accepts is dispatched as itself, and with no mapping
// next to the binary nothing runs (125). Run as itself, the backend runs
// only a non-empty argv that is the tail of the shim's own, under checked
// settings, and the shim's exit code is the backend's.
func FuzzArgv(f *testing.F) {
	for _, argv := range [][]string{
		{"kubelet-exec-shim", "run", "--plugin", "kubernetes.io/glusterfs", "--", "mount", "-t", "glusterfs", "a:/v", "/m"},
		{"/usr/local/bin/kubelet-exec-shim", "--timeout", "5s", "run", "--plugin", "kubernetes.io/rbd", "rbd", "map", "x"},
		{"kubelet-exec-shim", "run", "--plugin", "p"},
		{"kubelet-exec-shim", "run", "--plugin", "p", "--"},
		{"kubelet-exec-shim", "run", "--", "--plugin", "p"},
		{"kubelet-exec-shim", "--host-mode", "nsenter", "--host-root", "", "run", "--plugin", "p", "--", "x"},
		{"kubelet-exec-shim", "--exec-mode", "fast", "run", "--plugin", "p", "--", "x"},
		{"kubelet-exec-shim", "--timeout", "-1s", "run", "--plugin", "p", "--", "x"},
		{"kubelet-exec-shim", "status", "--output", "json"},
		{"kubelet-exec-shim", "--help"},
		{"kubelet-exec-shim", "--version"},
		{"kubelet-exec-shim", "bogus"},
		{"kubelet-exec-shim-cri", "run", "--plugin", "p", "--", "x"},
		{"kubelet-exec-shimx", "run", "--plugin", "p", "--", "x"},
		{"/host/usr/sbin/mount.glusterfs", "a:/v", "/m"},
		{"mount.glusterfs"},
		{"../../../sbin/mount.glusterfs", "-o", "ro"},
		{"/d/mount.glusterfs/"},
		{"rbd", "map", "x"},
		{"."}, {".."}, {"/"}, {""}, {"", ""},
		{"a\xffb"},
		{"kubelet-exec-shim.json"},
	} {
		f.Add(strings.Join(argv, "\x00"), "mount.glusterfs")
	}
	f.Add("", "")
	f.Add("kubelet-exec-shim", "kubelet-exec-shim-mine")
	f.Add("x", "..")
	f.Fuzz(func(t *testing.T, data, tool string) {
		args := splitArgv(data)
		name, multi := multiCallTool(args)
		if n2, m2 := multiCallTool(slices.Clone(args)); n2 != name || m2 != multi {
			t.Fatalf("multiCallTool(%q) = %q, %v, then %q, %v", args, name, multi, n2, m2)
		}
		if multi && (name != filepath.Base(args[0]) || strings.Contains(name, "/") && name != "/" || strings.HasPrefix(name, BinaryName)) {
			t.Fatalf("multiCallTool(%q) = %q", args, name)
		}
		if validateTool(tool) == nil {
			if got, ok := multiCallTool([]string{filepath.Join("/opt/bin", tool), "x"}); !ok || got != tool {
				t.Fatalf("install accepts tool %q, but the shim invoked as it runs as %q, multi-call %v", tool, got, ok)
			}
		}
		for _, c := range sideEffectCommands {
			if slices.Contains(args, c) {
				return
			}
		}
		code, b, out := mainOnce(args)
		code2, b2, out2 := mainOnce(args)
		if code != code2 || !slices.Equal(b.calls, b2.calls) || out != out2 {
			t.Fatalf("argv %q: code %d, calls %q, then code %d, calls %q", args, code, b.calls, code2, b2.calls)
		}
		if multi {
			// The test binary's directory has no mapping: a tool name
			// never reaches the backend.
			if code != ExitShimFailed || len(b.calls) != 0 {
				t.Fatalf("invoked as %q with no mapping: code %d, calls %q", name, code, b.calls)
			}
			return
		}
		switch {
		case len(b.calls) > 1:
			t.Fatalf("argv %q: calls %q", args, b.calls)
		case len(b.calls) == 1 && strings.HasPrefix(b.calls[0], "run "):
			if code != backendCode {
				t.Fatalf("argv %q: code %d, want the backend's %d", args, code, backendCode)
			}
			if len(b.argv) == 0 || len(b.argv) >= len(args) || !slices.Equal(args[len(args)-len(b.argv):], b.argv) {
				t.Fatalf("argv %q ran %q: not a non-empty tail of the shim's argv", args, b.argv)
			}
			if err := b.cfg.check(); err != nil || b.cfg.Timeout <= 0 {
				t.Fatalf("argv %q ran under unchecked settings %+v: %v", args, b.cfg, err)
			}
		case len(b.calls) == 1:
			if code != 0 {
				t.Fatalf("argv %q: status, code %d", args, code)
			}
		default:
			if code != 0 && code != ExitShimFailed {
				t.Fatalf("argv %q ran nothing and exited %d; want 0 or %d", args, code, ExitShimFailed)
			}
		}
	})
}

// mainOnce runs MainWith on args with a recording backend and returns the
// code, the backend and what the shim wrote.
func mainOnce(args []string) (int, *recordingBackend, string) {
	b := &recordingBackend{}
	var out bytes.Buffer
	code := MainWith(context.Background(), slices.Clone(args), IO{Stdout: &out, Stderr: &out}, b)
	return code, b, out.String()
}

// FuzzDecodeMapping: the tool mapping decoder accepts only what Install
// writes (tool names Install accepts, valid plugin names), and what it
// accepts is written back (as Install writes it) to the same mapping.
func FuzzDecodeMapping(f *testing.F) {
	f.Add([]byte(`{"tools":{"mount.glusterfs":"kubernetes.io/glusterfs","rbd":"kubernetes.io/rbd"},"registrationDir":"/var/lib/kubelet/plugin-containers"}`))
	f.Add([]byte(`{"tools":{"rbd":"kubernetes.io/rbd"},"hostMode":"nsenter","hostRoot":"/host","runtimeEndpoint":"unix:///run/containerd/containerd.sock"}`))
	f.Add([]byte(`{"tools":null}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"tools":{"../x":"kubernetes.io/rbd"}}`))
	f.Add([]byte(`{"tools":{"a/b":"p"}}`))
	f.Add([]byte(`{"tools":{"":"p"}}`))
	f.Add([]byte(`{"tools":{".":"p",".hidden":"p"}}`))
	f.Add([]byte(`{"tools":{"kubelet-exec-shim":"p"}}`))
	f.Add([]byte(`{"tools":{"kubelet-exec-shim-cri":"p"}}`))
	f.Add([]byte(`{"tools":{"kubelet-exec-shimmer":"p"}}`))
	f.Add([]byte(`{"tools":{"rbd":"not a plugin"}}`))
	f.Add([]byte(`{"tools":{"rbd":""}}`))
	f.Add([]byte(`{"tools":{"a\u0000b":"p"}}`))
	f.Add([]byte("{\"tools\":{\"\xff\":\"p\"}}"))
	f.Add([]byte(`{"tools":{"rbd":"p"}} trailing`))
	f.Add([]byte(`{"tools":{"rbd":"p","rbd":"q"}}`))
	f.Add([]byte(`{"tools":["rbd"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMapping(data)
		if m.Tools == nil {
			t.Fatalf("decodeMapping(%q): nil Tools", data)
		}
		if err != nil {
			return
		}
		for tool, plugin := range m.Tools {
			if err := validateTool(tool); err != nil {
				t.Fatalf("decodeMapping(%q) accepted a tool install refuses: %v", data, err)
			}
			if err := registration.ValidatePluginName(plugin); err != nil {
				t.Fatalf("decodeMapping(%q) accepted a plugin install refuses: %v", data, err)
			}
			if got, ok := multiCallTool([]string{"/opt/bin/" + tool}); !ok || got != tool {
				t.Fatalf("mapped tool %q is not dispatched as itself: %q, %v", tool, got, ok)
			}
		}
		enc, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeMapping(enc)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", m, m2, err)
		}
	})
}

// TestUnknownCommandIsAUsageError: urfave/cli's own exit code for an
// unknown command is 3, which a caller would read as the utility's; the
// shim's usage errors are 125. Found by FuzzArgv.
func TestUnknownCommandIsAUsageError(t *testing.T) {
	for _, args := range [][]string{
		{BinaryName, "bogus"},
		{BinaryName, "help", "bogus"},
		{BinaryName, "--timeout", "5s", "mount.glusterfs", "a:/v", "/m"},
	} {
		code, b, out := mainOnce(args)
		if code != ExitShimFailed || len(b.calls) != 0 || !strings.Contains(out, "unknown command") {
			t.Errorf("%q: code %d, calls %q, output %q; want %d and an unknown command", args, code, b.calls, out, ExitShimFailed)
		}
	}
	for _, args := range [][]string{{BinaryName}, {BinaryName, "help"}, {BinaryName, "help", "run"}, {BinaryName, "--help"}} {
		if code, _, out := mainOnce(args); code != 0 || out == "" {
			t.Errorf("%q: code %d, output %q; want help and 0", args, code, out)
		}
	}
}

// TestToolNamesOfTheShimAreReserved: a link named like the shim
// (kubelet-exec-shim...) would run the shim as itself, not the tool, so
// install refuses it and a mapping holding it is refused. Found by
// FuzzArgv and FuzzDecodeMapping.
func TestToolNamesOfTheShimAreReserved(t *testing.T) {
	for _, tool := range []string{BinaryName, HelperName, MappingFile, BinaryName + "-mine", BinaryName + "x"} {
		if err := validateTool(tool); err == nil {
			t.Errorf("validateTool(%q) accepted it", tool)
		}
		if _, err := decodeMapping([]byte(`{"tools":{"` + tool + `":"kubernetes.io/rbd"}}`)); err == nil || !strings.Contains(err.Error(), tool) {
			t.Errorf("a mapping of %q: %v; want an error naming it", tool, err)
		}
	}
	if err := Install(InstallOptions{Dir: t.TempDir(), Plugin: "kubernetes.io/rbd", Tools: []string{"rbd", BinaryName + "-mine"}}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("Install of a tool named like the shim: %v", err)
	}
}

// TestDecodeMappingRefusesWhatInstallRefuses: the mapping file names only
// links install places and plugins it accepts. Found by FuzzDecodeMapping.
func TestDecodeMappingRefusesWhatInstallRefuses(t *testing.T) {
	for _, data := range []string{
		`{"tools":{"../x":"kubernetes.io/rbd"}}`, `{"tools":{"":"kubernetes.io/rbd"}}`, `{"tools":{".":"kubernetes.io/rbd"}}`,
		`{"tools":{".rbd":"kubernetes.io/rbd"}}`, `{"tools":{"a\u0000b":"kubernetes.io/rbd"}}`,
		`{"tools":{"rbd":"not a plugin"}}`, `{"tools":{"rbd":""}}`,
	} {
		m, err := decodeMapping([]byte(data))
		if err == nil || len(m.Tools) != 0 {
			t.Errorf("decodeMapping(%s) = %+v, %v; want an error", data, m, err)
		}
	}
	m, err := decodeMapping([]byte(`{"tools":{"rbd":"kubernetes.io/rbd","mount.glusterfs":"kubernetes.io/glusterfs"},"hostMode":"nsenter"}`))
	if err != nil || m.Tools["rbd"] != "kubernetes.io/rbd" || m.HostMode != HostModeNsenter {
		t.Fatalf("a good mapping: %+v, %v", m, err)
	}
}
