package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/shared/atomicfile"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

const (
	// BinaryName is the shim's own name, in its install directory too.
	BinaryName = "kubelet-exec-shim"
	// MappingFile records, in the install directory, which plugin each
	// tool belongs to.
	MappingFile = BinaryName + ".json"
	// maxMappingSize bounds the mapping file a reader accepts.
	maxMappingSize = 1 << 20
)

// Mapping is the content of [MappingFile].
type Mapping struct {
	// Tools maps a tool name (a link in the directory) to its plugin.
	Tools map[string]string `json:"tools"`
	// RegistrationDir, RuntimeEndpoint, HostMode and HostRoot are the
	// settings a tool invocation uses unless its environment sets them.
	RegistrationDir string `json:"registrationDir,omitempty"`
	RuntimeEndpoint string `json:"runtimeEndpoint,omitempty"`
	HostMode        string `json:"hostMode,omitempty"`
	HostRoot        string `json:"hostRoot,omitempty"`
}

// InstallOptions says what [Install] places.
type InstallOptions struct {
	// Dir receives the shim, the links and the mapping.
	Dir string
	// Source is the shim binary to copy; default the running executable
	// (or, run as the helper, the shim next to it). Its helper
	// ([HelperName]) is copied from the same directory.
	Source string
	// Plugin the tools belong to.
	Plugin string
	// Tools are the names of the links, e.g. "mount.glusterfs".
	Tools []string
	// Settings recorded for tool invocations; see [Mapping].
	RegistrationDir, RuntimeEndpoint, HostMode, HostRoot string
}

// Install places the shim, its helper and a link named after each tool
// into opts.Dir and records the mapping. Every file is written as a dotfile and
// renamed into place, so a program that runs a tool concurrently sees the
// old file or the new one. A file at Dir/TOOL or Dir/kubelet-exec-shim that
// this package did not place is never overwritten: Install fails before
// changing anything.
func Install(opts InstallOptions) error {
	if opts.Dir == "" {
		return errors.New("install: no directory given")
	}
	if err := registration.ValidatePluginName(opts.Plugin); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if len(opts.Tools) == 0 {
		return errors.New("install: no tools given")
	}
	for _, t := range opts.Tools {
		if err := validateTool(t); err != nil {
			return fmt.Errorf("install: %w", err)
		}
	}
	src := opts.Source
	if src == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("install: find the running shim: %w", err)
		}
		src = exe
		if filepath.Base(exe) == HelperName { // the helper installs the shim next to it
			src = filepath.Join(filepath.Dir(exe), BinaryName)
		}
	}
	helperSrc := filepath.Join(filepath.Dir(src), HelperName)
	for _, p := range []string{src, helperSrc} {
		if fi, err := os.Stat(p); err != nil {
			return fmt.Errorf("install: %w (the shim and %s are installed together)", err, HelperName)
		} else if !fi.Mode().IsRegular() {
			return fmt.Errorf("install: %s is not a regular file", p)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	m, managed, err := readMapping(opts.Dir)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	bin, helper := filepath.Join(opts.Dir, BinaryName), filepath.Join(opts.Dir, HelperName)
	for _, p := range []string{bin, helper} {
		if _, err := os.Lstat(p); err == nil && !managed {
			return fmt.Errorf("install: %s exists and was not installed by %s (no %s next to it); remove it first", p, BinaryName, MappingFile)
		}
	}
	for _, t := range opts.Tools {
		if err := checkOurs(opts.Dir, t); err != nil {
			return fmt.Errorf("install: %w", err)
		}
	}

	// The helper first: a new shim may rely on it.
	for _, c := range []struct{ from, to string }{{helperSrc, helper}, {src, bin}} {
		if sameFile(c.from, c.to) {
			continue
		}
		if err := atomicfile.Copy(c.from, c.to, 0o755); err != nil {
			return fmt.Errorf("install: copy %s to %s: %w", c.from, c.to, err)
		}
	}
	for _, t := range opts.Tools {
		if err := atomicfile.Symlink(BinaryName, filepath.Join(opts.Dir, t)); err != nil {
			return fmt.Errorf("install: link %s: %w", t, err)
		}
		m.Tools[t] = opts.Plugin
	}
	m.RegistrationDir, m.RuntimeEndpoint = opts.RegistrationDir, opts.RuntimeEndpoint
	m.HostMode, m.HostRoot = opts.HostMode, opts.HostRoot
	return writeMapping(opts.Dir, m)
}

// Uninstall removes the given tools' links from dir (all of them when tools
// is empty), and the shim, its helper and the mapping once no tool is left. Links that
// are not the shim's are left alone and reported.
func Uninstall(dir string, tools []string) error {
	m, managed, err := readMapping(dir)
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	if !managed {
		return fmt.Errorf("uninstall: %s has no %s: nothing of %s is installed there", dir, MappingFile, BinaryName)
	}
	if len(tools) == 0 {
		for t := range m.Tools {
			tools = append(tools, t)
		}
		sort.Strings(tools)
	}
	var errs []error
	for _, t := range tools {
		if err := validateTool(t); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := checkOurs(dir, t); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(filepath.Join(dir, t)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		delete(m.Tools, t)
	}
	if len(m.Tools) > 0 {
		errs = append(errs, writeMapping(dir, m))
		return errors.Join(errs...)
	}
	for _, name := range []string{BinaryName, HelperName, MappingFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, atomicfile.SyncDir(dir))
	return errors.Join(errs...)
}

func validateTool(t string) error {
	switch {
	case t == "" || t == "." || t == "..":
		return fmt.Errorf("invalid tool name %q", t)
	case strings.ContainsAny(t, "/\x00"):
		return fmt.Errorf("invalid tool name %q: must not contain '/' or NUL", t)
	case strings.HasPrefix(t, "."):
		return fmt.Errorf("invalid tool name %q: must not start with '.'", t)
	case strings.HasPrefix(t, BinaryName):
		// The shim and its helper; invoked under such a name the shim
		// runs as itself, not as the tool.
		return fmt.Errorf("invalid tool name %q: names starting with %s are reserved", t, BinaryName)
	}
	return nil
}

// checkOurs fails when dir/tool exists and is not a link to the shim.
func checkOurs(dir, tool string) error {
	p := filepath.Join(dir, tool)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := os.Readlink(p); err == nil && target == BinaryName {
			return nil
		}
	}
	return fmt.Errorf("%s exists and is not a link to %s: refusing to replace it", p, BinaryName)
}

// readMapping returns the directory's mapping and whether it has one. The
// mapping decides which binary root runs (host mode, host root, runtime
// endpoint, registration directory), so it is trusted only as a
// registration is: see [registration.ReadTrusted].
func readMapping(dir string) (Mapping, bool, error) {
	m := Mapping{Tools: map[string]string{}}
	p := filepath.Join(dir, MappingFile)
	data, ok, err := registration.ReadTrusted(p, maxMappingSize)
	if err != nil || !ok {
		return m, false, err
	}
	if m, err = decodeMapping(data); err != nil {
		return m, false, fmt.Errorf("decode %s: %w", p, err)
	}
	return m, true, nil
}

// decodeMapping decodes the content of [MappingFile]; Tools is never nil.
func decodeMapping(data []byte) (Mapping, error) {
	m := Mapping{Tools: map[string]string{}}
	if err := json.Unmarshal(data, &m); err != nil {
		return Mapping{Tools: map[string]string{}}, err
	}
	if m.Tools == nil {
		m.Tools = map[string]string{}
	}
	// Only what Install writes: a tool name that is not a link it would
	// place, or a plugin it would refuse, is an error, not a lookup that
	// happens to miss.
	var errs []error
	for _, t := range sortedKeys(m.Tools) {
		if err := validateTool(t); err != nil {
			errs = append(errs, err)
		} else if err := registration.ValidatePluginName(m.Tools[t]); err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", t, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Mapping{Tools: map[string]string{}}, err
	}
	return m, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func writeMapping(dir string, m Mapping) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, MappingFile), append(data, '\n'), 0o644)
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
