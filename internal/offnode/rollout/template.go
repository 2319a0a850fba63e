package rollout

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// EnvPlugins is the variable of the mount pod's container naming the volume
// plugins it registers, separated by commas.
const EnvPlugins = boundary.EnvPlugins

// containerOf returns ds's container named name (nil if none).
func containerOf(ds *appsv1.DaemonSet, name string) *corev1.Container {
	for i, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == name {
			return &ds.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// pluginsOf reads the MOUNTPOD_PLUGINS variable of ds's container.
func pluginsOf(ds *appsv1.DaemonSet, container string) []string {
	c := containerOf(ds, container)
	if c == nil {
		return nil
	}
	for _, e := range c.Env {
		if e.Name == EnvPlugins {
			var out []string
			for _, p := range strings.Split(e.Value, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
			return out
		}
	}
	return nil
}

// driversOf returns the flexVolume drivers ds's container installs, as
// volumes name them: `mountpod serve` installs one when its environment
// sets MOUNTPOD_INSTALL_FLEXVOLUME_DIR, named by MOUNTPOD_FLEXVOLUME_DRIVER
// or the default (see boundary.FlexvolumeVolumeDriver). Its
// warnings name what the template leaves unknown: variables set from
// references, or the flags given as arguments instead.
func driversOf(ds *appsv1.DaemonSet, container string) (drivers, warnings []string) {
	c := containerOf(ds, container)
	if c == nil {
		return nil, nil
	}
	var dir, driver string
	for _, e := range c.Env {
		var dst *string
		switch e.Name {
		case boundary.EnvFlexvolumeDir:
			dst = &dir
		case boundary.EnvFlexvolumeDriver:
			dst = &driver
		default:
			continue
		}
		*dst = e.Value
		if e.ValueFrom != nil {
			warnings = append(warnings, fmt.Sprintf("container %s sets %s from a reference: its flexVolume driver is not known here (name it with --driver)", c.Name, e.Name))
		}
	}
	if len(c.EnvFrom) > 0 {
		warnings = append(warnings, fmt.Sprintf("container %s takes variables from envFrom: a flexVolume driver it installs that way is not known here (name it with --driver)", c.Name))
	}
	if slices.ContainsFunc(slices.Concat(c.Command, c.Args), func(a string) bool {
		return strings.Contains(a, "install-flexvolume") || strings.Contains(a, "flexvolume-driver")
	}) {
		warnings = append(warnings, fmt.Sprintf("container %s chooses its flexVolume driver with arguments: it is not known here (name it with --driver)", c.Name))
	}
	if dir == "" {
		return nil, warnings
	}
	d, err := boundary.FlexvolumeVolumeDriver(driver)
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("container %s: %v", c.Name, err))
		return nil, warnings
	}
	return append(drivers, d), warnings
}
