package flexvolume

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mountcontainers/mountcontainers/internal/shared/fs"
)

// secretKeyPrefix starts the option keys under which the kubelet passes
// the entries of a volume's secretRef, base64-encoded
// (kubernetes.io/secret/key).
const secretKeyPrefix = fs.KubeletPrefix + "secret/"

// minRedacted is the length below which a secret value is not looked for
// in a reply: a value that short is no credential, and replacing it would
// garble the message.
const minRedacted = 4

// redacted replaces a secret in a reply.
const redacted = "[redacted]"

// redact returns s with every secret the arguments of its call carry
// replaced in its message. The driver's own messages never quote a
// secret; the output of a mount utility, which a failure's message
// includes, might.
func redact(s Status, args []string) Status {
	for _, v := range secretsIn(args) {
		s.Message = strings.ReplaceAll(s.Message, v, redacted)
	}
	return s
}

// secretsIn returns the secrets of a call's arguments: the value of every
// kubernetes.io/secret/* key of each argument that is a JSON object, as
// given and base64-decoded, with and without surrounding white space.
// Longer values come first, so that a value is replaced before a part of
// it.
func secretsIn(args []string) []string {
	var out []string
	for _, a := range args {
		var fields map[string]json.RawMessage
		if json.Unmarshal([]byte(a), &fields) != nil {
			continue
		}
		for k, raw := range fields {
			if strings.HasPrefix(k, secretKeyPrefix) {
				out = append(out, secretForms(raw)...)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// secretForms returns the forms of one secret value worth looking for.
func secretForms(raw json.RawMessage) []string {
	var v string
	if json.Unmarshal(raw, &v) != nil {
		v = string(raw)
	}
	forms := []string{v, strings.TrimSpace(v)}
	if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v)); err == nil {
		forms = append(forms, string(dec), strings.TrimSpace(string(dec)))
	}
	var out []string
	for _, f := range forms {
		if len(f) >= minRedacted {
			out = append(out, f)
		}
	}
	return out
}
