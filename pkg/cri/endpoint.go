package cri

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// EnvEndpoint is the environment variable that names the runtime endpoint
// when the caller does not, as for crictl.
const EnvEndpoint = "CONTAINER_RUNTIME_ENDPOINT"

// DefaultEndpoints are probed in this order when neither the caller nor
// [EnvEndpoint] names an endpoint: containerd, CRI-O, cri-dockerd (crictl's
// list and order).
var DefaultEndpoints = []string{
	"unix:///run/containerd/containerd.sock",
	"unix:///run/crio/crio.sock",
	"unix:///var/run/cri-dockerd.sock",
}

// ErrNoEndpoint is wrapped by the error of [ResolveEndpoint] when no endpoint
// is configured and none of [DefaultEndpoints] exists.
var ErrNoEndpoint = errors.New("no container runtime endpoint")

// ResolveEndpoint returns the endpoint to use, as a "unix://" URL: endpoint
// if it is not empty, else the value of [EnvEndpoint], else the first of
// [DefaultEndpoints] whose socket exists. Only the probed endpoints are
// checked for existence; a configured one is returned as it is, so that a
// runtime that is down is reported against the endpoint the operator chose.
func ResolveEndpoint(endpoint string) (string, error) {
	if endpoint == "" {
		endpoint = os.Getenv(EnvEndpoint)
	}
	if endpoint != "" {
		path, err := SocketPath(endpoint)
		if err != nil {
			return "", err
		}
		return "unix://" + path, nil
	}
	for _, e := range DefaultEndpoints {
		path, err := SocketPath(e)
		if err != nil {
			return "", err
		}
		if st, err := os.Stat(path); err == nil && st.Mode().Type() == os.ModeSocket {
			return e, nil
		}
	}
	return "", fmt.Errorf("%w: %s is not set and none of %s exists",
		ErrNoEndpoint, EnvEndpoint, strings.Join(DefaultEndpoints, ", "))
}

// SocketPath returns the absolute socket path of a "unix://" endpoint or of a
// bare absolute path.
func SocketPath(endpoint string) (string, error) {
	if strings.HasPrefix(endpoint, "/") {
		return filepath.Clean(endpoint), nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("parse endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "unix" {
		return "", fmt.Errorf("endpoint %q: only unix sockets are supported", endpoint)
	}
	path := u.Path
	if u.Host != "" || u.Opaque != "" {
		// "unix://run/x.sock" or "unix:run/x.sock": relative paths are
		// ambiguous for a daemon; refuse them.
		return "", fmt.Errorf("endpoint %q: socket path must be absolute", endpoint)
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("endpoint %q: socket path must be absolute", endpoint)
	}
	return filepath.Clean(path), nil
}
