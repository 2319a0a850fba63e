// Package fs holds what every file system the node mounts through a mount
// pod shares, whatever the front end (the Flexvolume driver, a CSI driver)
// that checks a volume's options: the [Filesystem] interface and the
// [Mount] it makes, option errors, the keys the kubelet adds to a volume's
// options, and the administrator's allow-list of servers ([ServerPolicy]).
// It runs in the node's volume hosts, and in the mount pod, whose recovery
// checks a recorded mount's servers against the allow-list before it
// makes the mount again. Each file system is a package of its own below
// this one (glusterfs, cephfs); package known lists them.
package fs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// A Filesystem is what a driver knows of a file system it mounts: which
// options a volume may give, and the mount(8) call they make. Everything
// else is the driver's and shared by every file system: the call
// convention and replies, the checks of the target directory, the bounds,
// where mount(8) runs, the check that the node sees the mount, the mount
// record, the secret file and the unmount.
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
	// root can read, on a file system in memory (the driver's secrets
	// directory): the driver writes it before mount(8) runs, adds the option
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

// Describe names the mount in messages: What, or Source when What is
// empty.
func (m Mount) Describe() string {
	if m.What != "" {
		return m.What
	}
	return m.Source
}

// WithSecretFile returns m with the option Secret.Option=path, which
// names the file holding its secret.
func (m Mount) WithSecretFile(path string) Mount {
	m.Options = append(slices.Clone(m.Options), m.Secret.Option+"="+path)
	return m
}

// KeyMountOptions is the option key of a comma-separated list of mount
// options, each from the file system's allow list.
const KeyMountOptions = "mountOptions"

// Keys the kubelet adds to the options.
const (
	KeyFSType    = "kubernetes.io/fsType"
	KeyReadWrite = "kubernetes.io/readwrite"
	// KubeletPrefix starts every key the kubelet adds (pod name,
	// namespace and UID, service account, secrets, fsGroup, ...).
	KubeletPrefix = "kubernetes.io/"
)

// OptionError is a bad option: Field names it, as the user wrote it.
type OptionError struct {
	Field  string
	Reason string
}

// Error says which field is bad and why.
func (e *OptionError) Error() string {
	return fmt.Sprintf("invalid option %q: %s", e.Field, e.Reason)
}

// BadOption returns the *[OptionError] of field, its reason formatted as
// fmt.Sprintf does.
func BadOption(field, format string, args ...any) error {
	return &OptionError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Keys the kubelet adds that name the pod a volume is mounted for.
const (
	KeyPodNamespace = "kubernetes.io/pod.namespace"
	KeyPodName      = "kubernetes.io/pod.name"
	KeyPodUID       = "kubernetes.io/pod.uid"
)

// PodOf returns the pod the kubelet names in vals, or nil when it names
// none, or one that is not valid. The kubelet's keys override a volume's
// options, and the API server refuses them there: the pod's namespace
// decides which pods share a node's mount (volume.Shared); the rest is
// reported on.
func PodOf(vals map[string]string) *mountrecord.Pod {
	p := mountrecord.Pod{Namespace: vals[KeyPodNamespace], Name: vals[KeyPodName], UID: vals[KeyPodUID]}
	if p.Validate() != nil {
		return nil
	}
	return &p
}

// DecodeOptions decodes one JSON object whose values are all strings.
func DecodeOptions(raw []byte) (map[string]string, error) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("options are not a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("options: trailing data after the JSON object")
	}
	vals := make(map[string]string, len(fields))
	for _, k := range SortedKeys(fields) {
		var s string
		if err := json.Unmarshal(fields[k], &s); err != nil {
			return nil, BadOption(k, "must be a string")
		}
		vals[k] = s
	}
	return vals, nil
}

// CheckCommonKeys checks the keys every file system shares: the kubelet's
// kubernetes.io/fsType (empty or fsName) and kubernetes.io/readwrite; it
// reports whether key is one of them or another kubelet key, which the
// caller then skips, and whether the kubelet asks for a read-only mount.
func CheckCommonKeys(fsName, key, value string, readOnly *bool) (handled bool, err error) {
	switch {
	case key == KeyFSType:
		if value != "" && value != fsName {
			return true, BadOption(key, "%q: this driver mounts only %s", value, fsName)
		}
		return true, nil
	case key == KeyReadWrite:
		switch value {
		case "ro":
			*readOnly = true
		case "rw", "":
		default:
			return true, BadOption(key, "%q: want ro or rw", value)
		}
		return true, nil
	case strings.HasPrefix(key, KubeletPrefix):
		// The kubelet's: pod name/namespace/UID, service account,
		// secrets, fsGroup, volume name.
		return true, nil
	}
	return false, nil
}

// ReadOnlyOptions returns opts with "ro" (and without "rw") when readOnly.
func ReadOnlyOptions(opts []string, readOnly bool) []string {
	opts = slices.Clone(opts)
	if readOnly && !slices.Contains(opts, "ro") {
		opts = slices.DeleteFunc(opts, func(s string) bool { return s == "rw" })
		opts = append(opts, "ro")
	}
	return opts
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Pattern compiles expr on its first use rather than at package
// initialisation: the drivers and mountpod are started for every call,
// and a pattern with long repetitions ({16,256}) took milliseconds of each
// start to compile, whether the call used it or not.
func Pattern(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
