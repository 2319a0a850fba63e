package boundary

// The environment of a mount pod's container that others read from its
// DaemonSet's template (the rollout, off the node) or set for it (the
// deploy overlays): one name each, here.
const (
	// EnvPlugins names the volume plugins the mount pod registers,
	// separated by commas (`mountpod serve --plugin`).
	EnvPlugins = "MOUNTPOD_PLUGINS"
	// EnvFlexvolumeDir is the kubelet's Flexvolume directory the mount pod
	// installs its driver into (`mountpod serve --install-flexvolume`).
	EnvFlexvolumeDir = "MOUNTPOD_INSTALL_FLEXVOLUME_DIR"
	// EnvFlexvolumeDriver is the driver directory it installs
	// (`mountpod serve --flexvolume-driver`).
	EnvFlexvolumeDriver = "MOUNTPOD_FLEXVOLUME_DRIVER"
)
