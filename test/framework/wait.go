package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Poll calls cond every interval until it returns true, returns an error, or
// timeout passes. The error names what was waited for and the last state cond
// reported through its string result.
func Poll(ctx context.Context, what string, interval, timeout time.Duration, cond func(ctx context.Context) (done bool, state string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		done, state, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if done {
			return nil
		}
		last = state
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: timed out after %s (last state: %s)", what, timeout, last)
		case <-time.After(interval):
		}
	}
}

// podState summarizes a pod for error messages.
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf(" %s:waiting(%s: %s)", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf(" %s:terminated(%s, exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
		case c.State.Running != nil:
			s += fmt.Sprintf(" %s:running(ready=%t)", c.Name, c.Ready)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf(" %s=%s(%s)", c.Type, c.Status, c.Message)
		}
	}
	return s
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitPod waits until the named pod exists and is Running (and Ready when
// ready is true), failing the test after timeout. It returns the pod.
func (b *Bed) WaitPod(t testing.TB, namespace, name string, ready bool, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := Poll(context.Background(), fmt.Sprintf("pod %s/%s running", namespace, name), 250*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			p, err := b.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "not found", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			pod = p
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return false, "", fmt.Errorf("pod ended: %s", podState(p))
			}
			return p.Status.Phase == corev1.PodRunning && (!ready || podReady(p)), podState(p), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// WaitPodsBySelector waits until n pods match the label selector in namespace
// and all of them are Running (and Ready when ready is true); it returns them.
// Prefer it over `rollout status` for DaemonSets: right after the node turns
// Ready a DaemonSet can briefly report 0 desired pods.
func (b *Bed) WaitPodsBySelector(t testing.TB, namespace, selector string, n int, ready bool, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := Poll(context.Background(), fmt.Sprintf("%d running pod(s) %q in %s", n, selector, namespace), 250*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			list, err := b.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err.Error(), nil
			}
			pods = list.Items
			state := fmt.Sprintf("%d pod(s)", len(pods))
			ok := len(pods) == n
			for i := range pods {
				p := &pods[i]
				state += fmt.Sprintf("; %s: %s", p.Name, podState(p))
				if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || (ready && !podReady(p)) {
					ok = false
				}
			}
			return ok, state, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// WaitPodGone waits until the named pod no longer exists (or exists with a
// different UID when uid is not empty).
func (b *Bed) WaitPodGone(t testing.TB, namespace, name string, uid types.UID, timeout time.Duration) {
	t.Helper()
	err := Poll(context.Background(), fmt.Sprintf("pod %s/%s gone", namespace, name), 250*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			p, err := b.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, err.Error(), nil
			}
			if uid != "" && p.UID != uid {
				return true, "", nil
			}
			return false, podState(p), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// WaitNodeReady waits until the bed's node reports Ready.
func (b *Bed) WaitNodeReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := b.waitNodeReady(context.Background(), timeout); err != nil {
		t.Fatal(err)
	}
}

func (b *Bed) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	return Poll(ctx, "node "+b.Env.NodeName+" Ready", 500*time.Millisecond, timeout,
		func(ctx context.Context) (bool, string, error) {
			n, err := b.Client.CoreV1().Nodes().Get(ctx, b.Env.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s: %s", c.Status, c.Message), nil
				}
			}
			return false, "no Ready condition", nil
		})
}

// InlineFlexvolumeLabel set to "allowed" opts a namespace out of the
// policies that admit the project's Flexvolume drivers only through
// PersistentVolumes (deploy/policy, shipped by deploy/glusterfs and
// deploy/cephfs for their drivers): an administrator's decision
// (deploy/README.md).
const InlineFlexvolumeLabel = "mountcontainers.io/inline-flexvolume"

// CreateNamespace creates a namespace for one test, deletes it at cleanup, and
// dumps its pods and events if the test failed. The default ServiceAccount is
// waited for, because pods are rejected until it exists. The namespace is
// labelled InlineFlexvolumeLabel=allowed: the tests mount the drivers
// through inline flexVolumes while the overlays they apply ship the
// policies (TestFlexvolumePVOnlyPolicy removes the label).
func (b *Bed) CreateNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := b.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{InlineFlexvolumeLabel: "allowed"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		zero := int64(0)
		_ = b.Client.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = b.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	b.DumpOnFailure(t, name)
	err = Poll(ctx, "default ServiceAccount in "+name, 200*time.Millisecond, time.Minute,
		func(ctx context.Context) (bool, string, error) {
			_, err := b.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, fmt.Sprint(err), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return name
}
