// Package mountrecord keeps what is needed to make a mount again: one
// record per FUSE mount made through a mount pod, written by the volume host
// that made it (pkg/exec's Mounter, so the Flexvolume driver too) and read
// by the mount pod, which brings the mount back when its FUSE daemon dies
// (package recovery).
//
// # Where and how
//
// Records live in [Dir] of the registration directory, ".mounts", a
// directory that registration watchers and listings skip (dotfiles), one
// file per mount target named after the target's scope ([boundary.MountKey] plus
// ".json"). Files and the directory are root-only (0600, 0700), written
// atomically and durably (internal/shared/atomicfile) and read with the paranoia of
// a registration (registration.ReadTrusted: regular file, no symlink, owned
// by root, not writable by others, bounded size). A record is removed when
// its mount is unmounted through the Mounter, and dropped by the mount pod
// when its target is no longer a mount point.
//
// # Secrets
//
// No secret is ever written. A mount made with sensitive options
// (mount.Interface's MountSensitive) is recorded without its options and
// marked not recoverable, with the reason: bringing it back needs a person
// or the volume host, not the mount pod.
package mountrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
	"github.com/mountcontainers/mountcontainers/internal/shared/atomicfile"
	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

// Dir is the directory of the records, below the registration directory.
const Dir = ".mounts"

// Version is the format version this package writes and reads.
const Version = 1

// MaxSize bounds a record file.
const MaxSize = 64 << 10

// Record is what is needed to make a mount again.
type Record struct {
	Version int `json:"version"`
	// Plugin is the volume plugin whose mount pod made the mount.
	Plugin string `json:"plugin"`
	// Source, Target, FSType and Options are mount(8)'s.
	Source  string   `json:"source"`
	Target  string   `json:"target"`
	FSType  string   `json:"fstype"`
	Options []string `json:"options,omitempty"`
	// NotRecoverable says why the mount pod must not make this mount again
	// by itself (its options held a secret, which is never recorded).
	NotRecoverable string `json:"notRecoverable,omitempty"`
	// Pod is the workload pod the mount was made for, when the volume host
	// knows it (the kubelet gives it to a Flexvolume driver): the recovery
	// reports on it with an Event.
	Pod *Pod `json:"pod,omitempty"`
}

// Pod names a pod.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Validate checks p as the API server would take it in an Event's
// involvedObject: a DNS label namespace, a DNS subdomain name, a UID of
// letters, digits and dashes.
func (p Pod) Validate() error {
	switch {
	case !dnsName(p.Namespace, 63, false):
		return fmt.Errorf("pod namespace %q: want a DNS label", p.Namespace)
	case !dnsName(p.Name, 253, true):
		return fmt.Errorf("pod name %q: want a DNS subdomain", p.Name)
	case !validUID(p.UID):
		return fmt.Errorf("pod UID %q: want letters, digits and dashes", p.UID)
	}
	return nil
}

// validUID reports whether s is a pod UID: 1 to 64 letters, digits and
// dashes.
func validUID(s string) bool {
	return s != "" && len(s) <= 64 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == ""
}

// String is namespace/name.
func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// TargetPodUID returns the UID of the pod whose volume directory target
// is, as the kubelet lays it out: <root>/pods/<uid>/volumes/<plugin>/<name>.
// It reports false for a target laid out otherwise.
func TargetPodUID(target string) (string, bool) {
	volumes := path.Dir(path.Dir(path.Clean(target)))
	podDir := path.Dir(volumes)
	uid := path.Base(podDir)
	if path.Base(volumes) != "volumes" || path.Base(path.Dir(podDir)) != "pods" || !validUID(uid) {
		return "", false
	}
	return uid, true
}

// CheckPod checks that r's Pod, which the volume's options name, is the
// pod whose volume directory holds r's target, which the kubelet alone
// chooses. A record that names no pod passes.
func (r Record) CheckPod() error {
	if r.Pod == nil {
		return nil
	}
	uid, ok := TargetPodUID(r.Target)
	switch {
	case !ok:
		return fmt.Errorf("pod %s (UID %s) named for target %s, which is not in a pod's volume directory", r.Pod, r.Pod.UID, r.Target)
	case uid != r.Pod.UID:
		return fmt.Errorf("pod %s (UID %s) named for target %s, which is in the volume directory of pod UID %s", r.Pod, r.Pod.UID, r.Target, uid)
	}
	return nil
}

// dnsName reports whether s is a DNS-1123 label (or, with dots, a
// subdomain of such labels) of at most max characters.
func dnsName(s string, max int, dots bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	labels := []string{s}
	if dots {
		labels = strings.Split(s, ".")
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Recoverable reports whether fstype is one whose mounts die with a
// process, and are recorded: FUSE types (fuse, fuseblk, fuse.*) and the
// FUSE clients mounted through a helper of their own (glusterfs,
// ceph-fuse).
func Recoverable(fstype string) bool { return boundary.FUSEClientType(fstype) }

// Validate checks r: a known version, a valid plugin name, an absolute
// clean target, a source and a type without NUL, options without NUL or
// commas (each is one option).
func (r Record) Validate() error {
	switch {
	case r.Version != Version:
		return fmt.Errorf("version %d, want %d", r.Version, Version)
	case r.Target == "" || !path.IsAbs(r.Target) || path.Clean(r.Target) != r.Target || strings.ContainsRune(r.Target, 0):
		return fmt.Errorf("target %q: want an absolute, clean path", r.Target)
	case r.Source == "" || strings.ContainsRune(r.Source, 0):
		return fmt.Errorf("source %q: want a non-empty string without NUL", r.Source)
	case !Recoverable(r.FSType):
		return fmt.Errorf("file system type %q is not one that is recorded", r.FSType)
	}
	if err := boundary.ValidatePluginName(r.Plugin); err != nil {
		return err
	}
	for _, o := range r.Options {
		if o == "" || strings.ContainsAny(o, ",\x00") {
			return fmt.Errorf("option %q: want one non-empty option without commas or NUL", o)
		}
	}
	if r.NotRecoverable != "" && len(r.Options) > 0 {
		return errors.New("a record that is not recoverable keeps no options")
	}
	if r.Pod != nil {
		return r.Pod.Validate()
	}
	return nil
}

// FileName returns the base name of target's record.
func FileName(target string) string { return boundary.MountKey(target) + ".json" }

// Write records r in dir (the registration directory's [Dir]), atomically
// and durably, replacing any record of the same target.
func Write(dir string, r Record) error {
	r.Version = Version
	if err := r.Validate(); err != nil {
		return fmt.Errorf("mount record of %s: %w", r.Target, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mount record of %s: %w", r.Target, err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, FileName(r.Target))
	if err := atomicfile.WriteFile(p, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("mount record of %s: %w", r.Target, err)
	}
	return nil
}

// Remove removes target's record from dir; a missing one is not an error.
func Remove(dir, target string) error {
	err := os.Remove(filepath.Join(dir, FileName(path.Clean(target))))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the mount record of %s: %w", target, err)
	}
	if err == nil {
		return atomicfile.SyncDir(dir)
	}
	return nil
}

// Decode parses and validates one record.
func Decode(data []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, errors.New("decode: data after the record")
	}
	if err := r.Validate(); err != nil {
		return Record{}, err
	}
	if len(r.Options) == 0 {
		r.Options = nil // "options": [] is no options
	}
	return r, nil
}

// Entry is one file of a listing: its record, or why it was refused.
type Entry struct {
	Path   string
	Record Record
	Err    error
}

// List reads every record in dir, sorted by file name, with dir and its
// ancestors checked once ([registration.ReadTrustedDir]). A file that
// cannot be trusted or decoded, or whose name is not its target's, is
// returned with Err set rather than failing the listing; a directory that
// cannot be trusted fails it. A missing directory lists as empty.
func List(dir string) ([]Entry, error) {
	files, err := registration.ReadTrustedDir(dir, MaxSize, isRecordName)
	if err != nil {
		return nil, fmt.Errorf("list mount records in %s: %w", dir, err)
	}
	var out []Entry
	for _, f := range files {
		out = append(out, entryOf(dir, f))
	}
	return out, nil
}

// isRecordName reports whether a file of the records' directory is named
// as a record is.
func isRecordName(name string) bool {
	return !strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".json")
}

// entryOf decodes the record f of dir, read by ReadTrustedDir.
func entryOf(dir string, f registration.TrustedFile) Entry {
	e := Entry{Path: filepath.Join(dir, f.Name), Err: f.Err}
	if e.Err == nil {
		e.Record, e.Err = Decode(f.Data)
		if e.Err == nil && FileName(e.Record.Target) != f.Name {
			e.Err = fmt.Errorf("names target %s, whose record is %s", e.Record.Target, FileName(e.Record.Target))
		}
		if e.Err != nil {
			e.Err = fmt.Errorf("mount record %s: %w", e.Path, e.Err)
		}
	}
	return e
}
