package rollout

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/mountcontainers/mountcontainers/internal/boundary"
)

// podSelector decides which pods of a node the drain evicts.
type podSelector struct {
	client  kubernetes.Interface
	plugins []string
	drivers []string
	labels  labels.Selector
	all     bool
	force   bool
	// deleteEmptyDir evicts pods with emptyDir volumes, whose data goes
	// with them.
	deleteEmptyDir bool
	// fromCache lists from the API server's watch cache (resourceVersion
	// "0"; it may lag by moments): a dry run's plan, node after node, needs
	// no quorum read of every pod of the cluster for each node, which is
	// what a consistent list costs when the cache cannot serve it.
	fromCache bool
}

func (s *podSelector) setLabels(sel string) error {
	l, err := labels.Parse(sel)
	if err != nil {
		return err
	}
	s.labels = l
	return nil
}

// empty reports whether the selector selects nothing but by --all-pods.
func (s *podSelector) empty() bool {
	return len(s.plugins) == 0 && len(s.drivers) == 0 && s.labels == nil
}

// String describes the selection for a person.
func (s *podSelector) String() string {
	if s.all {
		return "every pod that is not a DaemonSet's or a mirror pod"
	}
	var parts []string
	if len(s.plugins) > 0 {
		parts = append(parts, "pods with volumes of "+strings.Join(s.plugins, ", "))
	}
	if len(s.drivers) > 0 {
		parts = append(parts, "pods with flexVolume/CSI volumes of "+strings.Join(s.drivers, ", "))
	}
	if s.labels != nil {
		parts = append(parts, "pods labelled "+s.labels.String())
	}
	return strings.Join(parts, "; ")
}

// inTreeSources maps in-tree plugin names to a test of a volume source.
var inTreeSources = map[string]func(*corev1.PersistentVolumeSource, *corev1.Volume) bool{
	"kubernetes.io/glusterfs": func(pv *corev1.PersistentVolumeSource, v *corev1.Volume) bool {
		return (pv != nil && pv.Glusterfs != nil) || (v != nil && v.Glusterfs != nil)
	},
	"kubernetes.io/rbd": func(pv *corev1.PersistentVolumeSource, v *corev1.Volume) bool {
		return (pv != nil && pv.RBD != nil) || (v != nil && v.RBD != nil)
	},
	"kubernetes.io/cephfs": func(pv *corev1.PersistentVolumeSource, v *corev1.Volume) bool {
		return (pv != nil && pv.CephFS != nil) || (v != nil && v.CephFS != nil)
	},
}

// usesVolumes reports which of pod's volumes the mount pod serves ("" if
// none).
func (s *podSelector) usesVolumes(ctx context.Context, pod *corev1.Pod) (string, error) {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if s.volumeMatches(nil, v) {
			return v.Name, nil
		}
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = pod.Name + "-" + v.Name
		}
		if claim == "" {
			continue
		}
		pvc, err := s.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("get pvc %s/%s: %w", pod.Namespace, claim, err)
		}
		if pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := s.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("get pv %s: %w", pvc.Spec.VolumeName, err)
		}
		if s.volumeMatches(&pv.Spec.PersistentVolumeSource, nil) {
			return v.Name + " (pv " + pv.Name + ")", nil
		}
	}
	return "", nil
}

func (s *podSelector) volumeMatches(pv *corev1.PersistentVolumeSource, v *corev1.Volume) bool {
	for _, p := range s.plugins {
		if f := inTreeSources[p]; f != nil && f(pv, v) {
			return true
		}
	}
	var flex, csi string
	if pv != nil {
		if pv.FlexVolume != nil {
			flex = pv.FlexVolume.Driver
		}
		if pv.CSI != nil {
			csi = pv.CSI.Driver
		}
	}
	if v != nil {
		if v.FlexVolume != nil {
			flex = v.FlexVolume.Driver
		}
		if v.CSI != nil {
			csi = v.CSI.Driver
		}
	}
	return (flex != "" && slices.Contains(s.drivers, flex)) || (csi != "" && slices.Contains(s.drivers, csi))
}

// selection is the outcome of selecting a node's pods.
type selection struct {
	evict []corev1.Pod
	// warnings name selected pods the drain leaves alone.
	warnings []string
}

// podsToEvict lists node's pods and selects those to evict. A selected pod
// that no controller owns is an error unless force is set, and one with an
// emptyDir volume unless deleteEmptyDir is set.
func (s *podSelector) podsToEvict(ctx context.Context, node string) (*selection, error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()}
	if s.fromCache {
		opts.ResourceVersion = "0"
	}
	list, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	sel := &selection{}
	var bare, withData []string
	for _, pod := range list.Items {
		if pod.Spec.NodeName != node || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		why := ""
		switch {
		case s.all:
			why = "all pods"
		case s.labels != nil && s.labels.Matches(labels.Set(pod.Labels)):
			why = "labels"
		default:
			vol, err := s.usesVolumes(ctx, &pod)
			if err != nil {
				return nil, err
			}
			if vol != "" {
				why = "volume " + vol
			}
		}
		if why == "" {
			continue
		}
		name := pod.Namespace + "/" + pod.Name
		ref := metav1.GetControllerOf(&pod)
		switch {
		case pod.Annotations[corev1.MirrorPodAnnotationKey] != "":
			if !s.all {
				sel.warnings = append(sel.warnings, fmt.Sprintf("%s (%s) is a static pod: not evicted", name, why))
			}
		case ref != nil && ref.Kind == "DaemonSet":
			if !s.all {
				sel.warnings = append(sel.warnings, fmt.Sprintf("%s (%s) belongs to a DaemonSet: not evicted", name, why))
			}
		case ref == nil && !s.force:
			bare = append(bare, name)
		default:
			if v := emptyDirVolumes(&pod); len(v) > 0 && !s.deleteEmptyDir {
				withData = append(withData, fmt.Sprintf("%s (emptyDir %s)", name, strings.Join(v, ", ")))
			}
			sel.evict = append(sel.evict, pod)
		}
	}
	var errs []error
	if len(bare) > 0 {
		errs = append(errs, fmt.Errorf("pods %s have no controller: evicted, they would not come back (--force evicts them anyway)", strings.Join(bare, ", ")))
	}
	if len(withData) > 0 {
		errs = append(errs, fmt.Errorf("pods %s have emptyDir volumes: evicting them deletes that data (--delete-emptydir-data evicts them anyway)", strings.Join(withData, ", ")))
	}
	return sel, errors.Join(errs...)
}

// emptyDirVolumes names pod's emptyDir volumes.
func emptyDirVolumes(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			names = append(names, v.Name)
		}
	}
	return names
}

// MountMatcher tells the mounts a mount pod serves from the others.
type MountMatcher struct {
	fragments []string
	fstypes   []string
	patterns  []*regexp.Regexp
}

// NewMountMatcher matches the mounts of plugins (in-tree plugin names such
// as kubernetes.io/glusterfs) and drivers (flexVolume or CSI driver names)
// below the kubelet's pods and plugins directories, the mounts of the given
// file-system types, and the mount points matching one of the patterns.
func NewMountMatcher(plugins, drivers, fstypes, patterns []string) (*MountMatcher, error) {
	m := &MountMatcher{fstypes: fstypes}
	for _, p := range plugins {
		m.fragments = append(m.fragments,
			"/volumes/"+boundary.EscapePluginName(p)+"/",
			"/plugins/"+p+"/")
	}
	for _, d := range drivers {
		m.fragments = append(m.fragments,
			"/volumes/"+boundary.EscapePluginName(d)+"/",
			// The Flexvolume driver's node mounts its pods share
			// (flexvolume.SharedRoot).
			"/plugins/"+boundary.EscapePluginName(d)+"/",
			"/plugins/kubernetes.io/flexvolume/"+d+"/",
			"/plugins/kubernetes.io/csi/"+d+"/")
	}
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("mount pattern %q: %w", p, err)
		}
		m.patterns = append(m.patterns, re)
	}
	return m, nil
}

// Match reports whether the mount pod serves m.
func (m *MountMatcher) Match(mt Mount) bool {
	target := mt.Target + "/"
	for _, f := range m.fragments {
		if strings.Contains(target, f) {
			return true
		}
	}
	if slices.Contains(m.fstypes, mt.FSType) {
		return true
	}
	for _, re := range m.patterns {
		if re.MatchString(mt.Target) {
			return true
		}
	}
	return false
}
