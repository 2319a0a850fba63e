package flexvolume

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// A Filesystem is what a driver built on this package knows of the file
// system it mounts: which options a volume may give, and the mount(8) call
// they make. Everything else is the [Driver]'s and shared by every file
// system: the call convention and replies, the checks of the target
// directory, the bounds, where mount(8) runs, the check that the node sees
// the mount, the mount record, the secret file and the unmount.
type Filesystem interface {
	// Name is the file system as kubernetes.io/fsType and the driver's
	// settings name it ("glusterfs", "cephfs").
	Name() string
	// Mount checks a volume's options (its flexVolume.options plus the
	// kubelet's kubernetes.io/* keys) and returns the mount they ask for.
	// Every server the options name is checked with env.Servers. Errors
	// are *[OptionError] values naming the field, and never quote a
	// secret.
	Mount(ctx context.Context, vals map[string]string, env Env) (Mount, error)
}

// Env is what a [Filesystem] checks a volume's options against.
type Env struct {
	// Servers decides which servers (GlusterFS servers, Ceph monitors) a
	// volume may name.
	Servers ServerPolicy
	// Resolver looks up server names on the node; nil means
	// net.DefaultResolver.
	Resolver Resolver
}

// Mount is one mount(8) call, as a [Filesystem] makes it from a volume's
// options.
type Mount struct {
	// FSType, Source and Options are mount(8)'s -t, source and -o (one
	// option per element). They are recorded, so they never hold a secret.
	FSType  string
	Source  string
	Options []string
	// What names the volume in messages, such as "server:/volume";
	// default Source.
	What string
	// Pod is the pod the kubelet mounts the volume for; nil when unknown.
	Pod *mountrecord.Pod
	// Secret, when set, is handed to the client through a file that only
	// root can read, on a file system in memory ([Driver].SecretsDir): the
	// driver writes it before mount(8) runs, adds the option
	// Secret.Option=<path of the file> and removes the file when the
	// volume is unmounted or the mount fails. The secret never appears in
	// an argv, an environment, a record or on a disk.
	Secret *Secret
}

// Secret is a credential a mount needs.
type Secret struct {
	// Option is the mount option that names the file holding Data, such
	// as "ceph.keyfile".
	Option string
	// Data is the file's content.
	Data []byte
}

// Args are the arguments of mount(8) that make m at dir.
func (m Mount) Args(dir string) []string {
	args := []string{"-t", m.FSType}
	if len(m.Options) > 0 {
		args = append(args, "-o", strings.Join(m.Options, ","))
	}
	return append(args, m.Source, dir)
}

func (m Mount) describe() string {
	if m.What != "" {
		return m.What
	}
	return m.Source
}

// withSecretFile returns m with the option naming its secret's file.
func (m Mount) withSecretFile(path string) Mount {
	m.Options = append(slices.Clone(m.Options), m.Secret.Option+"="+path)
	return m
}

// Filesystems are the file systems drivers of this package mount, by
// name.
var Filesystems = map[string]Filesystem{
	GlusterFS{}.Name(): GlusterFS{},
	CephFS{}.Name():    CephFS{},
}

// FilesystemNamed returns the file system called name.
func FilesystemNamed(name string) (Filesystem, error) {
	fs, ok := Filesystems[name]
	if !ok {
		return nil, fmt.Errorf("unknown file system %q (known: %s)", name, strings.Join(sortedKeys(Filesystems), ", "))
	}
	return fs, nil
}

// checkCommonKeys checks the keys every file system shares: the kubelet's
// kubernetes.io/fsType (empty or fsName) and kubernetes.io/readwrite; it
// reports whether key is one of them or another kubelet key, which the
// caller then skips, and whether the kubelet asks for a read-only mount.
func checkCommonKeys(fsName, key, value string, readOnly *bool) (handled bool, err error) {
	switch {
	case key == KeyFSType:
		if value != "" && value != fsName {
			return true, badOption(key, "%q: this driver mounts only %s", value, fsName)
		}
		return true, nil
	case key == KeyReadWrite:
		switch value {
		case "ro":
			*readOnly = true
		case "rw", "":
		default:
			return true, badOption(key, "%q: want ro or rw", value)
		}
		return true, nil
	case strings.HasPrefix(key, kubeletPrefix):
		// The kubelet's: pod name/namespace/UID, service account,
		// secrets, fsGroup, volume name.
		return true, nil
	}
	return false, nil
}

// readOnlyOptions returns opts with "ro" (and without "rw") when readOnly.
func readOnlyOptions(opts []string, readOnly bool) []string {
	opts = slices.Clone(opts)
	if readOnly && !slices.Contains(opts, "ro") {
		opts = slices.DeleteFunc(opts, func(s string) bool { return s == "rw" })
		opts = append(opts, "ro")
	}
	return opts
}
