package flexvolume

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/node/volume"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/cephfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/glusterfs"
	"github.com/mountcontainers/mountcontainers/internal/shared/fs/known"
	"github.com/mountcontainers/mountcontainers/internal/shared/oldnames"
	"github.com/mountcontainers/mountcontainers/pkg/cri"
	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// DefaultPlugin is the volume plugin whose mount pod the driver uses unless
// its settings name another (or a file system other than GlusterFS: see
// [PluginOf]).
const DefaultPlugin = "kubernetes.io/glusterfs"

// DefaultFilesystem is the file system the driver mounts unless its
// settings name another.
const DefaultFilesystem = glusterfs.FSType

// PluginOf returns the volume plugin whose mount pod carries the client of
// file system fsName by default: kubernetes.io/<fs> (kubernetes.io/glusterfs,
// kubernetes.io/cephfs).
func PluginOf(fsName string) string { return "kubernetes.io/" + fsName }

// FilesystemOf returns the file system a driver following plugin mounts by
// default: cephfs for kubernetes.io/cephfs, else glusterfs.
func FilesystemOf(plugin string) string {
	if plugin == PluginOf(cephfs.FSType) {
		return cephfs.FSType
	}
	return DefaultFilesystem
}

// SettingsSuffix is appended to the driver's executable path to name its
// settings file: <plugin dir>/<vendor>~<driver>/<driver>.json.
const SettingsSuffix = ".json"

// Environment variables that override the settings file.
const (
	EnvPlugin          = "MOUNTCONTAINERS_FLEXVOLUME_PLUGIN"
	EnvRegistrationDir = "MOUNTCONTAINERS_FLEXVOLUME_REGISTRATION_DIR"
	EnvTimeout         = "MOUNTCONTAINERS_FLEXVOLUME_TIMEOUT"
	EnvExecMode        = "MOUNTCONTAINERS_FLEXVOLUME_EXEC_MODE"
	EnvLogFile         = "MOUNTCONTAINERS_FLEXVOLUME_LOG_FILE"
	EnvFilesystem      = "MOUNTCONTAINERS_FLEXVOLUME_FILESYSTEM"
	EnvSecretsDir      = "MOUNTCONTAINERS_FLEXVOLUME_SECRETS_DIR"
	// EnvSharedMounts replaces SharedMounts: true or false.
	EnvSharedMounts = "MOUNTCONTAINERS_FLEXVOLUME_SHARED_MOUNTS"
	// EnvAllowedServers replaces AllowedServers: entries separated by
	// commas.
	EnvAllowedServers = "MOUNTCONTAINERS_FLEXVOLUME_ALLOWED_SERVERS"
	// The runtime endpoint is overridden by cri.EnvEndpoint
	// (CONTAINER_RUNTIME_ENDPOINT, crictl's).
)

// envRenames are the variables renamed to the driver's prefix, still read
// after the new names.
var envRenames = []oldnames.Rename{{Old: "PLUGIN_CONTAINERS_DIR", New: EnvRegistrationDir}}

const maxSettingsSize = 64 << 10

// Settings are what the driver needs to know that the kubelet does not
// pass. The mount pod writes them next to the driver when it installs it.
type Settings struct {
	// Filesystem is the file system the driver mounts ([known.Filesystems]:
	// "glusterfs" or "cephfs"); default [FilesystemOf] the plugin, or
	// glusterfs.
	Filesystem string `json:"filesystem,omitempty"`
	// Plugin is the volume plugin whose registration the driver follows;
	// default [PluginOf] the file system (kubernetes.io/glusterfs).
	Plugin string `json:"plugin,omitempty"`
	// RegistrationDir is the registration directory; default
	// registration.DefaultDir.
	RegistrationDir string `json:"registrationDir,omitempty"`
	// RuntimeEndpoint is the CRI endpoint as the node sees it; empty probes
	// the usual sockets (see cri.ResolveEndpoint).
	RuntimeEndpoint string `json:"runtimeEndpoint,omitempty"`
	// Timeout bounds each mount or umount, as a Go duration ("1m");
	// default [DefaultTimeout].
	Timeout string `json:"timeout,omitempty"`
	// ExecMode is how mount and umount reach a live mount pod: "auto" (the
	// exec socket when it answers for the registered pod, else CRI
	// ExecSync), "cri" or "socket"; empty means auto. See package exec.
	ExecMode string `json:"execMode,omitempty"`
	// LogFile, when set, is an absolute path the driver appends one JSON
	// record to per call and per placement decision (where each mount or
	// umount ran, and through which path). The kubelet reads the driver's
	// standard output and error as its reply, so this is the only place a
	// driver can say more.
	LogFile string `json:"logFile,omitempty"`
	// AllowedServers is the administrator's allow-list of the GlusterFS
	// servers volumes may name: host names, addresses and CIDRs. Empty
	// allows every server whose addresses are not loopback, unspecified,
	// link-local, multicast or broadcast; those are allowed only when
	// listed explicitly. See [fs.ServerPolicy] for the whole rule. When the
	// driver has no settings file no administrator chose, and an empty
	// list refuses every server (see [Settings.ServerPolicy]).
	AllowedServers []string `json:"allowedServers,omitempty"`
	// SecretsDir is where the driver writes the secrets of mounts that
	// need one (a CephFS user's key), one file per mount, readable by root
	// only, removed at unmount; it must be on a tmpfs, and the mount pod
	// must see it at the same path. Default [volume.DefaultSecretsDir].
	SecretsDir string `json:"secretsDir,omitempty"`
	// SharedMounts makes one mount of each volume per namespace and node,
	// bound at the directory of every pod of the namespace on the node
	// that mounts the same volume with the same options ([volume.Shared]):
	// one FUSE daemon and one mount(8) through the mount pod per volume,
	// instead of per pod. A volume that needs a secret (a CephFS user's
	// key), or whose pod the kubelet does not name, is still mounted per
	// pod. With it, the pods of a volume in a namespace on a node share
	// its daemon, and so its failures and its load. The mount pod
	// records true unless told otherwise (MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS);
	// a driver with no settings file mounts per pod.
	SharedMounts bool `json:"sharedMounts,omitempty"`
	// ExecBatchDir is where the driver's calls meet to send the commands
	// that wait for the mount container at once in one CRI ExecSync
	// (mcexec.Options.BatchDir); "none" sends each in an exec of its own.
	// Default [mcexec.DefaultBatchDir].
	ExecBatchDir string `json:"execBatchDir,omitempty"`

	// missing is the settings file [LoadSettings] did not find, if so.
	missing string
	// oldNames are the deprecated variables [LoadSettings] read.
	oldNames []oldnames.Rename
}

// OldNames returns the deprecated variables that gave a setting, each with
// the name to use instead. The driver cannot warn on its standard streams
// (the kubelet reads them as its reply): it logs them to its log file.
func (s Settings) OldNames() []oldnames.Rename { return s.oldNames }

// Validate checks the settings.
func (s Settings) Validate() error {
	var errs []error
	if s.Filesystem != "" {
		if _, err := known.Named(s.Filesystem); err != nil {
			errs = append(errs, err)
		}
	}
	if s.ExecBatchDir != "" && s.ExecBatchDir != "none" && (!filepath.IsAbs(s.ExecBatchDir) || filepath.Clean(s.ExecBatchDir) != s.ExecBatchDir) {
		errs = append(errs, fmt.Errorf("exec batch directory %q is not a clean absolute path (or none)", s.ExecBatchDir))
	}
	if s.SecretsDir != "" && (!filepath.IsAbs(s.SecretsDir) || filepath.Clean(s.SecretsDir) != s.SecretsDir) {
		errs = append(errs, fmt.Errorf("secrets directory %q is not a clean absolute path", s.SecretsDir))
	}
	if s.Plugin != "" {
		if err := registration.ValidatePluginName(s.Plugin); err != nil {
			errs = append(errs, err)
		}
	}
	if s.RegistrationDir != "" && !filepath.IsAbs(s.RegistrationDir) {
		errs = append(errs, fmt.Errorf("registration directory %q is not absolute", s.RegistrationDir))
	}
	if s.RuntimeEndpoint != "" {
		if _, err := cri.SocketPath(s.RuntimeEndpoint); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := s.timeout(); err != nil {
		errs = append(errs, err)
	}
	if _, err := mcexec.ParseExecMode(s.ExecMode); err != nil {
		errs = append(errs, err)
	}
	if s.LogFile != "" && !filepath.IsAbs(s.LogFile) {
		errs = append(errs, fmt.Errorf("log file %q is not absolute", s.LogFile))
	}
	if _, err := ParseAllowedServers(s.AllowedServers); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s Settings) timeout() (time.Duration, error) {
	if s.Timeout == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("timeout %q: want a positive duration such as 1m", s.Timeout)
	}
	return d, nil
}

// BatchDir returns the exec batch directory for mcexec.Options.BatchDir:
// empty for "none".
func (s Settings) BatchDir() string {
	switch s.ExecBatchDir {
	case "none":
		return ""
	case "":
		return mcexec.DefaultBatchDir
	}
	return s.ExecBatchDir
}

// WithDefaults fills in the defaults.
func (s Settings) WithDefaults() Settings {
	if s.Filesystem == "" {
		s.Filesystem = FilesystemOf(s.Plugin)
	}
	if s.Plugin == "" {
		s.Plugin = PluginOf(s.Filesystem)
	}
	if s.SecretsDir == "" {
		s.SecretsDir = volume.DefaultSecretsDir
	}
	if s.RegistrationDir == "" {
		s.RegistrationDir = registration.DefaultDir
	}
	if s.Timeout == "" {
		s.Timeout = DefaultTimeout.String()
	}
	return s
}

// Mode is the parsed ExecMode ([mcexec.ModeAuto] when empty or bad).
func (s Settings) Mode() mcexec.ExecMode {
	m, err := mcexec.ParseExecMode(s.ExecMode)
	if err != nil {
		return mcexec.ModeAuto
	}
	return m
}

// ParseAllowedServers parses the entries of AllowedServers (or of
// [EnvAllowedServers], split at commas) into the policy they make: see
// [fs.ParseAllowedServers].
func ParseAllowedServers(entries []string) (fs.ServerPolicy, error) {
	return fs.ParseAllowedServers(entries)
}

// ServerPolicy is the parsed AllowedServers. It refuses every server
// when the list is bad ([Settings.Validate] reports that), and when it is
// empty for want of a settings file: an empty list allows every server
// that is not special only when an administrator wrote it.
func (s Settings) ServerPolicy() fs.ServerPolicy {
	p, err := ParseAllowedServers(s.AllowedServers)
	switch {
	case err != nil:
		return fs.RefuseAllServers(fmt.Sprintf("the driver's allowed servers are invalid (%v)", err))
	case p.Empty() && s.missing != "":
		return fs.RefuseAllServers(fmt.Sprintf("the driver has no settings file %s, so no administrator chose the servers volumes may name; "+
			"install the driver with its settings (the mount pod does) or set %s in the driver's environment", s.missing, EnvAllowedServers))
	}
	return p
}

// FS is the file system of Filesystem ([glusterfs.FS] when empty or bad:
// [Settings.Validate] reports that).
func (s Settings) FS() fs.Filesystem {
	f, err := known.Named(cmp.Or(s.Filesystem, DefaultFilesystem))
	if err != nil {
		return glusterfs.FS{}
	}
	return f
}

// TimeoutDuration is the parsed Timeout (DefaultTimeout when empty or bad).
func (s Settings) TimeoutDuration() time.Duration {
	d, err := s.timeout()
	if err != nil {
		return DefaultTimeout
	}
	return d
}

// LoadSettings reads the settings file next to the driver executable exe
// (exe + [SettingsSuffix]; a missing file means the defaults, except that
// the allow-list of servers, unless the environment gives one, then
// refuses every server: see [Settings.ServerPolicy]), applies the
// environment overrides ([EnvFilesystem], [EnvPlugin], [EnvRegistrationDir],
// [EnvTimeout], [EnvExecMode], [EnvLogFile], [EnvAllowedServers],
// [EnvSecretsDir], [EnvSharedMounts], cri.EnvEndpoint;
// getenv is os.Getenv when nil), validates the result and
// fills in the defaults. The file is trusted only when it is a regular file
// (not a symbolic link) owned by root or by the driver's own user and not
// writable by group or others: it decides where the driver's commands run.
func LoadSettings(exe string, getenv func(string) string) (Settings, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var s Settings
	path := exe + SettingsSuffix
	data, err := readTrusted(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.missing = path
	case err != nil:
		return s, err
	default:
		if s, err = decodeSettings(data); err != nil {
			return s, fmt.Errorf("decode %s: %w", path, err)
		}
	}
	for env, field := range map[string]*string{
		EnvPlugin: &s.Plugin, EnvRegistrationDir: &s.RegistrationDir,
		EnvTimeout: &s.Timeout, cri.EnvEndpoint: &s.RuntimeEndpoint,
		EnvExecMode: &s.ExecMode, EnvLogFile: &s.LogFile,
		EnvFilesystem: &s.Filesystem, EnvSecretsDir: &s.SecretsDir,
	} {
		for _, name := range oldnames.Vars(env, envRenames) {
			if v := getenv(name); v != "" {
				*field = v
				if name != env {
					s.oldNames = append(s.oldNames, oldnames.Rename{Old: name, New: env})
				}
				break
			}
		}
	}
	if v := getenv(EnvAllowedServers); v != "" {
		s.AllowedServers = strings.Split(v, ",")
	}
	if v := getenv(EnvSharedMounts); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want true or false", EnvSharedMounts, v)
		}
		s.SharedMounts = b
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("settings %s: %w", path, err)
	}
	return s.WithDefaults(), nil
}

// decodeSettings decodes the content of a settings file; the caller
// validates the settings once the environment has had its say. An unknown
// key is an error, as in the volume's options: a misspelt allowedServers
// would otherwise allow every server.
func decodeSettings(data []byte) (Settings, error) {
	var s Settings
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Settings{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Settings{}, errors.New("trailing data after the JSON object")
	}
	return s, nil
}

func readTrusted(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("settings %s is a symbolic link: not trusted", path)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("settings %s is not a regular file: not trusted", path)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("settings %s is writable by group or others (%v): not trusted", path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("settings %s is owned by uid %d, not root: not trusted", path, st.Uid)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSettingsSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxSettingsSize {
		return nil, fmt.Errorf("settings %s is larger than %d bytes", path, maxSettingsSize)
	}
	return data, nil
}
