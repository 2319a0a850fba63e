//go:build e2e

package e2e

import (
	"fmt"
	"strings"
)

// mountPodDS describes a mount-pod DaemonSet of the mount-pod image, as the
// end-to-end tests run it: privileged, host network, the downward-API
// settings mountpod needs, pods labelled app=<App>.
type mountPodDS struct {
	Namespace, Name, App string
	Image                string
	Plugins              []string
	// RegistrationDir sets MOUNTPOD_REGISTRATION_DIR when not empty.
	RegistrationDir string
	// NodeSelector is a flow-style map body, e.g. "kubernetes.io/hostname: vm".
	NodeSelector string
	// GracePeriod is terminationGracePeriodSeconds.
	GracePeriod int
	// OnDelete sets updateStrategy OnDelete.
	OnDelete bool
	// Tolerate is a taint key the pods tolerate (NoSchedule), if not empty.
	Tolerate string
	// Readiness adds the `mountpod check` readiness probe.
	Readiness bool
	// Surge sets updateStrategy RollingUpdate with maxSurge 1 and
	// maxUnavailable 0: a new pod is made Ready before the old one is
	// deleted.
	Surge bool
	// Mounts are host paths mounted into the container.
	Mounts []hostPathMount
}

// hostPathMount is a hostPath volume and its mount.
type hostPathMount struct {
	Name, HostPath, MountPath, Type string
	Bidirectional                   bool
}

func (d mountPodDS) manifest() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: %s
  namespace: %s
spec:
  selector:
    matchLabels: {app: %s}
`, d.Name, d.Namespace, d.App)
	switch {
	case d.OnDelete:
		b.WriteString("  updateStrategy: {type: OnDelete}\n")
	case d.Surge:
		b.WriteString("  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n")
	}
	fmt.Fprintf(&b, `  template:
    metadata:
      labels: {app: %s}
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: %d
`, d.App, d.GracePeriod)
	if d.NodeSelector != "" {
		fmt.Fprintf(&b, "      nodeSelector: {%s}\n", d.NodeSelector)
	}
	if d.Tolerate != "" {
		fmt.Fprintf(&b, "      tolerations:\n      - {key: %s, operator: Exists, effect: NoSchedule}\n", d.Tolerate)
	}
	fmt.Fprintf(&b, `      containers:
      - name: mount
        image: %s
        imagePullPolicy: Never
        securityContext: {privileged: true}
        env:
        - name: MOUNTPOD_POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
        - name: MOUNTPOD_POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: MOUNTPOD_POD_UID
          valueFrom: {fieldRef: {fieldPath: metadata.uid}}
        - {name: MOUNTPOD_CONTAINER_NAME, value: mount}
        - {name: MOUNTPOD_PLUGINS, value: %q}
        # Metrics off: the node's port 9641 is the deploy/glusterfs mount
        # pod's (TestMetrics scrapes it); host-network pods share ports.
        - {name: MOUNTPOD_METRICS_ADDRESS, value: ""}
`, d.Image, strings.Join(d.Plugins, ","))
	if d.RegistrationDir != "" {
		fmt.Fprintf(&b, "        - {name: MOUNTPOD_REGISTRATION_DIR, value: %q}\n", d.RegistrationDir)
	}
	if d.Readiness {
		b.WriteString(`        readinessProbe:
          exec: {command: ["/usr/local/bin/mountpod", "check"]}
          # Probed each second; Ready flips only after 3 failures and a
          # probe may take 10 s on a busy machine.
          periodSeconds: 1
          timeoutSeconds: 10
          failureThreshold: 3
`)
	}
	b.WriteString("        volumeMounts:\n")
	for _, m := range d.Mounts {
		prop := ""
		if m.Bidirectional {
			prop = ", mountPropagation: Bidirectional"
		}
		fmt.Fprintf(&b, "        - {name: %s, mountPath: %q%s}\n", m.Name, m.MountPath, prop)
	}
	b.WriteString("      volumes:\n")
	for _, m := range d.Mounts {
		fmt.Fprintf(&b, "      - name: %s\n        hostPath: {path: %q, type: %s}\n", m.Name, m.HostPath, m.Type)
	}
	return b.String()
}
