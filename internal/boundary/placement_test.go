package boundary

import (
	"context"
	"errors"
	"fmt"
	"testing"

	utilexec "k8s.io/utils/exec"
)

// TestResultOf holds the classification to the errors the resolver's and
// the shim's commands end with, k8s.io/utils/exec's among them.
func TestResultOf(t *testing.T) {
	own := errors.New("the caller's timeout")
	for _, tc := range []struct {
		err  error
		want Result
	}{
		{nil, ResultOK},
		{fmt.Errorf("run rbd: %w", utilexec.ErrExecutableNotFound), ResultNotFound},
		{fmt.Errorf("exec: %w", context.DeadlineExceeded), ResultTimeout},
		{fmt.Errorf("exec: %w", own), ResultTimeout},
		{context.Canceled, ResultCanceled},
		{fmt.Errorf("mount: %w", utilexec.CodeExitError{Err: errors.New("exit status 32"), Code: 32}), ResultExitError},
		{errors.New("the runtime is gone"), ResultError},
	} {
		if got := ResultOf(tc.err, own); got != tc.want {
			t.Errorf("ResultOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
