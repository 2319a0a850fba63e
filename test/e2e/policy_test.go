//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mountcontainers/mountcontainers/test/framework"
)

// TestFlexvolumePVOnlyPolicy applies deploy/policy, the
// ValidatingAdmissionPolicy that keeps pod authors from naming the
// project's Flexvolume drivers (GlusterFS, CephFS) inline (deploy/glusterfs
// and deploy/cephfs ship it for their drivers): a pod with an inline
// flexVolume of either driver is refused, naming the driver and the
// volume; one whose volume comes from a PersistentVolume is admitted. The
// same inline pods are admitted before the policy is applied (the negative
// control), and again once the namespace is labelled
// mountcontainers.io/inline-flexvolume=allowed (the opt-out; the test's
// namespace starts with it, as every test namespace does, and loses it
// once the policy is applied). Pods are created with server-side dry run,
// which goes through every admission step, policies included, and leaves
// nothing to mount.
func TestFlexvolumePVOnlyPolicy(t *testing.T) {
	bed := framework.Current(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ns := bed.CreateNamespace(t, "policy")
	ctx := context.Background()
	pods := bed.Client.CoreV1().Pods(ns)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	drivers := []struct {
		name    string
		options map[string]string
		secret  *corev1.LocalObjectReference
	}{
		{glusterDriver, map[string]string{"server": "192.0.2.1", "volume": glusterVolume}, nil},
		{cephfsDriver, map[string]string{"monitors": "192.0.2.1"}, &corev1.LocalObjectReference{Name: "ceph-key"}},
	}
	inline := map[string]*corev1.Pod{}
	for _, d := range drivers {
		// An emptyDir first: the refusal must name the volume at fault.
		pod := policyPod("inline", corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{
			Driver: d.name, Options: d.options, SecretRef: d.secret,
		}}, bed.Env.BaseImage)
		pod.Spec.Volumes = append([]corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, pod.Spec.Volumes...)
		if _, err := pods.Create(ctx, pod, dryRun); err != nil {
			t.Fatalf("before the policy, the inline pod of %s is refused already: %v", d.name, err)
		}
		inline[d.name] = pod
	}

	policyDir := filepath.Join(root, "deploy/policy")
	bed.ApplyKustomize(t, policyDir)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if r := bed.RunKubectl(ctx, "", "delete", "--ignore-not-found", "-k", policyDir); r.Err != nil {
			t.Errorf("delete the policy: %v", r.Err)
		}
	})

	// The namespace opts out no more.
	bed.Kubectl(t, "label", "namespace", ns, framework.InlineFlexvolumeLabel+"-")

	// The API server loads a new policy asynchronously: ask until it refuses.
	start := time.Now()
	err = framework.Poll(ctx, "the policy refuses an inline flexVolume", 200*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			_, err := pods.Create(ctx, inline[glusterDriver], dryRun)
			return err != nil, "admitted", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("policy in force %s after apply", time.Since(start).Round(time.Millisecond))

	for _, d := range drivers {
		t.Run(path.Base(d.name), func(t *testing.T) {
			_, refusal := pods.Create(ctx, inline[d.name], dryRun)
			if refusal == nil {
				t.Fatalf("inline flexVolume of %s admitted", d.name)
			}
			if !apierrors.IsInvalid(refusal) && !apierrors.IsForbidden(refusal) {
				t.Fatalf("inline pod refused with %v, want the policy's Forbidden/Invalid", refusal)
			}
			msg := refusal.Error()
			for _, want := range []string{"mountcontainers-flexvolume-pv-only", "driver " + d.name + " may be used only through a PersistentVolume", "(volume data)"} {
				if !strings.Contains(msg, want) {
					t.Errorf("refusal %q does not mention %q", msg, want)
				}
			}

			// Through a PersistentVolume: admitted.
			pvName := ns + "-" + path.Base(d.name)
			claim := "data-" + path.Base(d.name)
			var secret *corev1.SecretReference
			if d.secret != nil {
				secret = &corev1.SecretReference{Name: d.secret.Name, Namespace: ns}
			}
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: pvName},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              "",
					ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
					PersistentVolumeSource: corev1.PersistentVolumeSource{FlexVolume: &corev1.FlexPersistentVolumeSource{
						Driver: d.name, Options: d.options, SecretRef: secret,
					}},
				},
			}
			if _, err := bed.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = bed.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
			})
			empty := ""
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					StorageClassName: &empty,
					VolumeName:       pvName,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			if _, err := bed.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			viaPV := policyPod("via-pv", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}, bed.Env.BaseImage)
			if _, err := pods.Create(ctx, viaPV, dryRun); err != nil {
				t.Fatalf("pod using %s through a PersistentVolume refused: %v", d.name, err)
			}
		})
	}
	// Other inline volumes, and other flexVolume drivers, stay allowed.
	other := policyPod("other", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, bed.Env.BaseImage)
	if _, err := pods.Create(ctx, other, dryRun); err != nil {
		t.Fatalf("pod with an emptyDir refused: %v", err)
	}
	foreign := policyPod("foreign", corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "example.com/nfs"}}, bed.Env.BaseImage)
	if _, err := pods.Create(ctx, foreign, dryRun); err != nil {
		t.Fatalf("pod with another vendor's inline flexVolume refused: %v", err)
	}

	// The opt-out: the namespace labelled, the binding skips it (the API
	// server sees the label through its cache: ask until it admits).
	bed.Kubectl(t, "label", "namespace", ns, framework.InlineFlexvolumeLabel+"=allowed")
	for _, d := range drivers {
		err := framework.Poll(ctx, "the inline pod of "+d.name+" admitted in the opted-out namespace", 200*time.Millisecond, time.Minute,
			func(ctx context.Context) (bool, string, error) {
				_, err := pods.Create(ctx, inline[d.name], dryRun)
				return err == nil, fmt.Sprint(err), nil
			})
		if err != nil {
			t.Error(err)
		}
	}
}

func policyPod(name string, vol corev1.VolumeSource, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: image, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sleep", "infinity"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: vol}},
		},
	}
}
