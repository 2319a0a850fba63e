package framework

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Taints returns the bed node's taints of key whose value is value (any
// value when value is empty).
func (b *Bed) Taints(t testing.TB, key, value string) []corev1.Taint {
	t.Helper()
	n, err := b.Client.CoreV1().Nodes().Get(context.Background(), b.Env.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", b.Env.NodeName, err)
	}
	var out []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if taintMatches(tn, key, value) {
			out = append(out, tn)
		}
	}
	return out
}

// RemoveTaints removes from every node of the bed every taint of key whose
// value is value (any value when value is empty), so that a failed test does
// not leave a node fenced for the tests after it. It never fails the test
// (it runs in cleanups): a failure is logged.
func (b *Bed) RemoveTaints(t testing.TB, key, value string) {
	t.Helper()
	ctx := context.Background()
	nodes := b.Client.CoreV1().Nodes()
	for _, node := range b.Env.Nodes {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := nodes.Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var kept []corev1.Taint
			for _, tn := range n.Spec.Taints {
				if !taintMatches(tn, key, value) {
					kept = append(kept, tn)
				}
			}
			if len(kept) == len(n.Spec.Taints) {
				return nil
			}
			n.Spec.Taints = kept
			_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Logf("remove taint %s=%s from node %s: %v", key, value, node.Name, err)
		}
	}
}

func taintMatches(tn corev1.Taint, key, value string) bool {
	return tn.Key == key && (value == "" || tn.Value == value)
}
