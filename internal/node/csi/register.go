package csi

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Registrar answers the kubelet's plugin watcher (its plugins_registry
// directory): it names the driver and its CSI socket, so that the kubelet
// calls the driver for volumes of its name. It is the protocol of the
// node-driver-registrar sidecar, served by the driver itself.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer
	// Name is the driver's name.
	Name string
	// Endpoint is the path of the driver's CSI socket as the kubelet
	// reaches it.
	Endpoint string
	// Log receives the kubelet's verdict; nil discards it.
	Log *slog.Logger
}

// GetInfo names the driver, its socket and the CSI versions it speaks.
func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.Name, Endpoint: r.Endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

// NotifyRegistrationStatus logs whether the kubelet took the driver.
func (r *Registrar) NotifyRegistrationStatus(ctx context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if r.Log != nil {
		if s.GetPluginRegistered() {
			r.Log.InfoContext(ctx, "registered with the kubelet", "driver", r.Name)
		} else {
			r.Log.ErrorContext(ctx, "the kubelet refused the driver", "driver", r.Name, "err", s.GetError())
		}
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Serve serves the registration on the socket path (in the kubelet's
// plugins_registry directory) until ctx ends, and removes the socket then,
// which unregisters the driver.
func (r *Registrar) Serve(ctx context.Context, path string) error {
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	return serveUnix(ctx, path, srv, nil, 0)
}
