package registration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxFileSize is the largest registration file a reader accepts.
const MaxFileSize = 64 << 10

// Registration names the container that carries a volume plugin's utilities.
// The JSON keys are fixed by the MountContainers design.
type Registration struct {
	// PodNamespace is the namespace of the mount pod.
	PodNamespace string `json:"podNamespace"`
	// PodName is the name of the mount pod.
	PodName string `json:"podName"`
	// PodUID is the UID of the mount pod; it tells a pod from its successor
	// of the same name.
	PodUID string `json:"podUID"`
	// ContainerName is the container in the pod that has the utilities.
	ContainerName string `json:"containerName"`
	// ExecSocket, optional, is the unix socket of the mount pod's exec
	// service (client: package execserver), relative to the registration
	// directory, e.g. ".exec/<pod UID>.sock". It is relative so that it
	// names the same socket wherever a reader mounts the directory, and
	// cannot point outside it. An extension of the MountContainers design:
	// readers that do not know it ignore it.
	ExecSocket string `json:"execSocket,omitempty"`
	// ExecBatch, optional, is the absolute path in the container of a
	// program that runs a batch of commands sent in one ExecSync
	// (`PROGRAM exec-batch REQUEST...`, package execbatch), e.g.
	// "/usr/local/bin/mountpod". An extension of the MountContainers
	// design, as ExecSocket is.
	ExecBatch string `json:"execBatch,omitempty"`
}

// String returns "namespace/name (uid UID, container NAME)".
func (r Registration) String() string {
	return fmt.Sprintf("%s/%s (uid %s, container %s)", r.PodNamespace, r.PodName, r.PodUID, r.ContainerName)
}

// SamePod reports whether r and o name the same pod and container, whatever
// exec socket they advertise.
func (r Registration) SamePod(o Registration) bool {
	r.ExecSocket, o.ExecSocket = "", ""
	r.ExecBatch, o.ExecBatch = "", ""
	return r == o
}

// Validate checks every field: the namespace and container name are DNS
// labels, the pod name is a DNS subdomain, the pod UID is a non-empty string
// without whitespace or control characters, and ExecSocket, when set, is a
// clean relative path inside the directory (see [ValidateExecSocket]).
func (r Registration) Validate() error {
	var errs []error
	check := func(field, value string, rule func(string) []string) {
		if value == "" {
			errs = append(errs, fmt.Errorf("%s is missing", field))
			return
		}
		if msgs := rule(value); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s %q: %s", field, value, strings.Join(msgs, "; ")))
		}
	}
	check("podNamespace", r.PodNamespace, validation.IsDNS1123Label)
	check("podName", r.PodName, validation.IsDNS1123Subdomain)
	check("podUID", r.PodUID, validateUID)
	check("containerName", r.ContainerName, validation.IsDNS1123Label)
	if r.ExecSocket != "" {
		if err := ValidateExecSocket(r.ExecSocket); err != nil {
			errs = append(errs, err)
		}
	}
	if r.ExecBatch != "" {
		if err := ValidateExecBatch(r.ExecBatch); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ValidateExecBatch checks an ExecBatch value: a clean absolute path of at
// most 256 bytes without whitespace or control characters.
func ValidateExecBatch(s string) error {
	switch {
	case len(s) > 256:
		return fmt.Errorf("execBatch %q: longer than 256 bytes", s)
	case !filepath.IsAbs(s) || filepath.Clean(s) != s || s == "/":
		return fmt.Errorf("execBatch %q: must be a clean absolute path of a program in the container", s)
	case strings.ContainsFunc(s, func(c rune) bool { return c <= ' ' || c == 0x7f }):
		return fmt.Errorf("execBatch %q: must not contain whitespace or control characters", s)
	}
	return nil
}

// MaxExecSocketLen is the longest ExecSocket accepted. The whole socket path
// must also fit a unix socket address (107 bytes), which only the user of a
// directory can check.
const MaxExecSocketLen = 100

// ValidateExecSocket checks an ExecSocket value: a clean relative path
// (filepath.IsLocal: no "..", not absolute) of at most [MaxExecSocketLen]
// bytes without whitespace or control characters, whose last element is a
// name of its own (not ".").
func ValidateExecSocket(s string) error {
	switch {
	case len(s) > MaxExecSocketLen:
		return fmt.Errorf("execSocket %q: longer than %d bytes", s, MaxExecSocketLen)
	case !filepath.IsLocal(s) || filepath.Clean(s) != s || s == ".":
		return fmt.Errorf("execSocket %q: must be a clean path relative to the registration directory, without \"..\"", s)
	case strings.ContainsFunc(s, func(c rune) bool { return c <= ' ' || c == 0x7f }):
		return fmt.Errorf("execSocket %q: must not contain whitespace or control characters", s)
	}
	return nil
}

func validateUID(uid string) []string {
	if len(uid) > 128 {
		return []string{"must be at most 128 characters"}
	}
	for _, c := range uid {
		if c <= ' ' || c == 0x7f {
			return []string{"must not contain whitespace or control characters"}
		}
	}
	return nil
}

// Decode parses and validates the content of a registration file. Unknown
// fields are ignored; anything after the JSON object other than white space
// is an error.
func Decode(data []byte) (Registration, error) {
	var r Registration
	if len(data) > MaxFileSize {
		return r, fmt.Errorf("larger than %d bytes", MaxFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return Registration{}, fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil || !errors.Is(err, io.EOF) {
		return Registration{}, errors.New("malformed JSON: data after the object")
	}
	if err := r.Validate(); err != nil {
		return Registration{}, err
	}
	return r, nil
}

// Encode returns the file content for r, which must be valid.
func Encode(r Registration) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
