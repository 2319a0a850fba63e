package cephfs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
)

// What a CSI controller knows of CephFS: it provisions a volume as a
// subvolume of a file system (`ceph fs subvolume create`, its quota the
// capacity asked for) in a subvolume group, with the ceph tool of the
// mount pod, and mounts it on nodes by the path the subvolume has.

// KeySubvolumeGroup is a StorageClass parameter the controller alone
// reads: the subvolume group its volumes are made in (default
// [DefaultSubvolumeGroup]; made when missing). It is not a mount option,
// and a volume's context does not carry it.
const KeySubvolumeGroup = "subvolumeGroup"

// DefaultSubvolumeGroup is the subvolume group of a StorageClass that names
// none.
const DefaultSubvolumeGroup = "csi"

// Keys of the controller's secret (the StorageClass's
// csi.storage.k8s.io/provisioner-secret-*): the cephx key of the user the
// ceph tool runs as, and that user (default admin). The user needs the
// caps of `ceph fs subvolume` on the file system (mgr "allow rw", or
// profile-based caps that include it).
const (
	SecretKey  = "key"
	SecretUser = "user"
)

// Admin is a CephFS as the controller administers it: the checked
// monitors, the file system and subvolume group of its volumes, and the
// cephx user and key of the ceph tool.
type Admin struct {
	// Monitors are as the StorageClass names them, each trimmed, in order;
	// they are checked against the allowed servers again wherever a
	// volume's ID names them.
	Monitors []string
	// FS is the file system's name; Group the subvolume group.
	FS, Group string
	// User is the cephx user without "client."; Key its key (never in a
	// message or an argv).
	User string
	Key  []byte

	connect []string // "ADDRESS:PORT" of each monitor, allowed
}

// ParseAdmin checks a CephFS StorageClass's parameters for the controller
// (monitors, allowed as for a mount, and fs, which the subvolume commands
// need; subvolumeGroup) and the controller's secret. Errors are
// *[fs.OptionError] values naming the field, and never quote the key.
func ParseAdmin(ctx context.Context, params, secrets map[string]string, env fs.Env) (Admin, error) {
	mons, err := parseMonitors(ctx, params, env)
	if err != nil {
		return Admin{}, err
	}
	a := Admin{FS: params[KeyFS], Group: DefaultSubvolumeGroup, User: "admin", connect: mons}
	for _, m := range strings.Split(params[KeyMonitors], ",") {
		a.Monitors = append(a.Monitors, strings.TrimSpace(m))
	}
	if !cephNameRE().MatchString(a.FS) {
		return Admin{}, fs.BadOption(KeyFS, "%q: the name of the file system the volumes are subvolumes of (1 to 64 letters, digits, '.', '-' or '_')", a.FS)
	}
	if g, ok := params[KeySubvolumeGroup]; ok {
		if !cephNameRE().MatchString(g) {
			return Admin{}, fs.BadOption(KeySubvolumeGroup, "%q: a subvolume group has 1 to 64 letters, digits, '.', '-' or '_', a letter or digit first", g)
		}
		a.Group = g
	}
	if u, ok := secrets[SecretUser]; ok {
		if u = strings.TrimPrefix(u, "client."); !cephNameRE().MatchString(u) {
			return Admin{}, fs.BadOption("secret "+SecretUser, "a cephx user has 1 to 64 letters, digits, '.', '-' or '_'")
		}
		a.User = u
	}
	key := bytes.TrimSpace([]byte(secrets[SecretKey]))
	if !cephKeyRE().Match(key) {
		return Admin{}, fs.BadOption("secret "+SecretKey, "missing or not a cephx key (the base64 text `ceph auth get-key` prints): give the StorageClass a provisioner secret whose entry %q is the key of client.%s", SecretKey, a.User)
	}
	a.Key = key
	for k := range secrets {
		if k != SecretKey && k != SecretUser {
			return Admin{}, fs.BadOption("secret "+k, "unknown entry of the provisioner secret (known: %s, %s)", SecretKey, SecretUser)
		}
	}
	return a, nil
}

// SubvolumeNameOK says whether name can be a subvolume's name as the
// controller makes them: 1 to 64 letters, digits, '.', '-' or '_', a
// letter or digit first.
func SubvolumeNameOK(name string) bool {
	return cephNameRE().MatchString(name)
}

// Args are the ceph tool's arguments that run the command cmd (such as
// "fs", "subvolume", "ls", ...) against a's cluster as a's user, its key
// read from keyfile. Nothing but the arguments configures it (no
// ceph.conf, which a mount pod may carry for other clusters).
func (a Admin) Args(keyfile string, cmd ...string) []string {
	return append([]string{
		"--conf=/dev/null",
		"--id=" + a.User,
		"--mon_host=" + strings.Join(a.connect, ","),
		"--keyfile=" + keyfile,
		"--connect-timeout=" + strconv.Itoa(AdminConnectTimeout),
	}, cmd...)
}

// AdminConnectTimeout is how long, in seconds, the ceph tool tries to reach
// the monitors.
const AdminConnectTimeout = 20

// GroupCreate makes the subvolume group (a no-op when it exists).
func (a Admin) GroupCreate() []string {
	return []string{"fs", "subvolumegroup", "create", a.FS, a.Group}
}

// Create makes subvolume name with a quota of size bytes (none when 0),
// writable by every user as an emptyDir is (the driver changes no
// ownership: the pods that use it run as any user); it succeeds when the
// subvolume exists.
func (a Admin) Create(name string, size int64) []string {
	cmd := []string{"fs", "subvolume", "create", a.FS, name, "--group_name", a.Group, "--mode", "777"}
	if size > 0 {
		cmd = append(cmd, "--size", strconv.FormatInt(size, 10))
	}
	return cmd
}

// GetPath prints the path of subvolume name in the file system.
func (a Admin) GetPath(name string) []string {
	return []string{"fs", "subvolume", "getpath", a.FS, name, "--group_name", a.Group}
}

// Info prints subvolume name's attributes in JSON (fails with ENOENT when
// it, or its group, does not exist); see [ParseQuota].
func (a Admin) Info(name string) []string {
	return []string{"fs", "subvolume", "info", a.FS, name, "--group_name", a.Group}
}

// Remove removes subvolume name and its data (fails with ENOENT when it
// does not exist).
func (a Admin) Remove(name string) []string {
	return []string{"fs", "subvolume", "rm", a.FS, name, "--group_name", a.Group}
}

// ExitNotFound is the ceph tool's exit status when what a command names
// does not exist (ENOENT).
const ExitNotFound = 2

// ParsePath returns the path `ceph fs subvolume getpath` printed: the one
// line of its output, a clean absolute path below /volumes/ as a volume's
// path option takes it.
func ParsePath(out []byte) (string, error) {
	p := strings.TrimSpace(string(out))
	if !strings.HasPrefix(p, "/volumes/") || strings.ContainsAny(p, "\n\r") {
		return "", fmt.Errorf("ceph fs subvolume getpath printed %q, not a subvolume's path", truncate(p, 200))
	}
	if !pathOK(p) {
		return "", fmt.Errorf("ceph fs subvolume getpath printed %q, not a clean path of letters, digits, '.', '-', '_' and '/'", truncate(p, 200))
	}
	return p, nil
}

// ParseQuota returns the quota in bytes that `ceph fs subvolume info`
// printed (its bytes_quota: a number, or "infinite", which is 0).
func ParseQuota(out []byte) (int64, error) {
	var info struct {
		BytesQuota json.RawMessage `json:"bytes_quota"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.BytesQuota == nil {
		return 0, fmt.Errorf("ceph fs subvolume info printed no bytes_quota (%v): %q", err, truncate(string(out), 200))
	}
	if string(info.BytesQuota) == `"infinite"` {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(info.BytesQuota), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("ceph fs subvolume info printed bytes_quota %s, not a number of bytes", truncate(string(info.BytesQuota), 50))
	}
	return n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// VolumeID is a provisioned CephFS volume's ID: the monitors, the file
// system, the subvolume group and the subvolume, joined by "/" (none of
// them holds one), so that DeleteVolume needs nothing else.
func (a Admin) VolumeID(name string) string {
	return strings.Join([]string{strings.Join(a.Monitors, ","), a.FS, a.Group, name}, "/")
}

// ParseVolumeID returns the parameters (monitors, fs, subvolumeGroup) and
// the subvolume that a volume ID made by [Admin.VolumeID] names; ok is
// false for any other ID. The parameters are checked again by
// [ParseAdmin].
func ParseVolumeID(id string) (params map[string]string, name string, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || slices.Contains(parts, "") || strings.ContainsAny(id, " \t\n") || !SubvolumeNameOK(parts[3]) {
		return nil, "", false
	}
	return map[string]string{KeyMonitors: parts[0], KeyFS: parts[1], KeySubvolumeGroup: parts[2]}, parts[3], true
}
