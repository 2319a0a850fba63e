package registration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
}

// String returns "namespace/name (uid UID, container NAME)".
func (r Registration) String() string {
	return fmt.Sprintf("%s/%s (uid %s, container %s)", r.PodNamespace, r.PodName, r.PodUID, r.ContainerName)
}

// Validate checks every field: the namespace and container name are DNS
// labels, the pod name is a DNS subdomain, the pod UID is a non-empty string
// without whitespace or control characters.
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
	return errors.Join(errs...)
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
